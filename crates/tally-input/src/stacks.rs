//! A profile with its stacks, for the pictures and exporters that draw
//! whole stacks: the recorded ones where the input has them, else
//! estimated from the call arcs (and said so).

use std::path::Path;

use tally_analysis::transform::{self, Transform};
use tally_analysis::{Aggregate, AggregateBuilder, EstimateOptions, StackTree, estimate_tree};
use tally_formats::FileFormat;
use tally_formats::Source;
use tally_model::{AnyCost, Profile, Stacks};

use crate::{Error, Summing, read_gmon, read_summing, warning_lines};

/// Stacks as recorded, or estimated from the arcs.
pub enum StackSource {
    /// The sampler's stacks (perf.data, pprof, folded…), exact.
    Recorded(Stacks<u64>),
    /// Estimated from the arcs: each function's cost split across its
    /// callers in proportion to the calls' costs.
    Estimated(StackTree),
}

/// A profile with its stacks, and what reading it had to say.
pub struct WithStacks {
    /// The profile (without its recorded stacks, which are in `stacks`).
    pub profile: Profile<u64>,
    /// Its stacks.
    pub stacks: StackSource,
    /// The readers' warnings, as printed.
    pub warnings: Vec<String>,
    /// What converting gmon input had to say (the command prefixes them).
    pub notices: Vec<String>,
}

impl WithStacks {
    /// Whether the stacks are estimated rather than recorded.
    pub fn estimated(&self) -> bool {
        matches!(self.stacks, StackSource::Estimated(_))
    }
}

/// Reads `sources` as one profile with its stacks. gmon files need
/// `program`; one Callgrind file is summed as it is read (the estimate
/// needs only self costs and arcs); a difference (negative counts) has no
/// stacks to draw and is refused. Estimated stacks split no share below
/// `min_share` of the total further.
pub fn load_with_stacks(
    sources: &[Source],
    program: Option<&Path>,
    min_share: f64,
) -> Result<WithStacks, Error> {
    let Some(first) = sources.first() else {
        return Err(Error::Usage("no input".into()));
    };
    let file = first.path();
    let signed = || {
        Error::Input(format!(
            "{}: a difference (negative counts) has no flame graph: draw `tally flame --diff A B` of the two profiles",
            file.display()
        ))
    };
    if program.is_some() || sources.iter().any(|s| s.format() == FileFormat::Gmon) {
        let input = read_gmon(sources, program)?;
        let conv = input.to_profile(&tally_analysis::gprof::Options::default())?;
        return with_stacks(conv.profile, file, min_share, Vec::new(), conv.notices);
    }
    let read = read_summing(
        sources,
        true,
        || AggregateBuilder::<u64>::keeping_jumps(false),
        || tally_model::NullSink,
        None,
    )?;
    let (outcome, builder) = match read {
        Summing::Streamed(AnyCost::Unsigned(read)) => read,
        Summing::Whole {
            profile: AnyCost::Unsigned(profile),
            warnings,
        } => return with_stacks(profile, file, min_share, warnings, Vec::new()),
        _ => return Err(signed()),
    };
    let warnings = warning_lines(file, &outcome.warnings);
    let profile = outcome.profile;
    let agg = builder.finish(profile.names.function_count(), |_| true);
    let stacks = estimate(&agg, file, min_share)?;
    Ok(WithStacks {
        profile,
        stacks: StackSource::Estimated(stacks),
        warnings,
        notices: Vec::new(),
    })
}

/// A loaded profile with its recorded stacks, or stacks estimated from
/// its arcs.
fn with_stacks(
    mut profile: Profile<u64>,
    file: &Path,
    min_share: f64,
    warnings: Vec<String>,
    notices: Vec<String>,
) -> Result<WithStacks, Error> {
    let stacks = match profile.stacks.take() {
        Some(s) if !s.is_empty() => StackSource::Recorded(s),
        _ => StackSource::Estimated(estimate(
            &Aggregate::new(&profile, |_| true),
            file,
            min_share,
        )?),
    };
    Ok(WithStacks {
        profile,
        stacks,
        warnings,
        notices,
    })
}

fn estimate(agg: &Aggregate<u64>, file: &Path, min_share: f64) -> Result<StackTree, Error> {
    estimate_tree(agg, EstimateOptions { min_share })
        .map_err(|e| Error::Input(format!("{}: estimating stacks: {e}", file.display())))
}

/// The flame tree of one folded-stacks file read straight from its lines
/// (no profile built), or `None` when `path` holds another format: the
/// tree `tally flame` draws of one folded file, at the speed of its lines.
pub fn folded_tree(path: &Path) -> Result<Option<tally_report::flame::Tree>, Error> {
    let source = Source::open(path)?;
    if source.format() != FileFormat::Folded {
        return Ok(None);
    }
    let mut tree = tally_report::flame::read_folded(source.input()?)?;
    tree.finish();
    Ok(Some(tree))
}

impl WithStacks {
    /// The profile with `list` applied to its stacks, in order: the stacks
    /// transformed and the profile's records derived again from them (in
    /// one part), so that every analysis, report and writer after this
    /// step sees the transformed profile. Estimated stacks stay marked as
    /// such. No transform leaves everything as it was.
    pub fn transformed(mut self, list: &[Transform]) -> Result<WithStacks, Error> {
        if list.is_empty() {
            return Ok(self);
        }
        let names = &mut self.profile.names;
        let (stacks, listed) = match &self.stacks {
            StackSource::Recorded(s) => {
                let s = transform::apply_stacks(names, s, list)?;
                (StackSource::Recorded(s.clone()), s)
            }
            StackSource::Estimated(t) => {
                let t = transform::apply_tree(names, t, list)?;
                let s = t.to_stacks();
                (StackSource::Estimated(t), s)
            }
        };
        let p = &mut self.profile;
        let mut part = tally_model::Part::new(p.positions, p.events.len());
        if let Some(first) = p.parts.first() {
            part.info.cmd = first.info.cmd.clone();
            part.info.desc = first.info.desc.clone();
        }
        listed
            .derive_part(&p.names, p.positions, &mut part)
            .ok_or(tally_analysis::Error::StacksOverflow)?;
        p.parts = vec![part];
        self.stacks = stacks;
        Ok(self)
    }

    /// The profile carrying its stacks (estimated ones listed), for the
    /// analyses that take a profile: their inclusive costs then count
    /// each stack once, as the pictures do.
    pub fn into_profile(self) -> Profile<u64> {
        let mut p = self.profile;
        p.stacks = Some(match self.stacks {
            StackSource::Recorded(s) => s,
            StackSource::Estimated(t) => t.to_stacks(),
        });
        p
    }
}
