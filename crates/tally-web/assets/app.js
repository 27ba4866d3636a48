"use strict";
// tally's page: asks the server (or, in a report, the embedded data) for
// what it shows. Views are linked by the selected function.

const ROW_HEIGHT = 22;
const PAGE = 100;
const token = new URLSearchParams(location.search).get("t") || "";
const state = {
  meta: null, event: "", part: "", group: "function", filter: "",
  sort: null, desc: true, count: 0, pages: new Map(), head: null,
  node: null, tab: "butterfly", generation: 0, transforms: [],
};
const $ = (s) => document.querySelector(s);

// ---- deep links: the page's state in the URL's fragment -----------------
// `view=…&fn=…&event=…&part=…&search=…`, values percent-encoded; the
// token stays in the query (`?t=`). Every change of view, selection,
// event or part is a step of the browser's history.

// The fragment's names of the detail views, and the tabs they open.
const VIEWS = { table: "butterfly", callers: "butterfly", compare: "compare", tree: "tree", inverted: "inverted", graph: "graph", flame: "flame", source: "source", asm: "asm", timeline: "timeline" };
const VIEW_OF_TAB = { butterfly: "callers", compare: "compare", tree: "tree", inverted: "inverted", graph: "graph", flame: "flame", source: "source", asm: "asm", timeline: "timeline" };

function parseFragment(hash) {
  const out = {};
  for (const pair of hash.replace(/^#/, "").split("&")) {
    if (!pair) continue;
    const at = pair.indexOf("=");
    const k = at < 0 ? pair : pair.slice(0, at);
    const v = at < 0 ? "" : pair.slice(at + 1);
    try { out[decodeURIComponent(k)] = decodeURIComponent(v); } catch (e) { /* a malformed pair is ignored */ }
  }
  return out;
}

// Whether two fragments say the same, however their values are encoded.
function sameState(a, b) {
  const x = parseFragment(a || ""), y = parseFragment(b || "");
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => x[k] === y[k]) &&
    JSON.stringify(transformsOf(a || "")) === JSON.stringify(transformsOf(b || ""));
}

function fragment() {
  const pairs = [["view", VIEW_OF_TAB[state.tab] || "callers"]];
  if (state.name != null) pairs.push(["fn", state.name]);
  if (state.event) pairs.push(["event", state.event]);
  if (state.part !== "") pairs.push(["part", state.part]);
  if (state.filter) pairs.push(["search", state.filter]);
  if (state.range) pairs.push(["range", state.range]);
  // The transforms, in the order they apply (explore.js).
  for (const t of state.transforms) pairs.push(t);
  return pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
}

// Records the state as a new history entry (`replace`: in place, for
// typing in the search box); nothing while the page follows the fragment.
function record(replace) {
  if (state.applying || !state.meta) return;
  const f = `#${fragment()}`;
  if (sameState(location.hash, f)) return;
  if (replace) history.replaceState(null, "", f);
  else history.pushState(null, "", f);
  state.applied = location.hash;
}

// Shows what the fragment says: on opening, and on back and forward.
async function applyFragment() {
  const f = parseFragment(location.hash);
  const m = state.meta;
  state.applying = true;
  state.applied = location.hash;
  try {
    const event = f.event && m.events.includes(f.event) ? f.event : m.events[0] || "";
    const part = f.part != null && [...$("#part").options].some((o) => o.value === f.part) ? f.part : "";
    const search = f.search || "";
    const tf = transformsOf(location.hash);
    const newTf = JSON.stringify(tf) !== JSON.stringify(state.transforms);
    if (newTf) $("#flame-frame").dataset.key = "";
    state.transforms = tf;
    drawCrumbs();
    const reload = newTf || !state.head || event !== state.event || part !== state.part || search !== state.filter || (f.range || "") !== (state.range || "");
    if ((f.range || "") !== (state.range || "")) $("#flame-frame").dataset.key = "";
    state.range = f.range || "";
    if (event !== state.event) $("#flame-frame").dataset.key = "";
    state.event = event; $("#event").value = event;
    state.part = part; $("#part").value = part;
    state.filter = search; $("#filter").value = search;
    if (reload) await reloadTable();
    state.tab = VIEWS[f.view] || "butterfly";
    if (f.fn != null && f.fn !== "") {
      if (f.fn === state.name && !reload) await showTab(state.tab);
      else if (!(await selectByName(f.fn))) {
        clearSelection();
        status(`no function ${f.fn} in this view`, true);
        await showTab(state.tab);
      }
    } else {
      clearSelection();
      await showTab(state.tab);
    }
  } finally {
    state.applying = false;
  }
}

function clearSelection() {
  state.node = null;
  state.name = null;
  $("#selected").textContent = "";
  for (const tr of document.querySelectorAll("#functions tr.selected")) tr.classList.remove("selected");
}

