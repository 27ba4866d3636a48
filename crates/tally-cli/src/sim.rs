//! `tally sim`: Cachegrind's cache and branch simulation of a program run
//! under QEMU with tally's tracing plugin, or of a Lackey trace.

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use tally_model::Format;
use tally_sim::attrib::{AddressSpace, ProfileSpec, to_profile};
use tally_sim::engine::{Engine, EngineOptions, Feeder, Output};
use tally_sim::lackey::{LackeyReader, Record as LackeyRecord};
use tally_sim::machine::{describe, host_caches, summary};
use tally_sim::trace::{Record, TraceReader};
use tally_sim::{CacheConfig, Hierarchy, HierarchyConfig, Policy};

use crate::Outcome;

/// Arguments of `tally sim`.
#[derive(Parser, Debug)]
#[command(
    about = "Simulate caches and branch predictors as Cachegrind does, on a program run under QEMU or a Lackey trace",
    after_help = "Examples:\n  tally sim --branch-sim=yes -- ./prog args\n  tally sim --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 -- ./prog\n  tally sim --cache L2=262144,4,64 --policy=plru -- ./prog\n  tally sim --config 'small: --D1=8192,2,64 --LL=262144,8,64' -- ./prog\n  valgrind --tool=lackey --trace-mem=yes -v -v --log-file=trace ./prog\n  tally sim --lackey trace --binary ./prog"
)]
pub struct Args {
    /// I1 cache: SIZE,ASSOC,LINE_SIZE (default: the host's, as Cachegrind).
    #[arg(long = "I1", value_name = "S,A,L")]
    i1: Option<String>,
    /// D1 cache: SIZE,ASSOC,LINE_SIZE.
    #[arg(long = "D1", value_name = "S,A,L")]
    d1: Option<String>,
    /// Last-level cache: SIZE,ASSOC,LINE_SIZE.
    #[arg(long = "LL", value_name = "S,A,L")]
    ll: Option<String>,
    /// A level between L1 and LL, `NAME=SIZE,ASSOC,LINE_SIZE`; repeat for
    /// more, in order from L1 outwards.
    #[arg(long = "cache", value_name = "NAME=S,A,L")]
    cache: Vec<String>,
    /// Replacement policy of every cache: lru (Cachegrind's), fifo, plru, random[:SEED].
    #[arg(long, default_value = "lru")]
    policy: String,
    /// Another machine simulated in the same pass: `NAME: --D1=… --LL=… --policy=…`
    /// (caches not given are the main machine's); written to OUT.NAME.
    #[arg(long = "config", value_name = "SPEC")]
    configs: Vec<String>,
    /// Simulate the caches.
    #[arg(long = "cache-sim", value_name = "yes|no", default_value = "yes", value_parser = yes_no, action = clap::ArgAction::Set)]
    cache_sim: bool,
    /// Simulate the branch predictors.
    #[arg(long = "branch-sim", value_name = "yes|no", default_value = "no", value_parser = yes_no, action = clap::ArgAction::Set)]
    branch_sim: bool,
    /// Output file (`%p`: the process id) [default: cachegrind.out.%p, or
    /// callgrind.out.%p with --callgrind].
    #[arg(long = "out-file", alias = "cachegrind-out-file", value_name = "FILE")]
    out_file: Option<PathBuf>,
    /// Write a Callgrind profile with call arcs instead of a Cachegrind one.
    #[arg(long)]
    callgrind: bool,
    /// Simulate a Lackey trace (`valgrind --tool=lackey --trace-mem=yes`; with
    /// `-v -v` in the same file the shared libraries are found too); `-` reads standard input.
    #[arg(long, value_name = "TRACE")]
    lackey: Option<PathBuf>,
    /// Simulate a tally trace stream written by the QEMU plugin with `out=FILE`.
    #[arg(long, value_name = "FILE", conflicts_with = "lackey")]
    trace: Option<PathBuf>,
    /// The program a trace is of (for symbols when the trace does not name it).
    #[arg(long, value_name = "PROG")]
    binary: Option<PathBuf>,
    /// The QEMU user-mode emulator [default: qemu-<arch of PROG> on PATH].
    #[arg(long, value_name = "PATH")]
    qemu: Option<PathBuf>,
    /// tally's QEMU plugin [default: $TALLY_QEMU_PLUGIN, or libtally_qemu_plugin.so next to tally].
    #[arg(long, value_name = "PATH")]
    plugin: Option<PathBuf>,
    /// Simulate D1 inside QEMU's process, beside the program, with one
    /// machine (the results are the same; `no` sends every access to tally).
    #[arg(long = "plugin-d1", value_name = "yes|no", default_value = "yes", value_parser = yes_no, action = clap::ArgAction::Set)]
    plugin_d1: bool,
    /// The program and its arguments.
    #[arg(last = true, value_name = "PROG ARGS")]
    command: Vec<String>,
}

