//! Scanning an input without keeping its records (`tally check`).

use tally_formats::FileFormat;
use tally_formats::Source;
use tally_formats::callgrind::ReadOutcome;
use tally_model::AnyCost;

use crate::Error;

/// An input scanned: a DCPI profile, or one read as Callgrind's model
/// (Callgrind, Cachegrind, pprof, perf.data, `perf script` text, folded
/// stacks) with its header facts, names, totals and warnings but none of
/// its records, so memory does not grow with the file.
pub enum Scanned {
    /// A DCPI profile (small: one count per sampled address).
    Dcpi(tally_formats::dcpi::DcpiProfile),
    /// Anything the Callgrind model holds.
    Profile(Box<AnyCost<ReadOutcome<u64>, ReadOutcome<i64>>>),
}

/// Scans `source`; `progress` is told the bytes read. The bytes counted
/// are the content's (decompressed) for every format, the stack formats
/// (read whole and replayed) included.
pub fn scan(source: &Source, progress: Option<&mut dyn FnMut(u64)>) -> Result<Scanned, Error> {
    if source.format() == FileFormat::Dcpi {
        let p = tally_formats::dcpi::parse(&source.bytes()?, source.name())?;
        return Ok(Scanned::Dcpi(p));
    }
    let mut scanned = tally_formats::scan(source, progress)?;
    let bytes = match &mut scanned {
        AnyCost::Unsigned(o) => &mut o.bytes,
        AnyCost::Signed(o) => &mut o.bytes,
    };
    if *bytes == 0 {
        *bytes = match source.content_size_hint() {
            Some(n) => n,
            None => source.bytes()?.len() as u64,
        };
    }
    Ok(Scanned::Profile(Box::new(scanned)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_of_a_stack_profile_are_its_content() {
        let text = b"main;f 3\nmain;g 4\n".to_vec();
        let source = Source::from_bytes("s.folded", text.clone());
        assert_eq!(source.format(), FileFormat::Folded);
        let Scanned::Profile(read) = scan(&source, None).unwrap() else {
            panic!("folded stacks read as DCPI");
        };
        let AnyCost::Unsigned(o) = *read else {
            panic!("signed");
        };
        assert_eq!(o.bytes, text.len() as u64);
    }
}
