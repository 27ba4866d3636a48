//! `tally_gen::measure` counts what the generator says it wrote, and what
//! tally's reader finds in the same text: the calibration table in
//! BENCHMARKS.md is only as good as these counts.

use tally_formats::Input;
use tally_formats::callgrind;
use tally_gen::{Config, EventSet, Shape, generate, measure::measure};

#[test]
fn measure_agrees_with_the_generator_and_the_reader() {
    for (events, compress, shape) in [
        (EventSet::Ir, true, Shape::default()),
        (EventSet::Cache, false, Shape::default()),
        (EventSet::Ir, true, Shape::CC1),
        (EventSet::Ir, false, Shape::CC1),
        (EventSet::Cache, true, Shape::PYTHON),
        (EventSet::Branch, false, Shape::PYTHON),
    ] {
        let config = Config {
            seed: 3,
            size: 2 << 20,
            events,
            compress,
            blocks: None,
            shape,
        };
        let mut out = Vec::new();
        let stats = generate(&config, &mut out).expect("writing to memory");
        let m = measure(&out);
        assert_eq!(m.bytes, stats.bytes);
        assert_eq!(m.lines, out.iter().filter(|&&b| b == b'\n').count() as u64);
        assert_eq!(m.kinds[0], stats.lines, "cost lines");
        assert_eq!(m.kinds[1], stats.calls, "calls");
        assert_eq!(m.kinds[2], stats.jumps, "jumps");
        assert_eq!(m.kinds[3], stats.blocks, "fn= lines");
        assert_eq!(m.kind_bytes.iter().sum::<u64>(), stats.bytes);
        // With --separate-callers=3 every name is a context of four parts.
        if shape == Shape::CC1 {
            assert_eq!(m.context_names, m.function_names);
            assert_eq!(m.context_parts, 4 * m.function_names);
        } else if shape == Shape::PYTHON {
            // Only the second levels of recursion, `f'2`.
            assert!(m.context_names > 0 && m.context_names < m.function_names / 5);
            assert_eq!(m.context_parts, 2 * m.context_names);
        } else {
            assert_eq!(m.context_names, 0);
        }
        // Every function is defined once when names are compressed.
        if compress {
            let defined = m.definitions[3] + m.definitions[4] + m.definitions[11];
            assert_eq!(defined, m.function_names);
            let input = Input::from_bytes("generated", out.clone()).unwrap();
            let (profile, _) = callgrind::read::<u64>(input).unwrap();
            let names: std::collections::HashSet<_> =
                profile.names.functions().map(|(_, k)| k.name).collect();
            assert_eq!(m.function_names, names.len() as u64);
        }
    }
}