fn yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("`{s}`: expected yes or no")),
    }
}

/// One machine to simulate.
struct Machine {
    name: Option<String>,
    config: HierarchyConfig,
}

fn parse_level(text: &str) -> anyhow::Result<(String, CacheConfig)> {
    let (name, geo) = text.split_once('=').ok_or_else(|| {
        anyhow!("--cache {text}: expected NAME=SIZE,ASSOC,LINE_SIZE (e.g. L2=262144,4,64)")
    })?;
    Ok((name.to_string(), CacheConfig::parse(name, geo)?))
}

fn machines(a: &Args) -> anyhow::Result<Vec<Machine>> {
    let (hi1, hd1, hll) = host_caches();
    let pick = |o: &Option<String>, name: &str, d: CacheConfig| -> anyhow::Result<CacheConfig> {
        Ok(match o {
            Some(t) => CacheConfig::parse(name, t)?,
            None => d,
        })
    };
    let main = HierarchyConfig {
        i1: pick(&a.i1, "I1", hi1)?,
        d1: pick(&a.d1, "D1", hd1)?,
        middle: a
            .cache
            .iter()
            .map(|c| parse_level(c).map(|x| x.1))
            .collect::<anyhow::Result<_>>()?,
        ll: pick(&a.ll, "LL", hll)?,
        policy: Policy::parse(&a.policy)?,
        iaddr_zero_bits: 0,
    };
    Hierarchy::new(&main)?;
    let mut out = vec![Machine {
        name: None,
        config: main.clone(),
    }];
    for spec in &a.configs {
        let (name, opts) = spec
            .split_once(':')
            .ok_or_else(|| anyhow!("--config `{spec}`: expected `NAME: --D1=… --LL=…`"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("--config `{spec}`: the name must be letters, digits, `-` or `_`");
        }
        if out.iter().any(|m| m.name.as_deref() == Some(name)) {
            bail!("--config: the name `{name}` is used twice");
        }
        let mut c = main.clone();
        let mut middle_given = false;
        for o in opts.split_whitespace() {
            let (k, v) = o
                .strip_prefix("--")
                .and_then(|o| o.split_once('='))
                .ok_or_else(|| anyhow!("--config {name}: `{o}`: expected --KEY=VALUE"))?;
            let ctx = |e: tally_sim::SimError| anyhow!("--config {name}: {e}");
            match k {
                "I1" => c.i1 = CacheConfig::parse("I1", v).map_err(ctx)?,
                "D1" => c.d1 = CacheConfig::parse("D1", v).map_err(ctx)?,
                "LL" => c.ll = CacheConfig::parse("LL", v).map_err(ctx)?,
                "policy" => c.policy = Policy::parse(v).map_err(ctx)?,
                "cache" => {
                    if !middle_given {
                        c.middle.clear();
                        middle_given = true;
                    }
                    c.middle.push(parse_level(v)?.1);
                }
                _ => bail!("--config {name}: unknown option --{k} (I1, D1, LL, cache, policy)"),
            }
        }
        Hierarchy::new(&c).map_err(|e| anyhow!("--config {name}: {e}"))?;
        out.push(Machine {
            name: Some(name.to_string()),
            config: c,
        });
    }
    Ok(out)
}

/// What ended the run.
enum Ending {
    /// The stream ended normally.
    Complete,
    /// The program did not finish (crash, signal); why.
    Incomplete(String),
}

pub fn run(a: Args) -> anyhow::Result<Outcome> {
    let ms = machines(&a)?;
    let opts = EngineOptions {
        branch_sim: a.branch_sim,
        calls: a.callgrind,
        merge_modify: false,
        no_icache: !a.cache_sim,
    };
    let hier: Vec<Hierarchy> = ms
        .iter()
        .map(|m| Hierarchy::new(&m.config))
        .collect::<Result<_, _>>()?;
    let mut space = AddressSpace::new();
    let (out, cmd, pid, ending, status) = if let Some(t) = &a.lackey {
        let (out, cmd, pid) =
            run_lackey(t, a.binary.as_deref(), Engine::new(hier, opts), &mut space)?;
        (out, cmd, pid, Ending::Complete, None)
    } else if let Some(t) = &a.trace {
        let f = std::fs::File::open(t).with_context(|| format!("cannot open {}", t.display()))?;
        let engine = Engine::new(
            hier,
            EngineOptions {
                merge_modify: true,
                ..opts
            },
        );
        // The stream does not say the architecture; the program does.
        let x86 = match &a.binary {
            Some(b) => qemu_for(b)?.1,
            None => true,
        };
        let (out, ending) = run_stream(f, t, engine, &mut space, x86, None)?;
        let cmd = a
            .binary
            .as_ref()
            .map_or(String::new(), |b| b.display().to_string());
        (out, cmd, std::process::id(), ending, None)
    } else {
        if a.command.is_empty() {
            bail!(
                "no program given: tally sim [OPTIONS] -- PROG ARGS (or --lackey TRACE, --trace FILE)"
            );
        }
        let engine = Engine::new(
            hier,
            EngineOptions {
                merge_modify: true,
                ..opts
            },
        );
        // The plugin simulates D1 when there is one, with the cache
        // simulated: tally then has hits counted and misses to go on with.
        let d1 = match ms.as_slice() {
            [m] if a.cache_sim && a.plugin_d1 => Some(plugin_d1_arg(&m.config, !a.callgrind)),
            _ => None,
        };
        let (out, pid, ending, status) = run_native(&a, engine, &mut space, d1)?;
        (out, a.command.join(" "), pid, ending, Some(status))
    };
    for p in &space.problems {
        eprintln!("tally sim: warning: {p} (its code is counted as ???)");
    }
    if let Ending::Incomplete(why) = &ending {
        eprintln!(
            "tally sim: warning: {why}; the profile covers the run up to there and is marked incomplete"
        );
    }
    report(&a, &ms, &out, &space, &cmd, pid, &ending)?;
    match status {
        Some(s) if !s.success() => {
            // The program's own failure is passed on, as Valgrind does.
            use std::os::unix::process::ExitStatusExt;
            let code = s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0));
            std::process::exit(code);
        }
        _ => Ok(Outcome::Ok),
    }
}

