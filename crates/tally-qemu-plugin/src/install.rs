//! What QEMU calls outside the guest's run: the plugin's entry point
//! ([`qemu_plugin_install`]), a vCPU's start, a block's translation (which
//! declares its instructions and registers the callbacks of
//! [`crate::callbacks`]), and the exit.

use crate::args::{self, Output};
use crate::buffers::{self, FREE_FD, OUT, Out, SHM_BASE, SHM_SIZE, SILENT, STREAM_FD};
use crate::callbacks::{ATOMIC, on_block, on_exec, on_mem, on_mem_at};
use crate::children;
use crate::filter::{self, FAST, FILTER, FILTER_MODE, FILTER_VCPU, FILTERING, Filter};
use crate::filter::{NOT_FILTERING, VCPU0_THREAD};
use crate::layout;
use crate::records::{self, MAX_BLOCK};
use qemu_plugin_sys::*;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use tally_sim::trace::MAGIC;

/// The plugin API version the plugin was built for, which QEMU checks.
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// The guest is x86-64 (the filter needs to know its locked instructions).
static X86_64: AtomicBool = AtomicBool::new(false);
/// `mem=off`: no access records (tally simulates no cache and no branch,
/// so only executions count), which spares QEMU a callback per access.
static NO_MEM: AtomicBool = AtomicBool::new(false);

/// Refuses to install: the reason goes to standard error, where the user
/// of `tally sim` sees it (QEMU itself only says that installing failed).
fn refuse(msg: &str) -> c_int {
    let _ = writeln!(std::io::stderr(), "tally-qemu-plugin: {msg}");
    -1
}

/// Entry point QEMU calls after loading the plugin.
///
/// # Safety
/// Called by QEMU with `argc` valid C strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    // SAFETY: QEMU passes a valid info block and argument vector.
    let (system, args) = unsafe {
        let system = (*info).system_emulation;
        let target = CStr::from_ptr((*info).target_name).to_bytes();
        X86_64.store(target == b"x86_64", Ordering::Relaxed);
        let args: Vec<String> = (0..argc.max(0) as usize)
            .map(|i| CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned())
            .collect();
        (system, args)
    };
    if system {
        return refuse("user-mode emulation only (qemu-<arch>, not qemu-system-<arch>)");
    }
    let mut args = match args::parse(&args) {
        Ok(a) => a,
        Err(e) => return refuse(&e),
    };
    NO_MEM.store(!args.mem, Ordering::Relaxed);
    if let Some(fd) = args.ctl
        && args.children
    {
        if let Err(e) = children::take_control(fd) {
            return refuse(&format!("ctl={fd}: {e}"));
        }
        // SAFETY: QEMU's info block is valid during install.
        let target = unsafe { CStr::from_ptr((*info).target_name).to_bytes() };
        children::MACHINE.store(children::machine_of(target), Ordering::Relaxed);
        *children::PASSED_ON
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = args.passed_on.clone();
        if args.output.is_none() {
            // Started by an exec'ing plugin: the streams are made here.
            match children::exec_streams(tally_sim::trace::shared::SLOTS) {
                Ok((stream, shm, free)) => {
                    args.output = Some(Output::Fd(stream));
                    args.shm = Some(shm);
                    args.free = Some(free);
                }
                Err(e) => return refuse(&format!("ctl={fd}: {e}")),
            }
        }
    }
    let file = match args.output {
        None => return refuse("no output: give fd=N or out=PATH"),
        // SAFETY: the caller handed this descriptor to the plugin.
        Some(Output::Fd(fd)) => unsafe { File::from_raw_fd(fd) },
        Some(Output::Path(path)) => match File::create(&path) {
            Ok(f) => f,
            Err(e) => return refuse(&format!("cannot create {path}: {e}")),
        },
    };
    let mut file = match buffers::keep_out_of_the_guests_way(file) {
        Ok(f) => f,
        Err(e) => {
            return refuse(&format!("cannot move the trace descriptor: {e}"));
        }
    };
    STREAM_FD.store(std::os::fd::AsRawFd::as_raw_fd(&file), Ordering::Relaxed);
    if let Some(fd) = args.shm
        && let Err(e) = buffers::map_shared(fd)
    {
        return refuse(&format!("shm={fd}: {e}"));
    }
    if let Some(fd) = args.free {
        if args.shm.is_none() {
            return refuse("free= needs shm=");
        }
        if let Err(e) = buffers::use_pool(fd) {
            return refuse(&format!("free={fd}: {e}"));
        }
    }
    if let Some(fd) = args.notes {
        // SAFETY: the caller handed this descriptor to the plugin.
        match buffers::keep_out_of_the_guests_way(unsafe { File::from_raw_fd(fd) }) {
            Ok(f) => {
                let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
                // SAFETY: fcntl on the descriptor just made: notes never
                // wait.
                unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
                NOTES_FD.store(fd, Ordering::Relaxed);
            }
            Err(e) => return refuse(&format!("notes={fd}: {e}")),
        }
    }
    // SAFETY: QEMU's info block is valid during install.
    let target = unsafe { CStr::from_ptr((*info).target_name).to_bytes() };
    let mut watch = false;
    if (args.notes.is_some() || children::following())
        && let Some((_, nrs)) = EXECVE.iter().find(|(t, _)| target == t.as_bytes())
    {
        EXECVE_NRS.store(nrs[0] | nrs[1] << 16, Ordering::Relaxed);
        watch = true;
    }
    if args.mem && args.valgrind_layout && layout::start(target) {
        watch = true;
        // SAFETY: registering a callback with the id QEMU gave.
        unsafe { qemu_plugin_register_vcpu_syscall_ret_cb(id, Some(on_syscall_return)) };
    }
    if watch {
        // SAFETY: registering a callback with the id QEMU gave.
        unsafe { qemu_plugin_register_vcpu_syscall_cb(id, Some(on_syscall)) };
    }
    // SAFETY: registering fork handlers; they run in the forking thread
    // while QEMU holds the other vCPUs (see `children`).
    unsafe {
        libc::pthread_atfork(
            Some(children::before_fork),
            Some(in_forking_parent),
            Some(in_forked_child),
        )
    };
    if file.write_all(MAGIC).is_err() {
        return refuse("cannot write the trace");
    }
    let d1 = match args
        .d1
        .map(|v| args::parse_d1(&v, &args.d1_policy))
        .transpose()
    {
        Ok(d1) => d1,
        Err(e) => return refuse(&format!("d1: {e}")),
    };
    if let Some(f) = d1
        && args.mem
    {
        let r = tally_sim::filter::filter_record(f.config(), f.policy());
        if file.write_all(&r).is_err() {
            return refuse("cannot write the trace");
        }
        let count = args.count_hits && !buffers::HITS.load(Ordering::Relaxed).is_null();
        let f = Filter::new(f, count);
        FILTER.store(Box::into_raw(Box::new(f)), Ordering::Relaxed);
        FILTER_MODE.store(FILTERING, Ordering::Relaxed);
    }
    #[cfg_attr(not(feature = "inprocess"), allow(unused_mut))]
    let mut out = Out::new(file);
    #[cfg(feature = "inprocess")]
    if args.in_process {
        match crate::inprocess::Sim::new() {
            Ok(s) => out.sim = Some(s),
            Err(e) => {
                return refuse(&format!("in-process simulation: {e}"));
            }
        }
    }
    *OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
    // SAFETY: registering callbacks with the id QEMU gave.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate));
        qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
        qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init));
    }
    0
}

