//! x86 decoding and objdump-like formatting with iced-x86.

use iced_x86::{
    CodeSize, Decoder, DecoderOptions, FlowControl, FormatMnemonicOptions, Formatter, GasFormatter,
    Mnemonic, OpKind, Register,
};

/// What an instruction does to the flow of control; what an annotator or a
/// call-graph builder needs to know about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InstrKind {
    /// A call, direct or indirect.
    Call,
    /// An unconditional jump, direct or indirect.
    Jump,
    /// A conditional jump (`jcc`, `loop`, `jrcxz`).
    ConditionalJump,
    /// A return.
    Return,
    /// Anything else, including bytes that do not decode (`(bad)`).
    Other,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Its ELF virtual address.
    pub address: u64,
    /// Its encoding; `bytes.len()` is its length.
    pub bytes: Vec<u8>,
    /// AT&T syntax as GNU objdump prints it (`mov    %rsp,%rbp`,
    /// `call   1139 <f>`), so users can compare the two; `(bad)` for bytes
    /// that do not decode.
    pub text: String,
    /// What it does to the flow of control.
    pub kind: InstrKind,
    /// The target of a direct (near) call or jump.
    pub branch_target: Option<u64>,
    /// The address of a RIP-relative memory operand (a global variable, a
    /// jump table, a GOT slot).
    pub memory_target: Option<u64>,
}

impl Instruction {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes; never true for a decoded instruction.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The address just past it.
    pub fn end(&self) -> u64 {
        self.address.wrapping_add(self.bytes.len() as u64)
    }
}

/// Bytes that may precede an opcode as legacy prefixes.
const LEGACY_PREFIXES: [u8; 11] = [
    0x66, 0x67, 0xf0, 0xf2, 0xf3, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65,
];

/// Column of the first operand: objdump pads the mnemonic to six
/// characters and adds a space.
const OPERAND_COLUMN: usize = 7;

/// Decodes all of `code`, which starts at address `ip`. `symbolize` names an
/// address for objdump's `<f+0x10>` notes.
pub(crate) fn decode(
    bitness: u32,
    code: &[u8],
    ip: u64,
    symbolize: impl Fn(u64) -> Option<String>,
) -> Vec<Instruction> {
    let mut formatters = Formatters::new();
    let mut decoder = Decoder::with_ip(bitness, code, ip, DecoderOptions::NONE);
    let mut out = Vec::new();
    let mut instr = iced_x86::Instruction::default();
    while decoder.can_decode() {
        let offset = decoder.position();
        decoder.decode_out(&mut instr);
        // Like objdump, skip one byte after bytes that do not decode, so a
        // stray byte does not swallow the instruction after it.
        let mut len = decoder.position().saturating_sub(offset);
        if len == 0 || instr.is_invalid() {
            len = 1;
            if decoder.set_position(offset + 1).is_err() {
                break;
            }
        }
        let bytes = code
            .get(offset..offset + len)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if instr.is_invalid() {
            out.push(Instruction {
                address: ip.wrapping_add(offset as u64),
                bytes,
                text: "(bad)".to_owned(),
                kind: InstrKind::Other,
                branch_target: None,
                memory_target: None,
            });
            continue;
        }

        let kind = match instr.flow_control() {
            FlowControl::Call | FlowControl::IndirectCall => InstrKind::Call,
            FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => InstrKind::Jump,
            FlowControl::ConditionalBranch => InstrKind::ConditionalJump,
            FlowControl::Return => InstrKind::Return,
            _ => InstrKind::Other,
        };
        let branch_target = (instr.op_count() >= 1
            && matches!(
                instr.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            ))
        .then(|| instr.near_branch_target());
        let memory_target = instr
            .is_ip_rel_memory_operand()
            .then(|| instr.ip_rel_memory_address());
        // `shl %eax` (opcodes D0/D1) has a 1 that is not in the encoding;
        // objdump leaves it out.
        let implicit_one = instr.op_count() == 2
            && instr.op1_kind() == OpKind::Immediate8
            && instr.immediate8() == 1
            && !decoder.get_constant_offsets(&instr).has_immediate();

        let mut text = formatters.mnemonic(&instr);
        // Padding `nopw` with repeated operand-size prefixes: objdump shows
        // each unused one as `data16`.
        if instr.mnemonic() == Mnemonic::Nop && instr.op0_kind() == OpKind::Memory {
            let prefixes = bytes.iter().take_while(|b| LEGACY_PREFIXES.contains(b));
            let data16 = prefixes.filter(|&&b| b == 0x66).count();
            let used = usize::from(text.ends_with('w'));
            for _ in used..data16 {
                text.insert_str(0, "data16 ");
            }
        }
        let mut operands = String::new();
        if let (Some(target), 1) = (branch_target, instr.op_count()) {
            // objdump: `call   1139 <f>`, the target in bare hex.
            operands.push_str(&format!("{target:x}"));
            if let Some(name) = symbolize(target) {
                operands.push_str(&format!(" <{name}>"));
            }
        } else {
            operands = formatters.operands(&instr);
            if implicit_one && let Some(rest) = operands.strip_prefix("$0x1,") {
                operands = rest.to_owned();
            }
            if let Some(target) = memory_target {
                // objdump: `lea    0xe8f(%rip),%rdi        # 2004 <x+0x4>`.
                operands.push_str(&format!("        # {target:x}"));
                if let Some(name) = symbolize(target) {
                    operands.push_str(&format!(" <{name}>"));
                }
            }
        }
        if !operands.is_empty() {
            let width = text.chars().count();
            let pad = OPERAND_COLUMN.saturating_sub(width).max(1);
            text.extend(std::iter::repeat_n(' ', pad));
            text.push_str(&operands);
        }
        out.push(Instruction {
            address: instr.ip(),
            bytes,
            text,
            kind,
            branch_target,
            memory_target,
        });
    }
    out
}