/// Events written, by index into [`Counts::EVENTS`].
fn events(cache_sim: bool, branch_sim: bool) -> Vec<usize> {
    let mut v = if cache_sim { (0..9).collect() } else { vec![0] };
    if branch_sim {
        v.extend(9..13);
    }
    v
}

fn report(
    a: &Args,
    ms: &[Machine],
    out: &Output,
    space: &AddressSpace,
    cmd: &str,
    pid: u32,
    ending: &Ending,
) -> anyhow::Result<()> {
    let ev = events(a.cache_sim, a.branch_sim);
    let default = if a.callgrind {
        "callgrind.out.%p"
    } else {
        "cachegrind.out.%p"
    };
    let base = a
        .out_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(default))
        .to_string_lossy()
        .replace("%p", &pid.to_string());
    for (k, m) in ms.iter().enumerate() {
        let mut desc = if a.cache_sim {
            describe(&m.config)
        } else {
            Vec::new()
        };
        if let Ending::Incomplete(why) = ending {
            desc.push(("incomplete".into(), why.clone()));
        }
        let spec = ProfileSpec {
            format: if a.callgrind {
                Format::Callgrind
            } else {
                Format::Cachegrind
            },
            cmd: cmd.to_string(),
            desc,
            events: &ev,
            calls: a.callgrind,
            pid: Some(u64::from(pid)),
        };
        let prof = to_profile(out, k, space, &spec);
        let path = match &m.name {
            None => PathBuf::from(&base),
            Some(n) => PathBuf::from(format!("{base}.{n}")),
        };
        tally_formats::output::write_file(&path, |w| {
            if a.callgrind {
                tally_formats::callgrind::write(
                    &prof,
                    w,
                    tally_formats::callgrind::WriteOptions::default(),
                )
            } else {
                tally_formats::cachegrind::write(&prof, w)
            }
        })?;
        let t = out.totals(k);
        let prefix = format!("=={pid}==");
        if let Some(n) = &m.name {
            eprintln!("{prefix} configuration {n} ({})", path.display());
        }
        for line in summary(&t, a.cache_sim, a.branch_sim) {
            if line.is_empty() {
                eprintln!("{prefix} ");
            } else {
                eprintln!("{prefix} {line}");
            }
        }
        if m.name.is_none() && ms.len() > 1 {
            eprintln!("{prefix} ");
        }
    }
    Ok(())
}