function status(text, error) {
  const s = $("#status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

// ---- data: the server's API, or the report's embedded replies ----------

async function api(path, params, asText) {
  if (DATA) return local(path, params || {});
  const q = new URLSearchParams({ t: token });
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v != null) q.set(k, v);
  if (rangeOf(path)) q.set("range", rangeOf(path));
  if (state.transforms.length) q.set("tf", tfParam());
  const r = await fetch(`/api/${path}?${q}`);
  if (!r.ok) throw new Error(`${r.status}: ${(await r.text()).trim()}`);
  return asText ? r.text() : r.json();
}

function local(path, p) {
  const view = () => DATA.views[p.event || DATA.meta.events[0]];
  switch (path) {
    case "meta": return DATA.meta;
    case "functions": return localTable(view(), p);
    case "function": {
      const f = view() && view().functions[p.node];
      if (!f) throw new Error("this function is below the report's threshold");
      // Arcs name their function through the report's shared table.
      for (const key of ["parents", "children", "members"]) {
        for (const a of f[key] || []) if (a.name == null && a.node != null) a.name = view().names[a.node];
      }
      return f;
    }
    case "flame": if (DATA.flame) return DATA.flame; break;
    case "graph": if (DATA.graph) return DATA.graph; break;
    case "lines": {
      const src = DATA.sources && DATA.sources[p.node];
      if (src) return src;
      throw new Error("The source of this function is not in this report (its file was not found, or it is below the threshold).");
    }
    case "instructions": {
      if (!DATA.asm) throw new Error("This report holds no assembly (a large program).");
      if (DATA.asm[p.node]) return DATA.asm[p.node];
      throw new Error("The assembly of this function is not in this report (below the threshold).");
    }
  }
  throw new Error(`not in this report (${path})`);
}

// The server's table query over the embedded rows.
function localTable(v, p) {
  let rows = v.rows.slice();
  const group = p.group || "function";
  if (group !== "function") {
    const by = new Map();
    for (const r of rows) {
      if (r.is_cycle) continue;
      const key = group === "file" ? r.file : r.object;
      let g = by.get(key);
      if (!g) {
        g = { node: null, name: key || "???", file: "", object: "", self: 0, inclusive: null,
          calls: 0, events: r.events.map(() => 0), base_self: 0, delta_self: 0 };
        by.set(key, g);
      }
      g.self += r.self; g.calls += r.calls;
      r.events.forEach((x, i) => { g.events[i] += x; });
      if (r.delta_self != null) { g.base_self += r.base_self; g.delta_self += r.delta_self; }
    }
    const total = v.head.total;
    rows = [...by.values()].map((g) => ({ ...g, self_percent: total ? 100 * g.self / total : 0 }));
  }
  if (p.filter) {
    const re = new RegExp(p.filter);
    rows = rows.filter((r) => re.test(r.name) || re.test(r.file));
  }
  const sort = p.sort || (DATA.meta.diff ? "delta" : "self");
  const key = (r) => {
    if (sort === "delta") return Math.abs(r.delta_self || 0);
    if (sort === "delta_inclusive") return Math.abs(r.delta_inclusive || 0);
    if (sort.startsWith("event:")) return r.events[+sort.slice(6)] || 0;
    const x = r[sort];
    return x == null ? -Infinity : x;
  };
  if (sort === "name" || sort === "file") rows.sort((a, b) => (a[sort] < b[sort] ? -1 : a[sort] > b[sort] ? 1 : 0));
  else rows.sort((a, b) => key(a) - key(b) || (a.name < b.name ? 1 : -1));
  const desc = p.desc == null ? sort !== "name" : p.desc === "1";
  if (desc) rows.reverse();
  const offset = +(p.offset || 0), limit = +(p.limit || 200);
  return { ...v.head, count: rows.length, offset, rows: rows.slice(offset, offset + limit) };
}

// ---- formatting ----------------------------------------------------------

function fmt(x, unit) {
  if (x == null) return "";
  if (unit === "seconds") return x.toFixed(2);
  return Math.round(x).toLocaleString("en-US");
}
function pct(x) { return x == null ? "" : `${x.toFixed(2)}%`; }
function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}
function signed(x, unit) { return x == null ? "" : (x > 0 ? "+" : "") + fmt(x, unit); }

// A number in at most `chars` characters: exact when it fits, else
// abbreviated with a unit (113.5 M); `title` then holds the exact value.
function fit(x, unit, chars, sign) {
  const full = sign ? signed(x, unit) : fmt(x, unit);
  if (full.length <= chars || x == null) return { text: full, title: "" };
  const a = Math.abs(x);
  const [d, u] = a >= 1e15 ? [1e15, "P"] : a >= 1e12 ? [1e12, "T"] : a >= 1e9 ? [1e9, "G"] : a >= 1e6 ? [1e6, "M"] : [1e3, "k"];
  const short = `${sign && x > 0 ? "+" : ""}${(x / d).toFixed(1)} ${u}`;
  return { text: short, title: full };
}
function fitCell(x, unit, chars, cls, sign) {
  const f = fit(x, unit, chars, sign);
  return `<td class="num${cls ? " " + cls : ""}"${f.title ? ` title="${esc(f.title)}"` : ""} data-value="${x == null ? "" : x}">${esc(f.text)}</td>`;
}

// The pixels `chars` characters of digits take in the table's font, with
// the cell's padding: numeric columns are sized to their content.
let DIGIT = 0;
function px(chars) {
  if (!DIGIT) {
    const c = document.createElement("canvas").getContext("2d");
    const cs = getComputedStyle(document.body);
    c.font = `${cs.fontSize} ${cs.fontFamily}`;
    DIGIT = Math.max(c.measureText("0123456789").width / 10, c.measureText("%").width / 1.5, 6);
  }
  return Math.ceil(chars * DIGIT + 16);
}
const PCT_CHARS = 8;   // "-100.00%"
const BAR = 44;        // the share's bar and its margin
const SHORT = 9;       // calls and other events: "9,999,999", else abbreviated

// ---- search: the filter's regex, its matches marked ----------------------

let searchCache = { src: null, re: null };
function searchRe() {
  if (!state.filter) return null;
  if (searchCache.src !== state.filter) {
    let re = null;
    try { re = new RegExp(state.filter); } catch (e) { re = null; }
    searchCache = { src: state.filter, re };
  }
  return searchCache.re;
}

// `text` escaped, the search's first match in it marked.
function marked(text) {
  const re = searchRe();
  const m = re && re.exec(text);
  if (!m || !m[0]) return esc(text);
  return esc(text.slice(0, m.index)) + `<mark>${esc(m[0])}</mark>` + esc(text.slice(m.index + m[0].length));
}

// ---- the functions table ---------------------------------------------------

