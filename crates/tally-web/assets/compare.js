"use strict";
// The comparison of `serve --diff A B` on the call trees (each node with
// A's total, B's and B − A, red where it grew past the noise threshold,
// blue where it shrank), and what a report carries offline: its call
// trees, the comparison's lists and the breadcrumb of the transforms it
// was made with. Loaded after explore.js, whose tree rendering asks
// `treeLevel` for a level and `diffTreeCells` for a comparison's row.

// The trees' columns and the read-only breadcrumb.
(function addStyle() {
  const s = document.createElement("style");
  s.textContent = [
    ".tree-row .num.a, .tree-row .num.b { min-width: 96px; }",
    ".tree-row .num.d { min-width: 96px; font-weight: 600; }",
    ".tree-row[data-change=regressed] .num.d { color: #c00; }",
    ".tree-row[data-change=improved] .num.d { color: #0050b0; }",
    ".tree-row[data-change=regressed] { box-shadow: inset 3px 0 #e33; }",
    ".tree-row[data-change=improved] { box-shadow: inset 3px 0 #36c; }",
    ".tree-head { display: flex; gap: 8px; font-weight: 600; color: #555; padding-left: 12px; }",
    ".tree-head span { min-width: 96px; text-align: right; }",
    "#crumbs button.read-only { cursor: default; }",
  ].join("\n");
  document.head.appendChild(s);
})();

// The Compare tab's noise threshold (a percentage of A's total).
function compareNoise() {
  const box = document.querySelector("#tab-compare");
  const n = parseFloat((box && box.dataset.noise) || "0.1");
  return Number.isFinite(n) && n >= 0 ? n : 0.1;
}

// Which way a change went past the noise: regressed, improved or same.
function changeOf(delta, totalA) {
  const floor = (compareNoise() / 100) * Math.abs(totalA || 0);
  if (delta === 0 || Math.abs(delta) <= floor) return "same";
  return delta > 0 ? "regressed" : "improved";
}

// A level of a call tree: a report's embedded level, the comparison's
// (A and B per node) with --diff, or the one profile's.
async function treeLevel(kind, params) {
  let v;
  if (DATA) {
    const trees = DATA.trees || {};
    if (!trees[kind]) throw new Error("This report holds no call tree (the profile has no stacks).");
    if (trees.event && params.event && params.event !== trees.event) {
      throw new Error(`This report holds the call trees of ${trees.event} only.`);
    }
    const at = kind === "tree" ? String(params.node) : String(params.path || "");
    v = trees[kind][at];
    if (!v) throw new Error("This level of the tree is not in the report (below its threshold or depth).");
  } else if (state.meta && state.meta.diff) {
    v = await api("compare", { ...params, view: kind });
  } else {
    return api(kind, params);
  }
  if (v.totals) {
    for (const c of v.children) c.base_total = v.totals.a;
  }
  return v;
}

// The cells of a comparison's tree row: A's total, B's, B − A, the
// name; the row marked with the way it changed.
function diffTreeCells(c, row) {
  const change = changeOf(c.delta, c.base_total);
  row.dataset.change = change;
  row.dataset.a = String(c.a);
  row.dataset.b = String(c.b);
  row.dataset.delta = String(c.delta);
  const pct = c.base_total ? ` (${c.delta > 0 ? "+" : ""}${(c.delta * 100 / c.base_total).toFixed(2)}% of A's total)` : "";
  return `<span class="twist">${c.more ? "▸" : "·"}</span>` +
    `<span class="num a" title="A: ${c.a.toLocaleString("en-US")}">${fmt(c.a)}</span>` +
    `<span class="num b" title="B: ${c.b.toLocaleString("en-US")}">${fmt(c.b)}</span>` +
    `<span class="num d" title="B − A${pct}">${c.delta ? signed(c.delta) : "0"}</span>` +
    `<span class="tree-name" title="${esc(c.function)}${c.file ? " · " + esc(c.file) : ""}">${esc(c.function)}</span>`;
}

// The columns' heads over a comparison's tree, and what the colours say.
function diffTreeHead(box, v) {
  if (!v.totals || box.querySelector(".tree-head")) return;
  const note = document.createElement("p");
  note.className = "note";
  note.textContent = `A ${v.totals.a.toLocaleString("en-US")}, B ${v.totals.b.toLocaleString("en-US")}, B − A ${signed(v.totals.delta)}. ` +
    `Red: grew by more than ${compareNoise()}% of A's total (the Compare tab's noise); blue: shrank. Stacks matched by function from the root.`;
  const head = document.createElement("div");
  head.className = "tree-head";
  head.innerHTML = "<span>A</span><span>B</span><span>B − A</span>";
  const ul = box.querySelector("ul.tree");
  box.insertBefore(note, ul);
  box.insertBefore(head, ul);
}

// The Compare tab's lists: the server's, or a report's (embedded with
// the changes at or above its threshold, the noise applied here as the
// server applies it; below the threshold the lists say how many more).
async function compareLists(params) {
  if (!DATA) return api("compare", params);
  const all = DATA.compare && DATA.compare[params.by || "self"];
  if (!all) throw new Error("This report holds no comparison (made without --diff).");
  const noise = parseFloat(params.noise) || 0;
  const floor = noise / 100 * Math.abs(all.totals.a);
  const out = { ...all, noise_percent: noise };
  for (const key of ["regressed", "improved"]) {
    const entries = all[key].entries.filter((e) => Math.abs(e[all.by].delta) > floor);
    // Those left out of the report are under its threshold: past the
    // noise only when the noise is lower.
    const unsent = all[key].count - all[key].entries.length;
    out[key] = { count: entries.length + (noise < all.floor_percent ? unsent : 0), entries };
  }
  return out;
}

// A report's breadcrumb: the transforms it was made with, read-only.
function drawReportCrumbs(box) {
  box.innerHTML = "";
  const t = (DATA && DATA.transforms) || [];
  if (!t.length) return;
  const all = document.createElement("button");
  all.type = "button";
  all.className = "read-only";
  all.setAttribute("aria-disabled", "true");
  all.textContent = "Report made with";
  box.appendChild(all);
  for (const [k, v] of t) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "crumb read-only";
    b.setAttribute("aria-disabled", "true");
    b.textContent = `› ${k} ${v}`;
    b.title = "applied when the report was made (tally report --html with this flag)";
    box.appendChild(b);
  }
}

// A report made with --diff shows the Compare tab, which the page hides
// in reports (it needs the server without embedded lists).
if (typeof DATA !== "undefined" && DATA && DATA.compare) {
  const button = document.querySelector('#tabs button[data-tab="compare"]');
  if (button) {
    new MutationObserver(() => { if (button.hidden) button.hidden = false; })
      .observe(button, { attributes: true, attributeFilter: ["hidden"] });
  }
}