fn run_lackey(
    path: &Path,
    binary: Option<&Path>,
    mut engine: Engine,
    space: &mut AddressSpace,
) -> anyhow::Result<(Output, String, u32)> {
    let input: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        )
    };
    let mut r = LackeyReader::new(BufReader::with_capacity(1 << 20, input));
    let mut saw_objects = false;
    let mut fallback_added = false;
    let mut cmd = binary.map_or(String::new(), |b| b.display().to_string());
    loop {
        let rec = r
            .next_record()
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        match rec {
            None => break,
            Some(LackeyRecord::Object(o)) => {
                if !saw_objects && cmd.is_empty() {
                    cmd = o.path.clone();
                }
                saw_objects = true;
                space.add_biased(Path::new(&o.path), o.bias);
            }
            Some(LackeyRecord::Access(acc)) => {
                use tally_sim::lackey::Access;
                if !saw_objects && !fallback_added {
                    fallback_added = true;
                    if let Some(b) = binary {
                        add_binary_guess(space, b);
                    }
                }
                match acc {
                    Access::Instr { addr, size } => {
                        let size = u8::try_from(size).map_err(|_| {
                            anyhow!(
                                "{}: line {}: an instruction of {size} bytes",
                                path.display(),
                                r.line()
                            )
                        })?;
                        let i = engine.declare(addr, size, || space.classify(addr));
                        engine.exec(i);
                    }
                    Access::Load { addr, size } => engine.load(addr, clamp(size)),
                    Access::Store { addr, size } => engine.store(addr, clamp(size)),
                    Access::Modify { addr, size } => engine.modify(addr, clamp(size)),
                }
            }
        }
    }
    Ok((engine.finish(), cmd, std::process::id()))
}

fn clamp(size: u64) -> u8 {
    u8::try_from(size).unwrap_or(u8::MAX)
}

/// A trace without Valgrind's load addresses: the program alone, at its
/// own addresses, or where Valgrind loads position-independent programs.
fn add_binary_guess(space: &mut AddressSpace, b: &Path) {
    let pie = tally_symbols::ObjectFile::open(b)
        .map(|f| f.code_ranges().map(|r| r.0).min().unwrap_or(0) < 0x10_0000)
        .unwrap_or(false);
    space.add_biased(b, if pie { 0x10_8000 } else { 0 });
}

/// Whether the run needs memory accesses: without cache or branch
/// simulation only executions count, and the plugin records none (its
/// `mem=off`), which spares QEMU a callback per access.
fn accesses_needed(a: &Args) -> bool {
    a.cache_sim || a.branch_sim
}