function columns() {
  const h = state.head || { events: [], unit: "", total: 0 };
  // No self or inclusive cost exceeds the total: its width fits them all.
  const wide = Math.max(6, fmt(h.total, h.unit).length + 1);
  const cols = [
    { key: "name", label: state.group === "function" ? "function" : state.group, cls: "name" },
    { key: "self", label: "self", chars: wide },
    { key: "self_percent", label: "self %", sort: "self", pct: true },
  ];
  if (state.group === "function") {
    cols.push({ key: "inclusive", label: "inclusive", chars: wide });
    cols.push({ key: "inclusive_percent", label: "incl. %", sort: "inclusive", pct: true });
  }
  cols.push({ key: "calls", label: "calls", chars: SHORT });
  if (state.meta.diff) {
    cols.push({ key: "base_self", label: "A self", sort: "delta", chars: wide });
    cols.push({ key: "delta_self", label: "Δ self (B−A)", sort: "delta", chars: wide + 1 });
    if (state.group === "function") cols.push({ key: "delta_inclusive", label: "Δ incl.", sort: "delta_inclusive", chars: wide + 1 });
  }
  if (h.events.length > 1) {
    h.events.forEach((e, i) => {
      if (e !== h.event) cols.push({ key: `event:${i}`, label: e, chars: Math.max(SHORT, e.length) });
    });
  }
  for (const c of cols) {
    if (c.pct) c.width = px(PCT_CHARS) + BAR;
    else if (c.chars) c.width = Math.max(px(c.chars), px(c.label.length));
  }
  return cols;
}

function cell(r, c) {
  const unit = state.head.unit;
  if (c.key === "name") {
    const t = r.is_cycle ? `${r.name}` : r.name;
    const extra = r.cycle && !r.is_cycle ? ` <cycle ${r.cycle}>` : "";
    return `<td class="name" title="${esc(r.name + extra + (r.file ? "  " + r.file : ""))}">${marked(t)}${esc(extra)}</td>`;
  }
  if (c.key === "self_percent" || c.key === "inclusive_percent") {
    const v = r[c.key];
    const w = v == null ? 0 : Math.max(0, Math.min(40, v * 0.4));
    return `<td class="num pct"><span class="bar" style="width:${w}px"></span>${pct(v)}</td>`;
  }
  if (c.key.startsWith("delta")) {
    const v = r[c.key];
    return fitCell(v, unit, c.chars, v > 0 ? "pos" : v < 0 ? "neg" : "", true);
  }
  if (c.key.startsWith("event:")) return fitCell(r.events[+c.key.slice(6)], "", c.chars);
  if (c.key === "calls") return fitCell(r.calls || null, "", c.chars);
  return fitCell(r[c.key], unit, c.chars);
}

function colgroup(cols) {
  return `<colgroup>${cols.map((c) => `<col${c.width ? ` style="width:${c.width}px"` : ""}>`).join("")}</colgroup>`;
}

// The tables' least width: the numbers' columns and a name of 24 characters.
function tableWidth(cols) {
  return cols.reduce((w, c) => w + (c.width || 0), 0) + px(24);
}

function drawHead() {
  const cols = columns();
  const sort = state.sort || (state.meta.diff ? "delta" : "self");
  $("#table-head").innerHTML = `<table style="min-width:${tableWidth(cols)}px">${colgroup(cols)}<thead><tr>${cols
    .map((c) => {
      const s = c.sort || c.key;
      const on = s === sort ? ` sorted${state.desc ? "" : " asc"}` : "";
      return `<th class="${c.cls || ""}${on}" data-sort="${s}">${esc(c.label)}</th>`;
    })
    .join("")}</tr></thead></table>`;
  for (const th of document.querySelectorAll("#table-head th")) {
    th.addEventListener("click", () => {
      const s = th.dataset.sort;
      if ((state.sort || (state.meta.diff ? "delta" : "self")) === s) state.desc = !state.desc;
      else { state.sort = s; state.desc = s !== "name"; }
      reloadTable();
    });
  }
}

function tableParams(offset) {
  return {
    event: state.event, part: state.part, group: state.group, filter: state.filter,
    sort: state.sort || "", desc: state.desc ? "1" : "0", offset, limit: PAGE,
  };
}

async function fetchPage(k, gen) {
  if (state.pages.has(k)) return state.pages.get(k);
  const p = api("functions", tableParams(k * PAGE));
  state.pages.set(k, p);
  const t = await p;
  if (gen !== state.generation) return t;
  return t;
}

async function reloadTable() {
  const gen = ++state.generation;
  state.pages = new Map();
  delete document.body.dataset.ready;
  try {
    const t = await fetchPage(0, gen);
    if (gen !== state.generation) return;
    state.head = t;
    state.count = t.count;
    drawHead();
    $("#table-spacer").style.height = `${t.count * ROW_HEIGHT}px`;
    $("#table-scroll").scrollTop = 0;
    await drawRows();
    let trimmed = "";
    const lv = DATA && DATA.views[t.event];
    if (lv && lv.left_out) {
      trimmed = ` · report: ${lv.left_out.toLocaleString("en-US")} functions below ${100 * DATA.threshold}% of the total left out`;
    }
    const tr = DATA && DATA.trimmed;
    if (tr) {
      if (tr.arcs_left_out) trimmed += `; at most ${tr.arcs} callers and callees each`;
      trimmed += `; flame frames under ${tr.flame_min_width.toFixed(1)} px left out; source: each function's lines only`;
      if (tr.asm) trimmed += "; no assembly (large program)";
    }
    const head = `${t.count.toLocaleString("en-US")} rows · ${t.event} · total ${fmt(t.total, t.unit)}${t.unit === "seconds" ? " s" : ""}`;
    if (t.pending) {
      // Self costs come from the sums; inclusive costs, calls and cycles
      // once the cycle-aware analysis is done: then the table is reloaded.
      status(`${head} · inclusive costs, calls and cycles: computing…`);
      api("ready", { event: state.event, part: state.part })
        .then(() => { if (gen === state.generation) reloadTable(); })
        .catch((e) => status(e.message, true));
      return;
    }
    status(`${head}${trimmed}`);
    document.body.dataset.ready = "1";
  } catch (e) {
    status(e.message, true);
  }
}

