//! The memory ceiling: how much memory tally may hold, for every command,
//! so that an input too large for the machine ends in an error naming it
//! and the line reached rather than an out-of-memory abort.
//!
//! `tally --memory-limit SIZE` sets it for one run ([`set_memory_limit`]),
//! else `TALLY_MAX_MEMORY`: a size in bytes with an optional `K`, `M`,
//! `G` or `T` suffix (powers of 1024), or `0`/`none` for no ceiling. Unset,
//! it is the smallest of three quarters of the physical memory, three
//! quarters of the control group's memory limit, and half of what the
//! process's address-space and data-size limits (`ulimit -v`, `-d`) leave
//! once tally has started (its code and libraries take some 25 MB of
//! address space; the other half is for what tally maps besides its
//! counted memory: thread stacks, the allocator's slack), so that whatever
//! bounds tally's memory, tally stops first with an error instead of an
//! abort.
//!
//! The `tally` binary counts every byte it allocates ([`Allocator`],
//! turned on by [`enforce`]): readers stop at the ceiling between chunks
//! ([`over_ceiling`]) with an error naming the input and the line, and
//! any other allocation ends tally with the same kind of line a quarter
//! past it, or when the system refuses memory (see the `heap` module).
//! Without that allocator (the libraries in other programs), a full load
//! stops when the records its reader keeps pass the ceiling.

mod heap;

pub use heap::{Allocator, enforce, over_ceiling};
pub(crate) use heap::{opened, reading};

use crate::error::Error;
use std::sync::OnceLock;

/// The memory a full load of `tally convert` may give to every record as
/// read before it reads again keeping each distinct record once (repeats
/// summed; see the `fold` module), for inputs of unknown or small size:
/// ordinary profiles convert line for line, and a file of many repeated
/// lines needs no more than its distinct records.
pub const FOLD_ABOVE: u64 = 64 << 20;

/// The memory a full load may give to every record as read before it
/// folds instead (see [`FOLD_ABOVE`]), for inputs whose decompressed
/// sizes, where known, sum to `content_bytes`
/// ([`Source::content_size_hint`](crate::Source::content_size_hint)),
/// under the ceiling `ceiling`.
///
/// Every record as read takes about the file's size in memory (counted
/// by capacity, up to twice that as vectors grow: a 105 MB
/// instruction-level profile peaks at 127 MB), while folding keeps an
/// index entry besides each distinct record (1.5 GB for that file, whose
/// records are nearly all distinct, and five times the time). So an
/// input is read exactly while it stays within twice its size: only
/// inputs whose records cost more than their text (millions of short
/// repeated lines, or gzip of unknown or implausible size) are folded.
/// Half the ceiling at most, so that the folded read has room.
pub fn exact_limit(content_bytes: u64, ceiling: Option<u64>) -> u64 {
    let want = FOLD_ABOVE.max(content_bytes.saturating_mul(2));
    ceiling.map_or(want, |c| want.min(c / 2))
}

/// The environment variable that sets the ceiling.
pub const VARIABLE: &str = "TALLY_MAX_MEMORY";

/// The ceiling given for this process, which the environment variable
/// then does not override.
static GIVEN: OnceLock<Option<u64>> = OnceLock::new();

/// Sets the ceiling for this process (tally's `--memory-limit`), before
/// any input is read; `None` is no ceiling. A size that is not one is an
/// error naming the option. Only the first call counts.
pub fn set_memory_limit(option: &str, size: &str) -> Result<(), Error> {
    let limit = parse_size(size).ok_or_else(|| {
        Error::Incompatible(format!(
            "{option}: expected a size such as 512M or 16G, or `none`, got `{size}`"
        ))
    })?;
    let _ = GIVEN.set(limit);
    Ok(())
}

/// The ceiling in bytes, `None` for none; an error for a value that is no
/// size.
pub fn memory_limit() -> Result<Option<u64>, Error> {
    if let Some(&given) = GIVEN.get() {
        return Ok(given);
    }
    static LIMIT: OnceLock<Result<Option<u64>, String>> = OnceLock::new();
    LIMIT
        .get_or_init(|| match std::env::var(VARIABLE) {
            Ok(v) => parse_size(&v).ok_or_else(|| {
                format!("{VARIABLE}: expected a size such as 512M or 16G, or `none`, got `{v}`")
            }),
            Err(_) => Ok(default_limit()),
        })
        .clone()
        .map_err(Error::Incompatible)
}