/// Feeds a tally trace stream to the engine; errors name the stream
/// `name` and the byte. `x86`: decode branches as x86-64.
fn run_stream(
    input: impl Read,
    name: &Path,
    mut engine: Engine,
    space: &mut AddressSpace,
    x86: bool,
    mut pool: Option<&mut Pool>,
) -> anyhow::Result<(Output, Ending)> {
    let mut r = TraceReader::new(input).map_err(|e| anyhow!("{}: {e}", name.display()))?;
    let mut feeder = Feeder::new();
    let mut ending = Ending::Incomplete("the trace ends before the program's exit".into());
    let undeclared = |r: &TraceReader<_>, id: u32| {
        anyhow!(
            "{}: byte {}: instruction {id} executed before it was declared",
            name.display(),
            r.offset()
        )
    };
    loop {
        match feeder.feed_bytes(&mut engine, r.unread()) {
            Ok(n) => r.consume(n),
            Err((n, id)) => {
                r.consume(n);
                return Err(undeclared(&r, id));
            }
        }
        let rec = match r.next_record() {
            Ok(Some(x)) => x,
            Ok(None) => break,
            Err(tally_sim::trace::StreamError::Truncated { offset }) => {
                ending = Ending::Incomplete(format!(
                    "{}: the trace is cut off inside a record at byte {offset}",
                    name.display()
                ));
                break;
            }
            Err(e) => bail!("{}: {e}", name.display()),
        };
        match rec {
            Record::Map {
                start,
                end,
                offset,
                path,
            } => space.add_mapping(start, end, offset, path),
            Record::End => {
                ending = Ending::Complete;
                break;
            }
            Record::D1Filter {
                size,
                assoc,
                line_size,
                policy,
                seed,
            } => {
                let config = tally_sim::CacheConfig {
                    size,
                    assoc,
                    line_size,
                };
                let takes = tally_sim::filter::policy_from_code(policy, seed)
                    .is_some_and(|p| engine.takes_d1_filter(config, p));
                if !takes {
                    bail!(
                        "{}: byte {}: the plugin simulated D1 ({}) in this trace; simulate it with that D1 alone (one machine, --D1={},{},{}{})",
                        name.display(),
                        r.offset(),
                        config.describe(),
                        size,
                        assoc,
                        line_size,
                        match tally_sim::filter::policy_from_code(policy, seed) {
                            Some(tally_sim::Policy::Lru) | None => String::new(),
                            Some(p) => format!(", policy {p:?}"),
                        }
                    );
                }
            }
            Record::D1State(state) => {
                if !engine.restore_d1(state) {
                    bail!(
                        "{}: byte {}: the D1 state the plugin handed over does not fit this D1",
                        name.display(),
                        r.offset()
                    );
                }
            }
            Record::Slot { slot, len } => {
                let at = r.offset();
                let Some(p) = pool.as_deref_mut() else {
                    bail!(
                        "{}: byte {at}: a record of the plugin's buffer file in a stream without one",
                        name.display()
                    );
                };
                let Some(bytes) = p.records(slot, len) else {
                    bail!(
                        "{}: byte {at}: slot {slot} ({len} bytes) is not in the plugin's buffer file",
                        name.display()
                    );
                };
                feeder
                    .feed_slice(&mut engine, bytes, x86)
                    .map_err(|(k, e)| {
                        anyhow!("{}: byte {at}: slot {slot}, byte {k}: {e}", name.display())
                    })?;
                p.give_back(slot);
            }
            rec => {
                if let Err(id) = feeder.feed(&mut engine, &rec, x86) {
                    return Err(undeclared(&r, id));
                }
            }
        }
    }
    if let Some(p) = pool {
        // Hits the plugin counted rather than wrote (zero if it did not).
        feeder.add_hits(&mut engine, p.hits());
    }
    if let Err(id) = feeder.finish(&mut engine) {
        return Err(undeclared(&r, id));
    }
    Ok((engine.finish(), ending))
}

/// The QEMU user-mode emulator name for an ELF machine.
fn qemu_for(prog: &Path) -> anyhow::Result<(&'static str, bool)> {
    let mut head = [0u8; 20];
    std::fs::File::open(prog)
        .and_then(|mut f| f.read_exact(&mut head))
        .with_context(|| format!("cannot read {}", prog.display()))?;
    if &head[..4] != b"\x7fELF" {
        bail!(
            "{}: not an ELF program (scripts: give their interpreter as PROG)",
            prog.display()
        );
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    Ok(match machine {
        62 => ("qemu-x86_64", true),
        3 => ("qemu-i386", false),
        183 => ("qemu-aarch64", false),
        40 => ("qemu-arm", false),
        243 => ("qemu-riscv64", false),
        m => bail!(
            "{}: ELF machine {m} has no QEMU user-mode emulator known to tally",
            prog.display()
        ),
    })
}

/// Finds `name` on PATH (or as given, if it has a slash).
fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn find_plugin(a: &Args) -> anyhow::Result<PathBuf> {
    const NAME: &str = "libtally_qemu_plugin.so";
    let candidates: Vec<PathBuf> = a
        .plugin
        .clone()
        .into_iter()
        .chain(std::env::var_os("TALLY_QEMU_PLUGIN").map(PathBuf::from))
        .chain(
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join(NAME))),
        )
        .collect();
    if let Some(explicit) = a.plugin.as_ref()
        && !explicit.is_file()
    {
        bail!("--plugin {}: no such file", explicit.display());
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        anyhow!(
            "tally's QEMU plugin is not built; build it with\n  cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target\n(or give --plugin PATH, or set TALLY_QEMU_PLUGIN)"
        )
    })
}