async function drawRows() {
  const gen = state.generation;
  const box = $("#table-scroll");
  const first = Math.floor(box.scrollTop / ROW_HEIGHT);
  const visible = Math.ceil(box.clientHeight / ROW_HEIGHT) + 2;
  const last = Math.min(state.count, first + visible);
  const want = [];
  for (let k = Math.floor(first / PAGE); k * PAGE < last; k++) want.push(fetchPage(k, gen));
  const pages = await Promise.all(want);
  if (gen !== state.generation) return;
  const rows = [];
  const base = Math.floor(first / PAGE) * PAGE;
  pages.forEach((p) => rows.push(...p.rows));
  const slice = rows.slice(first - base, last - base);
  const cols = columns();
  const table = $("#functions");
  table.style.top = `${first * ROW_HEIGHT}px`;
  table.style.minWidth = `${tableWidth(cols)}px`;
  table.innerHTML = colgroup(cols) + "<tbody>" + slice
    .map((r, i) => `<tr data-row="${first + i}" ${r.node != null ? `data-node="${r.node}"` : ""} class="${r.is_cycle ? "cycle" : ""}${r.node != null && r.node === state.node ? " selected" : ""}">${cols.map((c) => cell(r, c)).join("")}</tr>`)
    .join("") + "</tbody>";
  for (const tr of table.querySelectorAll("tr[data-node]")) {
    tr.addEventListener("click", () => select(+tr.dataset.node));
    const r = slice[+tr.dataset.row - first];
    if (r && !r.is_cycle) tr.addEventListener("contextmenu", (e) => openMenu(e, r.name, r.object));
  }
}

// ---- the selected function -------------------------------------------------

async function select(node) {
  state.node = node;
  state.whole = false;
  for (const tr of document.querySelectorAll("#functions tr")) {
    tr.classList.toggle("selected", tr.dataset.node === String(node));
  }
  await showTab(state.tab);
}

// Node numbers belong to one event's and part's view: after a switch the
// selection follows the function by name, or is cleared when the function
// has no row there.
async function followSelection() {
  const name = state.name;
  state.node = null;
  state.name = null;
  if (name == null || !(await selectByName(name))) {
    $("#selected").textContent = "";
    await showTab(state.tab);
  }
}

async function selectByName(name) {
  const re = "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
  const t = await api("functions", { event: state.event, part: state.part, filter: re, limit: 1 });
  if (t.rows.length && t.rows[0].node != null) {
    await select(t.rows[0].node);
    return true;
  }
  return false;
}

// B − A of an arc or entry, when comparing: a signed cell.
function deltaCell(a, unit) {
  if (!state.meta.diff) return "";
  const v = a.delta;
  return `<td class="delta ${v > 0 ? "pos" : v < 0 ? "neg" : ""}" data-delta="${v == null ? "" : v}">${signed(v, unit)}</td>`;
}

function arcRow(cls, a, unit, total) {
  const calls = a.total_calls != null ? `${a.count}/${a.total_calls}` : `${a.count}`;
  return `<tr class="${cls}" data-node="${a.node == null ? "" : a.node}" data-count="${a.count}" data-measured="${a.measured == null ? "" : a.measured}">
    <td class="name" title="${esc(a.name)}">${esc(a.name)}${a.within_cycle ? " (within cycle)" : ""}${a.only_in_a ? " (only in A)" : ""}</td>
    <td>${fmt(a.self, unit)}</td><td>${fmt(a.descendants, unit)}</td>
    <td>${a.measured == null ? "" : fmt(a.measured, unit)}</td><td>${calls}</td>${deltaCell(a, unit)}</tr>`;
}

// The report keeps the heaviest arcs of an entry: a row says how many went.
function leftOut(n, what, span) {
  return `<tr class="left-out"><td class="note" colspan="${span}">${n.toLocaleString("en-US")} lighter ${what} left out of this report</td></tr>`;
}

async function showButterfly() {
  const box = $("#tab-butterfly");
  if (state.node == null) { box.innerHTML = `<p class="note">Select a function in the table.</p>`; return; }
  const f = await api("function", { event: state.event, part: state.part, node: state.node });
  state.name = f.name;
  const unit = f.unit;
  setSelected(f);
  const calls = f.self_calls ? `${f.called}+${f.self_calls}` : `${f.called}`;
  let html = `<table id="butterfly" class="fit"><thead><tr><th class="name">function</th><th>self</th><th>descendants</th><th>measured inclusive</th><th>called</th>${state.meta.diff ? "<th>Δ (B−A)</th>" : ""}</tr></thead><tbody>`;
  const span = state.meta.diff ? 6 : 5;
  if (f.members) {
    html += `<tr class="primary" data-node="${f.node}" data-measured="${f.measured == null ? "" : f.measured}"><td class="name" title="${esc(f.name)}">${esc(f.name)}</td><td>${fmt(f.self, unit)}</td><td>${fmt(f.descendants, unit)}</td><td>${f.measured == null ? "" : fmt(f.measured, unit)}</td><td>${calls}</td>${deltaCell(f, unit)}</tr>`;
    html += `<tr><td class="section" colspan="${span}">members</td></tr>`;
    for (const m of f.members) {
      html += `<tr class="member" data-node="${m.node == null ? "" : m.node}"><td class="name" title="${esc(m.name)}">${esc(m.name)}</td><td>${fmt(m.self, unit)}</td><td>${fmt(m.descendants, unit)}</td><td></td><td>${m.called}${m.self_calls ? "+" + m.self_calls : ""}</td>${deltaCell(m, unit)}</tr>`;
    }
    if (f.members_left_out) html += leftOut(f.members_left_out, "members", span);
  } else {
    html += `<tr><td class="section" colspan="${span}">callers${f.spontaneous ? " (spontaneous)" : ""}</td></tr>`;
    for (const a of f.parents || []) html += arcRow("caller", a, unit, f.total);
    if (f.parents_left_out) html += leftOut(f.parents_left_out, "callers", span);
    html += `<tr class="primary" data-node="${f.node}" data-called="${f.called}" data-measured="${f.measured == null ? "" : f.measured}"><td class="name" title="${esc(f.name)}">${esc(f.name)}${f.cycle ? ` &lt;cycle ${f.cycle}&gt;` : ""}</td><td>${fmt(f.self, unit)}</td><td>${fmt(f.descendants, unit)}</td><td>${f.measured == null ? "" : fmt(f.measured, unit)}</td><td>${calls}</td>${deltaCell(f, unit)}</tr>`;
    html += `<tr><td class="section" colspan="${span}">callees</td></tr>`;
    for (const a of f.children || []) html += arcRow("callee", a, unit, f.total);
    if (f.children_left_out) html += leftOut(f.children_left_out, "callees", span);
  }
  html += "</tbody></table>";
  box.innerHTML = html;
  for (const tr of box.querySelectorAll("tr.caller, tr.callee, tr.member")) {
    if (tr.dataset.node !== "") tr.addEventListener("click", () => select(+tr.dataset.node));
  }
}

