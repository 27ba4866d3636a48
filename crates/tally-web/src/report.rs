//! `tally report --html`: the page in one file, the API's replies it needs
//! embedded, for a CI artefact or an e-mail. Rows are trimmed by a
//! threshold (a share of the total, self or inclusive) so a large profile
//! gives a small file; the call graph and flame graph are embedded once
//! (the flame graph in the first event), the source and assembly views
//! as `tally annotate --auto` and `--asm` give them.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::api::{self, Query};
use crate::session::Session;
use crate::view::Grouping;
use crate::{Error, page};

/// The most functions a profile may have for the report to embed its
/// assembly view.
const ASM_FUNCTIONS: usize = 5000;

/// What the report holds.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Keep functions whose self or inclusive cost is at least this share
    /// (a fraction) of the total, in some event.
    pub threshold: f64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions { threshold: 0.001 }
    }
}

fn query(pairs: &[(&str, String)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn text(r: api::Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// The embedded data: `meta`, and per event its `rows` and the selected
/// function's entries (`functions`), plus `flame`, `graph`, `source` and
/// `asm`. Only rows at or above the threshold are turned into JSON; how
/// many were left out is embedded for the page to say.
pub fn data(s: &Session, opts: &ReportOptions) -> Result<Value, Error> {
    let events = s.events(s.main());
    let mut views = Map::new();
    for e in &events {
        let q = query(&[("event", e.clone()), ("limit", "0".into())]);
        let head = api::functions(s, &q)?;
        let view = s.view(s.main(), Some(e), None)?;
        let total = view.total();
        let table = s.table(Some(e), None, Grouping::Function)?;
        let share = |v: f64| {
            if total == 0.0 {
                1.0
            } else {
                v.abs() / total.abs()
            }
        };
        let kept: Vec<usize> = (0..table.rows.len())
            .filter(|&i| {
                let r = &table.rows[i];
                let delta = table
                    .base
                    .as_ref()
                    .map_or(0.0, |b| r.self_cost - b[i].self_cost);
                share(r.self_cost) >= opts.threshold
                    || r.inclusive.is_some_and(|v| share(v) >= opts.threshold)
                    || share(delta) >= opts.threshold
            })
            .collect();
        let mut rows = Vec::with_capacity(kept.len());
        let mut functions = Map::new();
        for &i in &kept {
            rows.push(api::row_json(
                &table.rows[i],
                table.base.as_ref().map(|b| &b[i]),
                total,
            ));
            let n = table.rows[i].node;
            let f = api::function(s, &query(&[("event", e.clone()), ("node", n.to_string())]))?;
            functions.insert(n.to_string(), f);
        }
        views.insert(
            e.clone(),
            json!({
                "head": head,
                "rows": rows,
                "functions": functions,
                "left_out": table.rows.len() - kept.len(),
            }),
        );
    }
    let first = query(&[("event", events.first().cloned().unwrap_or_default())]);
    let flame = api::flame_svg(s, &first).map(text).ok();
    let graph = api::graph_svg(s, &first).map(text).ok();
    let source = api::annotated(s, &first, false).map(text).ok();
    // The assembly view disassembles every object above the threshold:
    // for a large program (cc1: minutes, megabytes) it is left out.
    let functions = s.table(None, None, Grouping::Function)?.rows.len();
    let asm = if functions <= ASM_FUNCTIONS {
        api::annotated(s, &first, true).map(text).ok()
    } else {
        None
    };
    Ok(json!({
        "meta": api::meta(s),
        "threshold": opts.threshold,
        "views": views,
        "flame": flame,
        "graph": graph,
        "source": source,
        "asm": asm,
    }))
}

/// Writes the report to `out` through tally-formats' safe output
/// (temporary file, renamed).
pub fn write(s: &Session, opts: &ReportOptions, out: &Path) -> Result<u64, Error> {
    let data = data(s, opts)?;
    let title = format!("tally report — {}", s.inputs[s.main()].name);
    let html = page(&title, &serde_json::to_string(&data).unwrap_or_default());
    tally_formats::output::write_file(out, |w| std::io::Write::write_all(w, html.as_bytes()))?;
    Ok(html.len() as u64)
}
