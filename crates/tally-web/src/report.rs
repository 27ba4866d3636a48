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
use crate::{Error, page};

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
/// `asm`.
pub fn data(s: &Session, opts: &ReportOptions) -> Result<Value, Error> {
    let events = s.events(s.main());
    let mut views = Map::new();
    for e in &events {
        let q = query(&[("event", e.clone()), ("limit", "5000".into())]);
        let view = s.view(s.main(), Some(e), None)?;
        let total = view.total();
        let keep = |v: &Value| -> bool {
            if total == 0.0 {
                return true;
            }
            let share = |k: &str| v[k].as_f64().unwrap_or(0.0).abs() / total.abs();
            share("self") >= opts.threshold
                || share("inclusive") >= opts.threshold
                || share("delta_self") >= opts.threshold
        };
        let table = api::functions(s, &q)?;
        let mut rows = Vec::new();
        let mut functions = Map::new();
        let mut offset = 0;
        let mut page_rows = table["rows"].as_array().cloned().unwrap_or_default();
        let count = table["count"].as_u64().unwrap_or(0) as usize;
        loop {
            for r in page_rows.drain(..) {
                if !keep(&r) {
                    continue;
                }
                if let Some(n) = r["node"].as_u64() {
                    let f =
                        api::function(s, &query(&[("event", e.clone()), ("node", n.to_string())]))?;
                    functions.insert(n.to_string(), f);
                }
                rows.push(r);
            }
            offset += 5000;
            if offset >= count {
                break;
            }
            let q = query(&[
                ("event", e.clone()),
                ("limit", "5000".into()),
                ("offset", offset.to_string()),
            ]);
            page_rows = api::functions(s, &q)?["rows"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
        let mut head = table.clone();
        head["rows"] = json!([]);
        views.insert(
            e.clone(),
            json!({"head": head, "rows": rows, "functions": functions, "left_out": count.saturating_sub(functions.len())}),
        );
    }
    let first = query(&[("event", events.first().cloned().unwrap_or_default())]);
    let flame = api::flame_svg(s, &first).map(text).ok();
    let graph = api::graph_svg(s, &first).map(text).ok();
    let source = api::annotated(s, &first, false).map(text).ok();
    let asm = api::annotated(s, &first, true).map(text).ok();
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