async function showGraph() {
  const box = $("#tab-graph");
  const svg = await api("graph", { event: state.event, part: state.part, node: state.node == null ? "" : state.node }, true);
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  for (const s of doc.querySelectorAll("script")) s.remove();
  box.replaceChildren(document.importNode(doc.documentElement, true));
  const m = state.meta.inputs[state.meta.inputs.length - 1];
  if (m.calls === false) {
    const p = document.createElement("p");
    p.className = "note";
    p.textContent = "This profile records no calls: the graph shows the selected function alone.";
    box.prepend(p);
  }
  for (const g of box.querySelectorAll("g.node")) {
    const t = g.querySelector("title");
    const m = t && /^f(\d+)$/.exec(t.textContent.trim());
    if (!m) continue;
    g.addEventListener("click", () => select(+m[1]));
    g.addEventListener("contextmenu", (e) => {
      e.preventDefault();
      nodeMenu(e, +m[1]).catch((x) => status(x.message, true));
    });
  }
}

// The context menu of a call-graph node: its function's row names it.
async function nodeMenu(e, node) {
  const f = await api("function", { event: state.event, part: state.part, node });
  const r = f.row || f;
  if (r.is_cycle) { status("a cycle has no transforms: right-click one of its members", true); return; }
  openMenu(e, r.name, r.object || "");
}

// The script added to the flame graph's SVG: the frame is a document of
// its own (cross-origin in a report opened from disk), so the page and
// it talk by messages: the page sends the search, the frame marks the
// matching frames (`data-hit`, filled in magenta) and answers how many;
// a click on a frame asks the page to select its function, a right-click
// to open its context menu where the pointer is.
const FLAME_BRIDGE = `<script><![CDATA[
(function () {
  function nameOf(g) {
    var t = g.querySelector(":scope > title");
    if (!t) return null;
    var s = t.textContent, c = s.lastIndexOf(" (");
    return c > 0 ? s.slice(0, c) : s;
  }
  window.addEventListener("message", function (e) {
    var d = e.data || {};
    if (e.source !== parent || d.tally !== "search") return;
    var re = null;
    try { re = d.source ? new RegExp(d.source) : null; } catch (x) { re = null; }
    var hits = 0;
    document.querySelectorAll("g").forEach(function (g) {
      var name = nameOf(g), rect = g.querySelector(":scope > rect");
      if (name == null || !rect) return;
      if (!rect.hasAttribute("data-fill")) rect.setAttribute("data-fill", rect.getAttribute("fill") || "");
      if (re && name !== "all" && re.test(name)) {
        hits++;
        g.setAttribute("data-hit", "1");
        rect.setAttribute("fill", "#e040fb");
      } else {
        g.removeAttribute("data-hit");
        rect.setAttribute("fill", rect.getAttribute("data-fill"));
      }
    });
    parent.postMessage({ tally: "hits", hits: hits, source: d.source }, "*");
  });
  document.addEventListener("click", function (ev) {
    var g = ev.target.closest && ev.target.closest("g");
    var name = g && nameOf(g);
    if (name && name !== "all") parent.postMessage({ tally: "select", name: name }, "*");
  });
  document.addEventListener("contextmenu", function (ev) {
    var g = ev.target.closest && ev.target.closest("g");
    var name = g && nameOf(g);
    if (!name || name === "all") return;
    ev.preventDefault();
    parent.postMessage({ tally: "menu", name: name, x: ev.clientX, y: ev.clientY }, "*");
  });
  parent.postMessage({ tally: "loaded" }, "*");
})();
]]><\/script>`;

async function showFlame() {
  const frame = $("#flame-frame");
  // As wide as its pane, so that no frame is cut off at the right.
  const width = Math.max(320, Math.floor(frame.clientWidth || 1200));
  const key = `${state.event}|${width}`;
  if (frame.dataset.key === key) return;
  let svg = await api("flame", { event: state.event, width }, true);
  frame.dataset.key = key;
  const end = svg.lastIndexOf("</svg>");
  if (end >= 0) svg = svg.slice(0, end) + FLAME_BRIDGE + svg.slice(end);
  delete document.body.dataset.flameHits;
  frame.src = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
}

// Sends the search to the flame graph, which marks its matches.
function markFlame() {
  const w = $("#flame-frame").contentWindow;
  if (w) w.postMessage({ tally: "search", source: state.filter || "" }, "*");
}

