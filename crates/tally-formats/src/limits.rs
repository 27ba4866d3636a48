//! The memory ceiling of a full load (`convert`, `merge`, `diff`, and
//! `annotate` with source or assembly), so that an input too large for the
//! machine ends in an error naming it rather than an out-of-memory abort.
//!
//! `TALLY_MAX_MEMORY` sets it: a size in bytes with an optional `K`, `M`,
//! `G` or `T` suffix (powers of 1024), or `0`/`none` for no ceiling. Unset,
//! it is three quarters of the machine's physical memory (none where that
//! is unknown). It bounds the records a reader keeps for one input, which
//! are nearly all of a load's memory.

use crate::error::Error;
use std::sync::OnceLock;

/// The environment variable that sets the ceiling.
pub const VARIABLE: &str = "TALLY_MAX_MEMORY";

/// The ceiling in bytes, `None` for none; an error for a value that is no
/// size.
pub fn memory_limit() -> Result<Option<u64>, Error> {
    static LIMIT: OnceLock<Result<Option<u64>, String>> = OnceLock::new();
    LIMIT
        .get_or_init(|| match std::env::var(VARIABLE) {
            Ok(v) => parse_size(&v).ok_or_else(|| {
                format!("{VARIABLE}: expected a size such as 512M or 16G, or `none`, got `{v}`")
            }),
            Err(_) => Ok(physical_memory().map(|m| m / 4 * 3)),
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

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
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
    }
}
