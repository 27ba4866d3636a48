//! The plugin's arguments (`-plugin libtally_qemu_plugin.so,KEY=VALUE,…`),
//! parsed without side effects: nothing is opened here, so that a bad
//! argument is refused before anything is created.

use tally_sim::Policy;
use tally_sim::filter::D1Filter;

/// Where the stream goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// `fd=N`: a descriptor tally handed over.
    Fd(i32),
    /// `out=PATH`: a file to create (or `/dev/null`, for `inprocess=on`).
    Path(String),
}

/// What the arguments ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Args {
    /// `fd=` or `out=`, the last one given; `None`: neither.
    pub output: Option<Output>,
    /// `shm=N`: the shared buffer file tally made.
    pub shm: Option<i32>,
    /// `free=N`: the pipe tally hands free slots back through.
    pub free: Option<i32>,
    /// `notes=N`: a pipe to tally on which the plugin notes, a byte each,
    /// that the guest forked (`f`) or called execve (`e`): processes tally
    /// does not follow.
    pub notes: Option<i32>,
    /// `ctl=N`: the control socket to tally, on which the processes the
    /// guest starts are announced (with `children=on`).
    pub ctl: Option<i32>,
    /// `children=on`: follow the processes the guest forks and execs.
    pub children: bool,
    /// The arguments a process the guest execs gets too (`mem=`, `d1=`,
    /// `d1policy=`, `hits=`).
    pub passed_on: Vec<String>,
    /// `mem=on` (the default) or `mem=off`: whether accesses are recorded.
    pub mem: bool,
    /// `d1=SIZE:ASSOC:LINE`: simulate D1 here (see [`parse_d1`]).
    pub d1: Option<String>,
    /// `d1policy=P`: D1's replacement policy, `lru` by default.
    pub d1_policy: String,
    /// `hits=on`: count D1's hits in the shared file instead of writing them.
    pub count_hits: bool,
    /// `layout=valgrind` (the default) or `layout=qemu`: whether the
    /// mappings QEMU places are moved where Valgrind would place them
    /// (`tally_sim::layout`).
    pub valgrind_layout: bool,
    /// `inprocess=on` (feature `inprocess`): simulate inside QEMU.
    #[cfg(feature = "inprocess")]
    pub in_process: bool,
}

/// Parses the arguments QEMU passes; the error is the message to refuse
/// with.
pub(crate) fn parse<S: AsRef<str>>(args: &[S]) -> Result<Args, String> {
    let mut r = Args {
        output: None,
        shm: None,
        free: None,
        notes: None,
        ctl: None,
        children: false,
        passed_on: Vec::new(),
        mem: true,
        d1: None,
        d1_policy: "lru".to_owned(),
        count_hits: false,
        valgrind_layout: true,
        #[cfg(feature = "inprocess")]
        in_process: false,
    };
    for a in args {
        let a = a.as_ref();
        if ["d1=", "d1policy=", "hits=", "mem=", "layout="]
            .iter()
            .any(|k| a.starts_with(k))
        {
            r.passed_on.push(a.to_owned());
        }
        if a == "children=on" {
            r.children = true;
            continue;
        }
        if let Some(v) = a.strip_prefix("d1=") {
            r.d1 = Some(v.to_owned());
            continue;
        }
        if let Some(v) = a.strip_prefix("d1policy=") {
            r.d1_policy = v.to_owned();
            continue;
        }
        if a == "hits=on" {
            r.count_hits = true;
            continue;
        }
        let fd_arg = a
            .strip_prefix("shm=")
            .map(|v| (&mut r.shm, v))
            .or_else(|| a.strip_prefix("free=").map(|v| (&mut r.free, v)))
            .or_else(|| a.strip_prefix("notes=").map(|v| (&mut r.notes, v)))
            .or_else(|| a.strip_prefix("ctl=").map(|v| (&mut r.ctl, v)));
        if let Some((slot, v)) = fd_arg {
            *slot = v.parse::<i32>().ok().filter(|&fd| fd >= 0);
            if slot.is_none() {
                return Err(format!("bad argument `{a}`"));
            }
            continue;
        }
        #[cfg(feature = "inprocess")]
        if a == "inprocess=on" {
            r.in_process = true;
            r.output = Some(Output::Path("/dev/null".to_owned()));
            continue;
        }
        if let Some(v) = a.strip_prefix("mem=") {
            r.mem = match v {
                "on" => true,
                "off" => false,
                _ => return Err(format!("bad argument `{a}` (mem=on or mem=off)")),
            };
            continue;
        }
        if let Some(v) = a.strip_prefix("layout=") {
            r.valgrind_layout = match v {
                "valgrind" => true,
                "qemu" => false,
                _ => {
                    return Err(format!(
                        "bad argument `{a}` (layout=valgrind or layout=qemu)"
                    ));
                }
            };
            continue;
        }
        if let Some(fd) = a.strip_prefix("fd=") {
            match fd.parse::<i32>() {
                Ok(fd) if fd >= 0 => r.output = Some(Output::Fd(fd)),
                _ => return Err(format!("bad argument `{a}`")),
            }
        } else if let Some(path) = a.strip_prefix("out=") {
            r.output = Some(Output::Path(path.to_owned()));
        } else {
            return Err(format!(
                "unknown argument `{a}` (fd=N or out=PATH, shm=N, free=N, notes=N, ctl=N, children=on, mem=off, d1=SIZE:ASSOC:LINE, d1policy=P, hits=on, layout=qemu)"
            ));
        }
    }
    Ok(r)
}