function flameMessage(e) {
  if (e.source !== $("#flame-frame").contentWindow) return;
  const d = e.data || {};
  if (d.tally === "loaded") markFlame();
  else if (d.tally === "hits" && d.source === (state.filter || "")) {
    document.body.dataset.flameHits = String(d.hits);
    document.body.dataset.flameSearch = d.source;
  }
  else if (d.tally === "select" && typeof d.name === "string") selectByName(d.name).catch(() => {});
  else if (d.tally === "menu" && typeof d.name === "string") flameMenu(d).catch((x) => status(x.message, true));
}

// A flame frame's context menu, at the pointer's place in the page; the
// frame names its function only, the table its object file.
async function flameMenu(d) {
  const box = $("#flame-frame").getBoundingClientRect();
  const t = await api("functions", { event: state.event, part: state.part, filter: quoteRe(d.name), limit: 1 }).catch(() => null);
  const object = t && t.rows.length ? t.rows[0].object || "" : "";
  openMenu({ preventDefault() {}, clientX: box.left + d.x, clientY: box.top + d.y }, d.name, object);
}

function setSelected(f) {
  const text = `${f.name}${f.index != null ? `  [${f.index}]` : ""}`;
  const el = $("#selected");
  el.textContent = text;
  el.title = f.name;
}

// ---- source and assembly: tables of lines or instructions ----------------

function codeNumber(x) {
  if (x == null) return "";
  return Number.isInteger(x) ? fmt(x, "") : x.toFixed(3);
}

// The fragment that selects `name` in the current view: a callee's link.
function linkTo(name) {
  const saved = state.name;
  state.name = name;
  const f = fragment();
  state.name = saved;
  return `#${f}`;
}

function callText(c) {
  const inside = c.inside ? ` [inside ${esc(c.inside)}: cost counted there]` : "";
  return `<a class="callee" href="${esc(linkTo(c.name))}" data-fn="${esc(c.name)}" title="${esc(c.name + (c.file ? "  " + c.file : ""))}">${esc(c.name)}</a> <span class="count">(${fmt(c.count, "")}×)</span>${inside}`;
}

// Heat: a row's share of the largest cost in the table, as a background.
function heat(x, max) {
  if (!x || !max || x <= 0) return "";
  const share = Math.min(1, x / max);
  return ` style="background:rgba(232,131,58,${(0.08 + 0.6 * share).toFixed(3)})"`;
}

async function showCode(kind) {
  const box = $(`#tab-${kind} .code`);
  const info = $(`#tab-${kind} .code-file`);
  const whole = $("#source-whole");
  if (kind === "source") whole.style.display = "none";
  if (state.node == null) {
    info.textContent = "";
    box.innerHTML = `<p class="note">Select a function in the table.</p>`;
    if (kind === "asm") await showCfg([]);
    return;
  }
  const t = await api(kind === "source" ? "lines" : "instructions",
    { event: state.event, part: state.part, node: state.node, whole: kind === "source" && state.whole ? "1" : "" });
  const events = t.events || [];
  const ev = Math.max(0, events.indexOf(state.event));
  const rows = t.rows || [];
  const max = rows.reduce((m, r) => Math.max(m, (r.costs && r.costs[ev]) || 0), 0);
  const total = rows.reduce((m, r) => m + ((r.costs && r.costs[ev]) || 0), 0);
  const heads = events.map((e, i) => `<th class="num${i === ev ? " primary" : ""}">${esc(e)}</th>`).join("");
  const nums = (costs) => events.map((_, i) => `<td class="num">${costs ? codeNumber(costs[i]) : ""}</td>`).join("");
  const share = (r) => {
    const x = r.costs && r.costs[ev];
    return x && total ? ` title="${(100 * x / total).toFixed(2)}% of ${esc(events[ev])} in this view"` : "";
  };
  let html = "";
  if (t.note) html += `<p class="note">${esc(t.note)}</p>`;
  if (kind === "source") {
    info.textContent = t.path ? `${t.path} · lines ${t.first}–${t.last} of ${t.lines_in_file}` : t.file || "";
    if (rows.length) {
      html += `<table class="code-table" id="source-table"><thead><tr><th class="num">line</th>${heads}<th class="text">source</th></tr></thead><tbody>`;
      for (const r of rows) {
        html += `<tr class="line" data-line="${r.line}"${heat(r.costs && r.costs[ev], max)}${share(r)}><td class="num lineno">${r.line}</td>${nums(r.costs)}<td class="text">${esc(r.text)}</td></tr>`;
        for (const c of r.calls || []) {
          html += `<tr class="call" data-line="${r.line}" data-callee="${esc(c.name)}"><td class="num"></td>${nums(c.costs)}<td class="text"><span class="arrow">→</span> ${callText(c)}</td></tr>`;
        }
      }
      html += "</tbody></table>";
    }
    whole.style.display = !DATA && rows.length && (state.whole || !t.whole) ? "" : "none";
    whole.textContent = state.whole ? "Show the function only" : "Show the whole file";
  } else {
    info.textContent = `${t.function}${t.symbol && t.symbol !== t.function ? ` (symbol ${t.symbol})` : ""}${t.object ? ` · ${t.object}` : ""}`;
    if (rows.length) {
      html += `<table class="code-table" id="asm-table"><thead><tr><th class="num">address</th>${heads}<th class="gutter"></th><th class="text">instruction</th></tr></thead><tbody>`;
      rows.forEach((r, i) => {
        let extra = "";
        for (const c of r.calls || []) extra += ` <span class="arrow">→</span> ${callText(c)}`;
        for (const j of r.jumps || []) {
          const where = j.function ? ` in ${esc(j.function)}` : "";
          extra += j.conditional
            ? ` <span class="jump">jcnd ${fmt(j.taken, "")}/${fmt(j.executed, "")} taken to 0x${j.target.toString(16)}${where}</span>`
            : ` <span class="jump">jump ${fmt(j.taken, "")}× to 0x${j.target.toString(16)}${where}</span>`;
        }
        html += `<tr class="ins" data-index="${i}" data-address="${r.address}"${heat(r.costs && r.costs[ev], max)}${share(r)}><td class="num">0x${r.address.toString(16)}</td>${nums(r.costs)}<td class="gutter"></td><td class="text">${esc(r.text)}${extra}</td></tr>`;
      });
      html += "</tbody></table>";
    }
  }
  box.innerHTML = html;
  for (const a of box.querySelectorAll("a.callee")) {
    a.addEventListener("click", (e) => { e.preventDefault(); selectByName(a.dataset.fn).catch((x) => status(x.message, true)); });
  }
  if (kind === "asm") {
    drawJumps(box, rows);
    await showCfg(rows);
  }
  const focus = kind === "source" && t.focus != null ? box.querySelector(`tr.line[data-line="${t.focus}"]`) : null;
  if (focus) box.parentElement.scrollTop = Math.max(0, focus.offsetTop - 40);
  else box.parentElement.scrollTop = 0;
}