/// The plugin's `d1=` arguments for a machine; with `count`, hits are
/// counted in the buffer file, not written (their costs are added at the
/// end, so not with calls tracked, whose inclusive costs need them as
/// they come).
fn plugin_d1_arg(c: &HierarchyConfig, count: bool) -> String {
    let d = c.d1;
    format!(
        "d1={}:{}:{},d1policy={}{}",
        d.size,
        d.assoc,
        d.line_size,
        c.policy.name(),
        if count { ",hits=on" } else { "" }
    )
}

fn run_native(
    a: &Args,
    engine: Engine,
    space: &mut AddressSpace,
    d1: Option<String>,
) -> anyhow::Result<(Output, u32, Ending, ExitStatus)> {
    let prog = which(&a.command[0]).ok_or_else(|| {
        anyhow!(
            "{}: no such program (not a file, and not found on PATH)",
            a.command[0]
        )
    })?;
    let (emulator, x86) = qemu_for(&prog)?;
    let qemu = match &a.qemu {
        Some(q) => q.clone(),
        None => which(emulator).ok_or_else(|| {
            anyhow!("{emulator} not found: install QEMU's user-mode emulators (Debian: apt-get install qemu-user)")
        })?,
    };
    let plugin = find_plugin(a)?;
    let (reader, writer) = std::io::pipe().context("cannot create a pipe")?;
    {
        use std::os::fd::AsRawFd;
        // A larger pipe lets QEMU and tally run side by side with fewer
        // wake-ups; the system may refuse (its limit), which only costs time.
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    }
    let buffers = shared_buffers().context("cannot create the plugin's buffer file")?;
    // Every slot starts free; the plugin takes them from this pipe.
    let (free_r, mut free_w) = std::io::pipe().context("cannot create a pipe")?;
    for k in 0..BUFFER_SLOTS {
        free_w.write_all(&k.to_le_bytes())?;
    }
    let mut pool = Pool::new(&buffers, free_w).context("cannot map the plugin's buffer file")?;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (wfd, bfd, ffd) = (writer.as_raw_fd(), buffers.as_raw_fd(), free_r.as_raw_fd());
    // The plugin moves them out of the guest's way at once.
    const CHILD_FD: i32 = 3;
    const BUFFERS_FD: i32 = 4;
    const FREE_FD: i32 = 5;
    let mem = if accesses_needed(a) { "on" } else { "off" };
    let d1 = d1
        .filter(|_| mem == "on")
        .map_or(String::new(), |d| format!(",{d}"));
    let mut c = Command::new(&qemu);
    c.arg("-plugin")
        .arg(format!(
            "{},fd={CHILD_FD},shm={BUFFERS_FD},free={FREE_FD},mem={mem}{d1}",
            plugin.display()
        ))
        .arg(&prog)
        .args(&a.command[1..])
        .stdin(Stdio::inherit());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::dup2(wfd, CHILD_FD) < 0
                || libc::dup2(bfd, BUFFERS_FD) < 0
                || libc::dup2(ffd, FREE_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c
        .spawn()
        .with_context(|| format!("cannot run {}", qemu.display()))?;
    drop(writer);
    drop(free_r);
    let pid = child.id();
    // Ctrl-C reaches the program too; tally stays to write what was
    // simulated. A SIGTERM to tally is passed on to the program.
    CHILD.store(pid as i32, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: installing handlers; the SIGTERM handler only calls kill(2).
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(
            libc::SIGTERM,
            forward_term as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    // When the pipe ends, QEMU is gone: what it had not written yet is in
    // the buffer file.
    let input = WithTail {
        head: reader,
        tail: None,
        buffers: &buffers,
    };
    let result = run_stream(
        input,
        Path::new("<qemu plugin>"),
        engine,
        space,
        x86,
        Some(&mut pool),
    );
    let status = child.wait().context("waiting for the program")?;
    let (out, mut ending) = result?;
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            ending = Ending::Incomplete(format!("the program was killed by signal {sig}"));
        } else if let Ending::Incomplete(_) = ending {
            ending = Ending::Incomplete(format!(
                "the program stopped with status {} before its normal exit",
                status.code().unwrap_or(-1)
            ));
        }
    }
    Ok((out, pid, ending, status))
}

/// Slots in the plugin's buffer file, the pool its buffers come from:
/// few, so that the ones in use stay in the processors' caches. The
/// plugin gives them to its first `BUFFER_SLOTS / 2` threads (so that a
/// thread that hands one over always gets one back); the others write
/// their records into the stream itself, and lose their last unwritten
/// ones if QEMU dies of a signal.
const BUFFER_SLOTS: u32 = 8;

/// An anonymous file for the plugin's buffers (sparse: only the slots of
/// running threads take memory).
fn shared_buffers() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::FileExt;
    use tally_sim::trace::shared;
    // SAFETY: memfd_create with a valid name; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(c"tally-sim-buffers".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned by nothing else.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_len(shared::size_with_hits(BUFFER_SLOTS))?;
    f.write_all_at(&shared::header(BUFFER_SLOTS), 0)?;
    Ok(f)
}