/// The D1 filter of `d1=SIZE:ASSOC:LINE` (colons: QEMU splits plugin
/// arguments at commas) and the policy as `tally sim --policy` takes it.
pub(crate) fn parse_d1(v: &str, policy: &str) -> Result<D1Filter, String> {
    let config =
        tally_sim::CacheConfig::parse("D1", &v.replace(':', ",")).map_err(|e| e.to_string())?;
    let policy = Policy::parse(policy).map_err(|e| e.to_string())?;
    D1Filter::new(config, policy).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let a = parse::<&str>(&[]).unwrap();
        assert_eq!(a.output, None);
        assert_eq!((a.shm, a.free), (None, None));
        assert!(a.mem && !a.count_hits);
        assert_eq!((a.d1, a.d1_policy.as_str()), (None, "lru"));
        assert!(a.valgrind_layout);
        let a = parse(&["layout=qemu"]).unwrap();
        assert!(!a.valgrind_layout);
        assert_eq!(a.passed_on, ["layout=qemu"]);
        assert!(parse(&["layout=linux"]).is_err());
    }

    #[test]
    fn every_key() {
        let a = parse(&[
            "fd=7",
            "shm=8",
            "free=9",
            "mem=off",
            "d1=32768:8:64",
            "d1policy=fifo",
            "hits=on",
        ])
        .unwrap();
        assert_eq!(a.output, Some(Output::Fd(7)));
        assert_eq!((a.shm, a.free), (Some(8), Some(9)));
        assert!(!a.mem && a.count_hits);
        assert_eq!(
            a.passed_on,
            ["mem=off", "d1=32768:8:64", "d1policy=fifo", "hits=on"]
        );
        assert_eq!(a.d1.as_deref(), Some("32768:8:64"));
        assert_eq!(a.d1_policy, "fifo");
        let a = parse(&["ctl=7", "children=on"]).unwrap();
        assert_eq!((a.ctl, a.children, a.output), (Some(7), true, None));
        let a = parse(&["mem=off", "out=/tmp/x y", "mem=on"]).unwrap();
        assert_eq!(a.output, Some(Output::Path("/tmp/x y".into())));
        assert!(a.mem);
    }

    #[test]
    fn the_last_output_wins() {
        let a = parse(&["fd=3", "out=t"]).unwrap();
        assert_eq!(a.output, Some(Output::Path("t".into())));
        let a = parse(&["out=t", "fd=3"]).unwrap();
        assert_eq!(a.output, Some(Output::Fd(3)));
    }

    #[test]
    fn bad_values_are_errors() {
        for (arg, says) in [
            ("bogus=1", "unknown argument `bogus=1` (fd=N or out=PATH"),
            ("fd", "unknown argument `fd`"),
            ("", "unknown argument ``"),
            ("hits=off", "unknown argument `hits=off`"),
            ("fd=x", "bad argument `fd=x`"),
            ("fd=-1", "bad argument `fd=-1`"),
            ("fd=", "bad argument `fd=`"),
            ("fd=99999999999", "bad argument `fd=99999999999`"),
            ("shm=x", "bad argument `shm=x`"),
            ("shm=-2", "bad argument `shm=-2`"),
            ("free=", "bad argument `free=`"),
            ("mem=maybe", "bad argument `mem=maybe` (mem=on or mem=off)"),
            ("mem=", "bad argument `mem=` (mem=on or mem=off)"),
        ] {
            let e = parse(&["out=/dev/null", arg]).unwrap_err();
            assert!(e.starts_with(says), "{arg}: {e}");
        }
    }

    #[cfg(not(feature = "inprocess"))]
    #[test]
    fn inprocess_needs_the_feature() {
        let e = parse(&["inprocess=on"]).unwrap_err();
        assert!(e.starts_with("unknown argument `inprocess=on`"), "{e}");
    }

    #[test]
    fn d1_geometry_and_policy() {
        let f = parse_d1("32768:8:64", "lru").unwrap();
        let c = f.config();
        assert_eq!((c.size, c.assoc, c.line_size), (32768, 8, 64));
        assert_eq!(f.policy(), Policy::Lru);
        assert!(parse_d1("32768:8:64", "fifo").is_ok());
        for (v, policy) in [
            ("", "lru"),
            ("32768", "lru"),
            ("32768:8", "lru"),
            ("x:8:64", "lru"),
            ("32768:8:64:1", "lru"),
            ("32768:3:64", "lru"),
            ("32768:8:63", "lru"),
            ("0:0:0", "lru"),
            ("32768:8:64", "bogus"),
            ("32768:8:64", ""),
        ] {
            assert!(parse_d1(v, policy).is_err(), "{v} {policy}");
        }
    }
}