// The jumps between instructions of the function as arrows in the
// gutter: one lane per jump, the shortest nearest the instructions;
// backward jumps (loops) red, forward blue, the more taken the darker.
function drawJumps(box, rows) {
  const table = box.querySelector("#asm-table");
  if (!table) return;
  const at = new Map(rows.map((r, i) => [r.address, i]));
  const jumps = [];
  rows.forEach((r, i) => {
    for (const j of r.jumps || []) {
      if (j.function == null && at.has(j.target) && at.get(j.target) !== i) jumps.push({ from: i, to: at.get(j.target), j });
    }
  });
  if (!jumps.length) return;
  const LANE = 7, LANES = 10;
  jumps.sort((a, b) => Math.abs(a.to - a.from) - Math.abs(b.to - b.from));
  const used = [];
  for (const x of jumps) {
    const lo = Math.min(x.from, x.to), hi = Math.max(x.from, x.to);
    let lane = 0;
    while (lane < LANES - 1 && (used[lane] || []).some(([a, b]) => a <= hi && lo <= b)) lane++;
    (used[lane] = used[lane] || []).push([lo, hi]);
    x.lane = lane;
  }
  const lanes = Math.min(LANES, used.length);
  const width = lanes * LANE + 14;
  for (const td of table.querySelectorAll(".gutter")) td.style.width = td.style.minWidth = `${width}px`;
  const trs = table.querySelectorAll("tr.ins");
  const gutter = trs[0].querySelector("td.gutter");
  const y = (i) => trs[i].offsetTop + trs[i].offsetHeight / 2;
  const maxTaken = Math.max(1, ...jumps.map((x) => x.j.taken));
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "jumps");
  svg.setAttribute("width", width);
  svg.setAttribute("height", table.offsetHeight);
  svg.style.left = `${table.offsetLeft + gutter.offsetLeft}px`;
  svg.style.top = `${table.offsetTop}px`;
  svg.innerHTML = `<defs><marker id="head-b" viewBox="0 0 6 6" refX="5" refY="3" markerWidth="5" markerHeight="5" orient="auto"><path d="M0,0L6,3L0,6z" fill="#c0392b"/></marker><marker id="head-f" viewBox="0 0 6 6" refX="5" refY="3" markerWidth="5" markerHeight="5" orient="auto"><path d="M0,0L6,3L0,6z" fill="#2d6cdf"/></marker></defs>`;
  for (const x of jumps) {
    const back = x.to < x.from;
    const lx = width - 6 - x.lane * LANE - LANE;
    const p = document.createElementNS(ns, "path");
    p.setAttribute("d", `M${width - 2},${y(x.from)}H${lx}V${y(x.to)}H${width - 2}`);
    p.setAttribute("fill", "none");
    p.setAttribute("stroke", back ? "#c0392b" : "#2d6cdf");
    p.setAttribute("stroke-width", (1 + 1.5 * x.j.taken / maxTaken).toFixed(2));
    p.setAttribute("stroke-opacity", (0.35 + 0.65 * x.j.taken / maxTaken).toFixed(2));
    if (x.j.conditional) p.setAttribute("stroke-dasharray", "3,2");
    p.setAttribute("marker-end", `url(#head-${back ? "b" : "f"})`);
    p.setAttribute("data-from", rows[x.from].address);
    p.setAttribute("data-to", rows[x.to].address);
    const title = document.createElementNS(ns, "title");
    title.textContent = `${x.j.conditional ? "jcnd" : "jump"}: taken ${fmt(x.j.taken, "")}${x.j.conditional ? ` of ${fmt(x.j.executed, "")}` : ""}`;
    p.appendChild(title);
    svg.appendChild(p);
  }
  box.appendChild(svg);
}