/// The `notes=` pipe (-1: none).
static NOTES_FD: AtomicI32 = AtomicI32::new(-1);
/// The execve and execveat system call numbers of the guest, 16 bits each.
static EXECVE_NRS: AtomicI64 = AtomicI64::new(-1);
/// The execve and execveat system call numbers by QEMU target.
const EXECVE: [(&str, [i64; 2]); 5] = [
    ("x86_64", [59, 322]),
    ("i386", [11, 358]),
    ("aarch64", [221, 281]),
    ("riscv64", [221, 281]),
    ("arm", [11, 387]),
];

/// Notes `what` on the `notes=` pipe, if there is one (never waiting: a
/// full pipe already says enough).
fn note(what: u8) {
    let fd = NOTES_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) of one byte from a valid buffer; async-signal-safe.
        unsafe { libc::write(fd, (&raw const what).cast(), 1) };
    }
}

/// The guest forked, in the process that goes on being recorded: a
/// child not followed is noted.
extern "C" fn in_forking_parent() {
    if !children::following() {
        note(b'f');
    }
}

/// A system call: one that maps memory is followed ([`layout`]), an
/// execve followed (`children=on`) or noted.
unsafe extern "C" fn on_syscall(
    _id: qemu_plugin_id_t,
    vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    _a6: u64,
    _a7: u64,
    _a8: u64,
) {
    layout::on_entry(vcpu, num, [a1, a2, a3, a4, a5]);
    let nrs = EXECVE_NRS.load(Ordering::Relaxed);
    if num != nrs & 0xffff && num != nrs >> 16 {
        return;
    }
    if !children::following() {
        note(b'e');
    } else if num == nrs & 0xffff {
        children::on_execve(vcpu, a1, a2, a3);
    } else {
        children::on_execve(vcpu, 0, 0, 0);
    }
}

/// A system call returned: one that maps memory changes the layout.
unsafe extern "C" fn on_syscall_return(_id: qemu_plugin_id_t, vcpu: c_uint, num: i64, ret: i64) {
    layout::on_return(vcpu, num, ret);
}