/// GNU `as` syntax with objdump's habits. iced's GAS formatter is close;
/// variants and touches cover the rest: `imul $0x3,%eax,%eax` and
/// `fxch %st(1)` keep their operands, string instructions show their
/// segments (`%es:(%rdi)`), an ignored segment prefix is written as a
/// prefix (`cs nopw 0x0(%rax,%rax,1)`).
struct Formatters {
    plain: GasFormatter,
    /// No pseudo-ops, for `imul` and x87 instructions.
    no_pseudo_ops: GasFormatter,
    /// Segment registers always shown, for string instructions.
    strings: GasFormatter,
}

impl Formatters {
    fn new() -> Formatters {
        let plain = objdump_like_formatter();
        let mut no_pseudo_ops = objdump_like_formatter();
        no_pseudo_ops.options_mut().set_use_pseudo_ops(false);
        let mut strings = objdump_like_formatter();
        strings.options_mut().set_always_show_segment_register(true);
        Formatters {
            plain,
            no_pseudo_ops,
            strings,
        }
    }

    fn pick(&mut self, instr: &iced_x86::Instruction) -> &mut GasFormatter {
        let x87 = (0..instr.op_count())
            .any(|i| instr.op_kind(i) == OpKind::Register && instr.op_register(i).is_st());
        if x87 || instr.mnemonic() == Mnemonic::Imul {
            &mut self.no_pseudo_ops
        } else if instr.is_string_instruction() {
            &mut self.strings
        } else {
            &mut self.plain
        }
    }

    /// The mnemonic with its prefixes (`lock cmpxchg`, `notrack jmp`).
    fn mnemonic(&mut self, instr: &iced_x86::Instruction) -> String {
        let mut text = String::new();
        self.pick(instr)
            .format_mnemonic_options(instr, &mut text, FormatMnemonicOptions::NONE);
        // objdump writes `call *0x8(%rax)` and `push 0x8(%rsp)` where iced
        // writes `callq` and `pushq`: 64 bits is their only size.
        if instr.code_size() == CodeSize::Code64
            && matches!(
                instr.mnemonic(),
                Mnemonic::Call | Mnemonic::Jmp | Mnemonic::Push | Mnemonic::Pop
            )
            && text.ends_with('q')
        {
            text.pop();
        }
        // `f3 c3`, AMD's old branch-predictor padding: objdump's `repz ret`.
        if !instr.is_string_instruction()
            && let Some(rest) = text.strip_prefix("rep ")
        {
            text = format!("repz {rest}");
        }
        if let Some(segment) = ignored_segment(instr)
            && !text.contains("notrack")
        {
            text.insert(0, ' ');
            text.insert_str(0, segment);
        }
        text
    }

    fn operands(&mut self, instr: &iced_x86::Instruction) -> String {
        let mut text = String::new();
        self.pick(instr).format_all_operands(instr, &mut text);
        // `always_show_scale` writes `(%rbp,)` for a base without an index.
        if text.contains(",)") {
            text = text.replace(",)", ")");
        }
        text
    }
}