// The control-flow graph of the function's basic blocks, above its
// instructions when turned on: Graphviz's picture from the server (the
// blocks split at jump targets and after jumps, edges with the counts of
// Callgrind's jump records); a click on a block scrolls the table to it.
async function showCfg(rows) {
  const tab = $("#tab-asm");
  let toggle = $("#cfg-toggle");
  if (!toggle) {
    toggle = document.createElement("button");
    toggle.id = "cfg-toggle";
    toggle.type = "button";
    toggle.addEventListener("click", () => {
      state.cfg = !state.cfg;
      showCfg(state.asmRows || []).catch((e) => status(e.message, true));
    });
    tab.querySelector(".code-bar").appendChild(toggle);
    const panel = document.createElement("div");
    panel.id = "cfg";
    tab.insertBefore(panel, tab.querySelector(".code"));
  }
  state.asmRows = rows;
  const panel = $("#cfg");
  toggle.textContent = state.cfg ? "Hide the control-flow graph" : "Control-flow graph";
  toggle.setAttribute("aria-pressed", String(!!state.cfg));
  toggle.style.display = rows.length ? "" : "none";
  panel.hidden = !state.cfg || !rows.length;
  if (panel.hidden) {
    panel.innerHTML = "";
    panel.dataset.key = "";
    return;
  }
  const key = `${state.node}|${state.event}|${state.part}|${tfParam()}|${state.range || ""}`;
  if (panel.dataset.key === key) return;
  panel.dataset.key = key;
  delete panel.dataset.ready;
  panel.innerHTML = `<p class="note">laying out the basic blocks…</p>`;
  let v;
  try {
    if (DATA) throw new Error("The control-flow graph needs `tally serve`: a report holds the instruction table only.");
    v = await api("cfg", { event: state.event, part: state.part, node: state.node });
  } catch (e) {
    v = { blocks: [], edges: [], note: e.message };
  }
  if (panel.dataset.key !== key) return;
  const back = v.edges.filter((e) => e.to != null && e.to <= e.from && (e.kind === "jump" || e.kind === "taken")).length;
  let html = `<p class="note cfg-head">${v.blocks.length} basic blocks, ${v.edges.length} edges${back ? `, ${back} back (loops, red)` : ""}; heat by ${esc(v.event || state.event)}; dashed: conditional jumps taken and not taken. Click a block to see its instructions.</p>`;
  if (v.note) html += `<p class="note cfg-note">${esc(v.note)}</p>`;
  panel.innerHTML = html;
  if (v.svg) {
    const doc = new DOMParser().parseFromString(v.svg, "image/svg+xml");
    for (const x of doc.querySelectorAll("script")) x.remove();
    panel.appendChild(document.importNode(doc.documentElement, true));
    for (const g of panel.querySelectorAll("g.node")) {
      const t = g.querySelector("title");
      const m = t && /^b(\d+)$/.exec(t.textContent.trim());
      const b = m && v.blocks[+m[1]];
      if (!b) continue;
      g.dataset.start = b.start;
      g.addEventListener("click", () => showBlock(g, b));
    }
  }
  panel.dataset.ready = "1";
}

// Marks a block's instructions and scrolls the table to its first.
function showBlock(g, b) {
  for (const x of document.querySelectorAll("#cfg g.node.picked")) x.classList.remove("picked");
  g.classList.add("picked");
  let first = null;
  for (const tr of document.querySelectorAll("#asm-table tr.ins")) {
    const a = +tr.dataset.address;
    const inside = a >= b.start && a <= b.end;
    tr.classList.toggle("in-block", inside);
    if (inside && !first) first = tr;
  }
  if (first) {
    const code = $("#tab-asm .code");
    const table = $("#asm-table");
    const head = table.querySelector("thead");
    code.scrollTop = Math.max(0, table.offsetTop + first.offsetTop - (head ? head.offsetHeight : 0) - 4);
  }
}

async function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === tab);
  for (const d of document.querySelectorAll(".tab")) d.classList.toggle("active", d.id === `tab-${tab}`);
  try {
    if (state.node != null && tab !== "butterfly") {
      const f = await api("function", { event: state.event, part: state.part, node: state.node }).catch(() => null);
      if (f) { state.name = f.name; setSelected(f); }
    }
    if (tab === "butterfly") await showButterfly();
    else if (tab === "graph") await showGraph();
    else if (tab === "flame") await showFlame();
    else if (tab === "tree" || tab === "inverted") await showTree(tab);
    else if (tab === "compare") await showCompare();
    else if (tab === "timeline") await showTimeline();
    else await showCode(tab);
    document.body.dataset.tab = tab;
    record();
  } catch (e) {
    status(e.message, true);
  }
}

// ---- start -------------------------------------------------------------------

async function start() {
  try {
    state.meta = await api("meta");
  } catch (e) {
    status(e.message, true);
    return;
  }
  const m = state.meta;
  initTimeline();
  // The comparison's four lists need the server and two profiles.
  $('#tabs button[data-tab="compare"]').hidden = !m.diff || !!DATA;
  $("#inputs").textContent = m.inputs.map((i) => i.name).join(m.diff ? " → " : " + ") +
    (m.inputs.some((i) => i.estimated) ? " (stacks estimated)" : "");
  $("#event").innerHTML = m.events.map((e) => `<option>${esc(e)}</option>`).join("");
  state.event = m.events[0] || "";
  const parts = m.inputs[m.inputs.length - 1].parts;
  if (parts.length > 1 && !DATA) {
    $("#part").innerHTML += parts.map((p) => `<option value="${p.index}">${esc(p.label)}</option>`).join("");
  } else {
    $("#part-label").style.display = "none";
  }
  $("#event").addEventListener("change", () => { state.event = $("#event").value; $("#flame-frame").dataset.key = ""; reloadTable().then(followSelection); });
  $("#part").addEventListener("change", () => { state.part = $("#part").value; reloadTable().then(followSelection); });
  $("#group").addEventListener("change", () => { state.group = $("#group").value; state.sort = null; state.desc = true; reloadTable(); });
  let timer = null;
  $("#filter").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.filter = $("#filter").value;
      reloadTable();
      markFlame();
      record(true);
    }, 200);
  });
  let pending = false;
  $("#table-scroll").addEventListener("scroll", () => {
    $("#table-head").scrollLeft = $("#table-scroll").scrollLeft;
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; drawRows(); });
  });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("#source-whole").addEventListener("click", () => { state.whole = !state.whole; showTab("source"); });
  // Back and forward (and a fragment typed or followed) show their state.
  const follow = () => {
    // popstate and hashchange may both come for one step.
    if (location.hash === state.applied || sameState(location.hash, fragment())) return;
    applyFragment().catch((e) => status(e.message, true));
  };
  window.addEventListener("popstate", follow);
  window.addEventListener("message", flameMessage);
  window.addEventListener("hashchange", follow);
  await applyFragment();
  if (!sameState(location.hash, fragment())) history.replaceState(null, "", `#${fragment()}`);
  state.applied = location.hash;
}

start();
