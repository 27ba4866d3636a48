//! What an x86-64 instruction does to the flow of control, as far as
//! Cachegrind's branch simulation and a call tracker need to know.
//!
//! Cachegrind counts a conditional branch for every guarded side exit of
//! the VEX IR: `jcc`, `loop*`, `jrcxz`, and the exits VEX makes for `rep`
//! string instructions (one per execution for `rep`, a second one for
//! `repe`/`repne` when the iteration runs). It counts an indirect branch
//! for a jump or call through a register or memory, not for `ret` (a return
//! stack is assumed to predict those).

use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind};

/// The kinds an instruction can be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Anything that only falls through or jumps to a fixed place.
    #[default]
    Other,
    /// A conditional jump.
    Cond,
    /// A jump through a register or memory.
    IndirectJump,
    /// A direct call.
    Call,
    /// A call through a register or memory.
    IndirectCall,
    /// A return.
    Ret,
    /// `rep` string instruction: one exit per execution.
    Rep,
    /// `repe`/`repne` string instruction: a second exit when it iterates.
    RepCond,
}

/// An instruction as the simulator keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Its kind.
    pub kind: Kind,
    /// A locked read-modify-write (or `xchg` with memory): one access that
    /// Cachegrind counts as a modify, i.e. a read.
    pub atomic_rmw: bool,
    /// It has an explicit memory operand that it reads or writes (`lea`,
    /// `nop` and prefetches do not).
    pub memory: bool,
}

/// Classifies the x86-64 instruction at the start of `code` (`Other` if it
/// does not decode).
pub fn classify_x86_64(code: &[u8], ip: u64) -> Flow {
    let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    if !d.can_decode() {
        return Flow::default();
    }
    let i = d.decode();
    if i.is_invalid() {
        return Flow::default();
    }
    let has_mem = (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory);
    let atomic_rmw = has_mem && (i.has_lock_prefix() || i.mnemonic() == Mnemonic::Xchg);
    let string = i.is_string_instruction();
    let kind = match i.flow_control() {
        FlowControl::ConditionalBranch => Kind::Cond,
        FlowControl::IndirectBranch => Kind::IndirectJump,
        FlowControl::Call => Kind::Call,
        FlowControl::IndirectCall => Kind::IndirectCall,
        FlowControl::Return => Kind::Ret,
        _ if string && (i.has_repe_prefix() || i.has_repne_prefix()) => {
            // `rep movs`/`rep stos` carry the F3 byte too, which iced calls
            // `repe`; only compares and scans test the flags.
            if matches!(
                i.mnemonic(),
                Mnemonic::Cmpsb
                    | Mnemonic::Cmpsw
                    | Mnemonic::Cmpsd
                    | Mnemonic::Cmpsq
                    | Mnemonic::Scasb
                    | Mnemonic::Scasw
                    | Mnemonic::Scasd
                    | Mnemonic::Scasq
            ) {
                Kind::RepCond
            } else {
                Kind::Rep
            }
        }
        _ => Kind::Other,
    };
    let memory = has_mem
        && !matches!(
            i.mnemonic(),
            Mnemonic::Lea
                | Mnemonic::Nop
                | Mnemonic::Prefetchnta
                | Mnemonic::Prefetcht0
                | Mnemonic::Prefetcht1
                | Mnemonic::Prefetcht2
                | Mnemonic::Prefetchw
        );
    Flow {
        kind,
        atomic_rmw,
        memory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let k = |b: &[u8]| classify_x86_64(b, 0x1000).kind;
        assert_eq!(k(&[0x74, 0x05]), Kind::Cond); // je
        assert_eq!(k(&[0xe3, 0x05]), Kind::Cond); // jrcxz
        assert_eq!(k(&[0xff, 0xe0]), Kind::IndirectJump); // jmp *%rax
        assert_eq!(k(&[0xff, 0x25, 0, 0, 0, 0]), Kind::IndirectJump); // jmp *0(%rip)
        assert_eq!(k(&[0xe8, 0, 0, 0, 0]), Kind::Call);
        assert_eq!(k(&[0xff, 0xd0]), Kind::IndirectCall); // call *%rax
        assert_eq!(k(&[0xc3]), Kind::Ret);
        assert_eq!(k(&[0xf3, 0xa4]), Kind::Rep); // rep movsb
        assert_eq!(k(&[0xf3, 0xaa]), Kind::Rep); // rep stosb
        assert_eq!(k(&[0xf3, 0xa6]), Kind::RepCond); // repe cmpsb
        assert_eq!(k(&[0xf2, 0xae]), Kind::RepCond); // repne scasb
        assert_eq!(k(&[0xa4]), Kind::Other); // movsb
        assert_eq!(k(&[0xeb, 0x00]), Kind::Other); // jmp rel8
        assert_eq!(k(&[0x90]), Kind::Other);
        assert_eq!(k(&[]), Kind::Other);
        assert!(classify_x86_64(&[0xf0, 0x48, 0x01, 0x07], 0).atomic_rmw); // lock add %rax,(%rdi)
        assert!(classify_x86_64(&[0x48, 0x87, 0x07], 0).atomic_rmw); // xchg %rax,(%rdi)
        assert!(!classify_x86_64(&[0x48, 0x87, 0xc3], 0).atomic_rmw); // xchg %rax,%rbx
        assert!(!classify_x86_64(&[0x48, 0x01, 0x07], 0).atomic_rmw);
        assert!(classify_x86_64(&[0x48, 0x89, 0x07], 0).memory); // mov %rax,(%rdi)
        assert!(!classify_x86_64(&[0x48, 0x8d, 0x07], 0).memory); // lea (%rdi),%rax
        assert!(!classify_x86_64(&[0x0f, 0x1f, 0x40, 0x00], 0).memory); // nopl 0(%rax)
    }
}