/// The segment prefix of a 64-bit memory access that the CPU ignores (and
/// iced therefore does not show in the operand).
fn ignored_segment(instr: &iced_x86::Instruction) -> Option<&'static str> {
    if instr.code_size() != CodeSize::Code64
        || !(0..instr.op_count()).any(|i| instr.op_kind(i) == OpKind::Memory)
    {
        return None;
    }
    match instr.segment_prefix() {
        Register::CS => Some("cs"),
        Register::DS => Some("ds"),
        Register::ES => Some("es"),
        Register::SS => Some("ss"),
        _ => None,
    }
}

/// Bare hex with `0x`, no spaces after commas, the scale always shown, and
/// displacements that are encoded shown even when zero (`0x0(%rax)`).
fn objdump_like_formatter() -> GasFormatter {
    let mut f = GasFormatter::new();
    let o = f.options_mut();
    o.set_uppercase_hex(false);
    o.set_hex_prefix("0x");
    o.set_hex_suffix("");
    o.set_small_hex_numbers_in_decimal(false);
    o.set_add_leading_zero_to_hex_numbers(false);
    o.set_leading_zeros(false);
    o.set_branch_leading_zeros(false);
    o.set_displacement_leading_zeros(false);
    o.set_space_after_operand_separator(false);
    o.set_gas_space_after_memory_operand_comma(false);
    o.set_always_show_scale(true);
    o.set_show_zero_displacements(true);
    o.set_show_branch_size(false);
    o.set_signed_memory_displacements(true);
    o.set_signed_immediate_operands(false);
    o.set_rip_relative_addresses(true);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(code: &[u8]) -> Vec<String> {
        decode(64, code, 0x1000, |a| (a == 0x1000).then(|| "f".to_owned()))
            .into_iter()
            .map(|i| i.text)
            .collect()
    }

    #[test]
    fn formats_like_objdump() {
        // push %rbp; mov %rsp,%rbp; movl $0x0,-0x4(%rbp); lea (%rdx,%rdx,4),%eax; ret
        let code = [
            0x55, 0x48, 0x89, 0xe5, 0xc7, 0x45, 0xfc, 0x00, 0x00, 0x00, 0x00, 0x8d, 0x04, 0x92,
            0xc3,
        ];
        assert_eq!(
            texts(&code),
            [
                "push   %rbp",
                "mov    %rsp,%rbp",
                "movl   $0x0,-0x4(%rbp)",
                "lea    (%rdx,%rdx,4),%eax",
                "ret",
            ]
        );
    }

    #[test]
    fn branches_show_targets_and_kinds() {
        // call 0x1000 (rel -5); jne 0x1000; jmp *%rax
        let code = [0xe8, 0xfb, 0xff, 0xff, 0xff, 0x75, 0xf9, 0xff, 0xe0];
        let out = decode(64, &code, 0x1000, |a| (a == 0x1000).then(|| "f".to_owned()));
        assert_eq!(out[0].text, "call   1000 <f>");
        assert_eq!(out[0].kind, InstrKind::Call);
        assert_eq!(out[0].branch_target, Some(0x1000));
        assert_eq!(out[1].text, "jne    1000 <f>");
        assert_eq!(out[1].kind, InstrKind::ConditionalJump);
        assert_eq!(out[2].text, "jmp    *%rax");
        assert_eq!(out[2].kind, InstrKind::Jump);
        assert_eq!(out[2].branch_target, None);
    }

    #[test]
    fn rip_relative_operands_get_a_comment() {
        // mov %eax,0x2e77(%rip) at 0x11a7
        let code = [0x89, 0x05, 0x77, 0x2e, 0x00, 0x00];
        let out = decode(64, &code, 0x11a7, |_| None);
        assert_eq!(out[0].text, "mov    %eax,0x2e77(%rip)        # 4024");
        assert_eq!(out[0].memory_target, Some(0x4024));
    }

    #[test]
    fn bad_and_truncated_bytes_do_not_stop_decoding() {
        // 0x06 is invalid in 64-bit mode; then a truncated `mov $imm32,%eax`.
        let out = decode(64, &[0x06, 0x90, 0xb8, 0x01], 0, |_| None);
        let texts: Vec<_> = out.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["(bad)", "nop", "(bad)", "(bad)"], "{out:?}");
        assert_eq!(out.iter().map(Instruction::len).sum::<usize>(), 4);
    }
}