/// In a child the guest forked: followed (see `children`), or else stop
/// recording: close the stream and the
/// free-slot pipe (so that tally sees the stream end when the program
/// does, however long the child lives), and put private memory where the
/// shared buffers were, so the child cannot touch the parent's.
extern "C" fn in_forked_child() {
    if children::in_child() {
        return;
    }
    SILENT.store(true, Ordering::Relaxed);
    FAST.store(std::ptr::null_mut(), Ordering::Relaxed);
    for fd in [&STREAM_FD, &FREE_FD] {
        let fd = fd.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: our own descriptor; the child never writes to it
            // again (SILENT), and statics are not dropped.
            unsafe { libc::close(fd) };
        }
    }
    let base = SHM_BASE.load(Ordering::Acquire);
    if base != 0 {
        // SAFETY: replacing our own mapping with anonymous memory.
        unsafe {
            libc::mmap(
                base as *mut c_void,
                SHM_SIZE.load(Ordering::Acquire),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
        }
    }
}

/// A vCPU starts. In QEMU 7.2 a new one is initialized by the thread that
/// creates it, so if that is vCPU 0's, D1 is handed over at once.
unsafe extern "C" fn on_vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    if vcpu == FILTER_VCPU || FILTER_MODE.load(Ordering::Relaxed) == NOT_FILTERING {
        return;
    }
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    if VCPU0_THREAD.load(Ordering::Relaxed) == me {
        filter::hand_over();
    } else {
        filter::ask_handover();
    }
}

/// Reports the host file mapping holding host address `host` at guest
/// addresses, unless already reported.
fn report_mapping(out: &mut Out, guest: u64, host: u64, records: &mut Vec<u8>) {
    if out.known.iter().any(|&(s, e)| s <= guest && guest < e) {
        return;
    }
    let base = host.wrapping_sub(guest);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (_dev, _inode) = (f.next(), f.next());
        let path: String = f.collect::<Vec<_>>().join(" ");
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e), Ok(off)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        if s <= host && host < e {
            let (gs, ge) = (s.wrapping_sub(base), e.wrapping_sub(base));
            let path = if path.starts_with('/') {
                path.as_bytes()
            } else {
                b""
            };
            records::map(records, gs, ge, off, path);
            out.known.push((gs, ge));
            return;
        }
    }
    // Not in any mapping (cannot happen for code QEMU translated): report
    // the page, unnamed, so it is asked about once.
    let page = guest & !0xfff;
    records::map(records, page, page + 0x1000, 0, b"");
    out.known.push((page, page + 0x1000));
}

/// A block is translated: its instructions are declared (and, the first
/// time code of a mapping is seen, the mapping reported), and the
/// callbacks of its runs registered: one per block run and one per access
/// if the block is at most `MAX_BLOCK` instructions, else one per
/// instruction and one per access.
unsafe extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(out) = g.as_mut() else { return };
    // SAFETY: `tb` and its instructions are valid during this callback, as
    // the plugin API guarantees; the data pointers cover `size` bytes.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        let whole = n <= MAX_BLOCK;
        let mut records = Vec::with_capacity(n * 32);
        for i in 0..n {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let vaddr = qemu_plugin_insn_vaddr(insn);
            let size = qemu_plugin_insn_size(insn).min(255);
            let data = std::slice::from_raw_parts(qemu_plugin_insn_data(insn) as *const u8, size);
            if i == 0 {
                let host = qemu_plugin_insn_haddr(insn) as u64;
                if !children::BASE_KNOWN.load(Ordering::Relaxed) {
                    children::GUEST_BASE.store(host.wrapping_sub(vaddr), Ordering::Relaxed);
                    children::BASE_KNOWN.store(true, Ordering::Relaxed);
                }
                report_mapping(out, vaddr, host, &mut records);
            }
            let id = out.next_id;
            out.next_id = out.next_id.wrapping_add(1);
            records::declare(&mut records, id, vaddr, data);
            if i == 0 && whole {
                // One record per run of the block; its instructions have
                // consecutive ids from this one.
                qemu_plugin_register_vcpu_tb_exec_cb(
                    tb,
                    Some(on_block),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    records::block_udata(id, n) as usize as *mut c_void,
                );
            }
            let mem = !NO_MEM.load(Ordering::Relaxed);
            // What the filter must know of the instruction.
            let atomic =
                if X86_64.load(Ordering::Relaxed) && !FILTER.load(Ordering::Relaxed).is_null() {
                    ATOMIC * usize::from(tally_sim::classify_x86_64(data, vaddr).atomic_rmw)
                } else {
                    0
                };
            if whole {
                if !mem {
                    continue;
                }
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    Some(on_mem_at),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                    (i | atomic) as *mut c_void,
                );
            } else {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(on_exec),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    id as usize as *mut c_void,
                );
                if !mem {
                    continue;
                }
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    Some(on_mem),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                    atomic as *mut c_void,
                );
            }
        }
        // Declarations carry no vCPU: written at once, ahead of any
        // execution record that names them.
        if !out.failed && !out.put(&records) {
            out.failed = true;
        }
    }
}

/// The guest has exited: every buffer is written, then the end record.
unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _: *mut c_void) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    if FILTER_MODE.load(Ordering::Relaxed) == FILTERING {
        // SAFETY: see `filter::filter`; the guest has stopped.
        if let Some(f) = unsafe { FILTER.load(Ordering::Relaxed).as_mut() } {
            f.write_progress();
        }
    }
    buffers::flush_all();
}