/// `512M`, `16G`, `1048576`; `0` and `none` are no ceiling.
fn parse_size(v: &str) -> Option<Option<u64>> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("none") {
        return Some(None);
    }
    let (digits, shift) = match v.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&v[..v.len() - 1], 10),
        b'M' => (&v[..v.len() - 1], 20),
        b'G' => (&v[..v.len() - 1], 30),
        b'T' => (&v[..v.len() - 1], 40),
        _ => (v, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    let bytes = n.checked_mul(1 << shift)?;
    Some((bytes > 0).then_some(bytes))
}

/// The ceiling when `TALLY_MAX_MEMORY` is unset; see the module docs.
fn default_limit() -> Option<u64> {
    [
        physical_memory().map(|m| m / 4 * 3),
        cgroup_limit().map(|m| m / 4 * 3),
        process_limit("Max address space").map(|m| m.saturating_sub(in_use("VmSize")) / 2),
        process_limit("Max data size").map(|m| m.saturating_sub(in_use("VmData")) / 2),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// A soft limit of `/proc/self/limits` in bytes (`None` when unlimited).
fn process_limit(name: &str) -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_process_limit(&limits, name)
}

/// What the process holds already of what a limit bounds (`VmSize`, the
/// address space: tally's code and libraries; `VmData`), in bytes, from
/// `/proc/self/status`; 0 where unknown.
fn in_use(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status_field(&status, field).unwrap_or(0)
}

/// A field of `/proc/PID/status` in bytes (`VmSize:   25428 kB`).
fn status_field(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line[field.len()..]
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

fn parse_process_limit(limits: &str, name: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// The memory limit of tally's control group (v2 `memory.max`, v1
/// `memory.limit_in_bytes`), where one is set.
fn cgroup_limit() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut files = vec![
        "/sys/fs/cgroup/memory.max".to_string(),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string(),
    ];
    for line in groups.lines() {
        // `0::/path` (v2) or `N:memory:/path` (v1).
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next(), f.next());
        match (controllers, path) {
            (Some(""), Some(p)) if p != "/" => files.push(format!("/sys/fs/cgroup{p}/memory.max")),
            (Some(c), Some(p)) if p != "/" && c.split(',').any(|c| c == "memory") => {
                files.push(format!("/sys/fs/cgroup/memory{p}/memory.limit_in_bytes"))
            }
            _ => {}
        }
    }
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
        // v1 writes "no limit" as a number near 2^63.
        .filter(|&m| m < 1 << 60)
        .min()
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    status_field(&info, "MemTotal")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M"), Some(Some(512 << 20)));
        assert_eq!(parse_size("16g"), Some(Some(16 << 30)));
        assert_eq!(parse_size("1000"), Some(Some(1000)));
        assert_eq!(parse_size("0"), Some(None));
        assert_eq!(parse_size("none"), Some(None));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("99999999999T"), None);
        assert!(physical_memory().is_some_and(|m| m > 0));
        let limits = "Max data size             unlimited            unlimited            bytes\n\
                      Max address space         4294967296           unlimited            bytes\n";
        assert_eq!(parse_process_limit(limits, "Max data size"), None);
        let status = "VmPeak:\t   25428 kB\nVmSize:\t   25000 kB\n";
        assert_eq!(status_field(status, "VmSize"), Some(25000 << 10));
        assert_eq!(status_field(status, "VmData"), None);
        assert!(in_use("VmSize") > 0);
        assert_eq!(
            parse_process_limit(limits, "Max address space"),
            Some(4 << 30)
        );
    }

    #[test]
    fn exact_reads_follow_the_content_size() {
        // Small or unknown inputs: the fixed floor.
        assert_eq!(exact_limit(0, None), FOLD_ABOVE);
        assert_eq!(exact_limit(1 << 20, None), FOLD_ABOVE);
        // A 100 MiB file may be read exactly in 200 MiB.
        assert_eq!(exact_limit(100 << 20, None), 200 << 20);
        // Never more than half the ceiling.
        assert_eq!(exact_limit(100 << 20, Some(200 << 20)), 100 << 20);
        assert_eq!(exact_limit(0, Some(64 << 20)), 32 << 20);
        assert_eq!(exact_limit(u64::MAX, None), u64::MAX);
    }
}