/// The plugin's buffer file, mapped to read the slots it hands over, and
/// the pipe that hands them back (see `tally_sim::trace::shared`).
struct Pool {
    base: *const u8,
    size: usize,
    free: std::io::PipeWriter,
}

impl Pool {
    fn new(file: &std::fs::File, free: std::io::PipeWriter) -> std::io::Result<Pool> {
        use std::os::fd::AsRawFd;
        let size = file.metadata()?.len() as usize;
        // SAFETY: mapping a file we own, read-only, shared with the plugin.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pool {
            base: base as *const u8,
            size,
            free,
        })
    }

    /// The records in `slot`, which the plugin has handed over.
    fn records(&self, slot: u32, len: u32) -> Option<&[u8]> {
        let r = tally_sim::trace::shared::records(slot, len)?;
        if r.end > self.size {
            return None;
        }
        // SAFETY: inside the mapping, which lives as long as `self`; the
        // plugin does not write a slot it handed over until it is given
        // back.
        Some(unsafe { std::slice::from_raw_parts(self.base.add(r.start), r.len()) })
    }

    /// The D1 hits the plugin counted by stream id (`hits=on`), after the
    /// slots: reads and writes of each id.
    fn hits(&self) -> &[u64] {
        let from = tally_sim::trace::shared::size(BUFFER_SLOTS) as usize;
        let n = self.size.saturating_sub(from) / 8;
        // SAFETY: inside the mapping, 8-aligned (the slots are), and the
        // plugin has exited: nothing writes them any more.
        unsafe { std::slice::from_raw_parts(self.base.add(from.min(self.size)) as *const u64, n) }
    }

    /// Gives `slot` back to the plugin (which may have exited: then
    /// nobody takes it).
    fn give_back(&mut self, slot: u32) {
        let _ = self.free.write_all(&slot.to_le_bytes());
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped, no longer borrowed.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.size) };
    }
}

/// The plugin's stream, then, once it ends, the records left in the
/// buffer file.
struct WithTail<'a> {
    head: std::io::PipeReader,
    tail: Option<std::io::Cursor<Vec<u8>>>,
    buffers: &'a std::fs::File,
}

impl Read for WithTail<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(t) = &mut self.tail {
            return t.read(buf);
        }
        match self.head.read(buf)? {
            0 => {
                let rest = tally_sim::trace::shared::pending(self.buffers, BUFFER_SLOTS)?;
                self.tail.insert(std::io::Cursor::new(rest)).read(buf)
            }
            n => Ok(n),
        }
    }
}

/// The program being traced, for [`forward_term`].
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_term(_: libc::c_int) {
    let pid = CHILD.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}
