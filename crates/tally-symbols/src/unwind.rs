//! DWARF unwinding of sampled user stacks (`perf_event_open`'s
//! `PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER`, what `tally record
//! --call-graph dwarf` and `perf record --call-graph dwarf` take): each
//! sample carries the user registers `bp`, `sp`, `ip` and a copy of the top
//! of the user stack; `framehop` walks it with the call frame information
//! (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) of each mapped image, so
//! code built without frame pointers (gcc's default at -O2) gets real call
//! chains. One unwinder serves the recorder and the perf.data reader, so
//! both give the same stacks for the same samples.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// `PERF_CONTEXT_USER`: the addresses after it in a call chain are user ones.
pub const CONTEXT_USER: u64 = -512i64 as u64;

/// The deepest stack kept.
const MAX_FRAMES: usize = 512;

/// The unwind sections of one image, shared by every process mapping it.
struct Image {
    /// The ELF's executable segments: (file offset, size, address).
    exec: Vec<(u64, u64, u64)>,
    text: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    eh_frame: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    debug_frame: Option<Arc<[u8]>>,
    got: Option<std::ops::Range<u64>>,
}

impl Image {
    fn read(path: &[u8]) -> Option<Image> {
        let path = std::str::from_utf8(path)
            .ok()
            .filter(|p| p.starts_with('/'))?;
        // A path from a file's records may name a device: never read one.
        if !std::fs::metadata(path).ok()?.is_file() {
            return None;
        }
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let bytes = s.uncompressed_data().ok()?;
            Some((s.address()..s.address() + s.size(), Arc::from(&*bytes)))
        };
        let exec = file
            .segments()
            .filter(|s| match s.flags() {
                object::SegmentFlags::Elf { p_flags, .. } => p_flags.0 & object::elf::PF_X.0 != 0,
                _ => false,
            })
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Some(Image {
            exec,
            text: section(".text"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
            got: file
                .section_by_name(".got")
                .map(|s| s.address()..s.address() + s.size()),
        })
    }

    /// The difference between run-time and ELF addresses when the file is
    /// mapped at `start` from file offset `offset` for `len` bytes: from the
    /// executable segment the mapping holds.
    fn bias(&self, start: u64, len: u64, offset: u64) -> Option<u64> {
        let &(seg_off, _, seg_addr) = self
            .exec
            .iter()
            .find(|&&(o, size, _)| o < offset + len && offset < o + size.max(1))?;
        // File offset `o` is at `start + o - offset`; its ELF address is
        // `o - seg_off + seg_addr`.
        Some(
            start
                .wrapping_add(seg_off)
                .wrapping_sub(offset)
                .wrapping_sub(seg_addr),
        )
    }

    fn module(&self, name: &[u8], start: u64, len: u64, bias: u64) -> Module<Arc<[u8]>> {
        Module::new(
            String::from_utf8_lossy(name).into_owned(),
            start..start.saturating_add(len),
            bias,
            ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: self.text.as_ref().map(|t| t.0.clone()),
                text: self.text.as_ref().map(|t| t.1.clone()),
                got_svma: self.got.clone(),
                eh_frame_svma: self.eh_frame.as_ref().map(|t| t.0.clone()),
                eh_frame: self.eh_frame.as_ref().map(|t| t.1.clone()),
                eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
                eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
                debug_frame: self.debug_frame.clone(),
                ..Default::default()
            },
        )
    }
}

/// A sampled user stack: the registers and the copied bytes from `sp` up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStack {
    /// `bp`.
    pub bp: u64,
    /// `sp`.
    pub sp: u64,
    /// `ip`.
    pub ip: u64,
    /// The stack from `sp` up, as much as the kernel copied.
    pub bytes: Vec<u8>,
}

/// The unwinders of the processes recorded, and the images they map.
#[derive(Default)]
pub struct Unwinders {
    images: FxHashMap<Vec<u8>, Option<Arc<Image>>>,
    processes: FxHashMap<i32, UnwinderX86_64<Arc<[u8]>>>,
    cache: CacheX86_64,
}

impl Unwinders {
    /// `path` mapped executable at `start..start + len` of process `pid`
    /// from file offset `offset`.
    pub fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        let image = self
            .images
            .entry(path.to_vec())
            .or_insert_with(|| Image::read(path).map(Arc::new))
            .clone();
        let unwinder = self.processes.entry(pid).or_default();
        // A new mapping replaces one at the same address.
        unwinder.remove_module(start);
        let Some(image) = image else {
            return;
        };
        if let Some(bias) = image.bias(start, len, offset) {
            unwinder.add_module(image.module(path, start, len, bias));
        }
    }

    /// Process `pid` forked from `ppid`: it has its parent's mappings.
    pub fn fork(&mut self, pid: i32, ppid: i32) {
        if pid != ppid
            && let Some(u) = self.processes.get(&ppid).cloned()
        {
            self.processes.insert(pid, u);
        }
    }

    /// Process `pid` called `exec`: its mappings are gone.
    pub fn exec(&mut self, pid: i32) {
        self.processes.remove(&pid);
    }

    /// The user call chain of a sample of `pid`: leaf first, after
    /// [`CONTEXT_USER`]; just the instruction when `pid` has no known
    /// mappings.
    pub fn unwind(&mut self, pid: i32, stack: &UserStack, out: &mut Vec<u64>) {
        out.push(CONTEXT_USER);
        let Some(unwinder) = self.processes.get(&pid) else {
            out.push(stack.ip);
            return;
        };
        let bytes = &stack.bytes;
        let sp = stack.sp;
        let mut read = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = bytes.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut frames = unwinder.iter_frames(
            stack.ip,
            UnwindRegsX86_64::new(stack.ip, stack.sp, stack.bp),
            &mut self.cache,
            &mut read,
        );
        let first = out.len();
        while let Ok(Some(frame)) = frames.next() {
            if out.len() - first >= MAX_FRAMES {
                break;
            }
            out.push(match frame {
                FrameAddress::InstructionPointer(a) => a,
                FrameAddress::ReturnAddress(a) => a.get(),
            });
        }
        if out.len() == first {
            out.push(stack.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_read_from_absolute_paths_of_elf_files() {
        let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let image = Image::read(exe.as_os_str().as_encoded_bytes()).expect("ELF");
        assert!(!image.exec.is_empty(), "an executable segment");
        assert!(image.text.is_some());
        assert!(image.eh_frame.is_some(), "Rust programs unwind");
        assert!(Image::read(b"[vdso]").is_none());
        assert!(Image::read(b"relative/path").is_none());
        assert!(Image::read(b"/dev/zero").is_none());
        assert!(
            Image::read(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml").as_bytes()).is_none()
        );
    }
}
