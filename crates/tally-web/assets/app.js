"use strict";
// tally's page: asks the server (or, in a report, the embedded data) for
// what it shows. Views are linked by the selected function.

const ROW_HEIGHT = 22;
const PAGE = 100;
const token = new URLSearchParams(location.search).get("t") || "";
const state = {
  meta: null, event: "", part: "", group: "function", filter: "",
  sort: null, desc: true, count: 0, pages: new Map(), head: null,
  node: null, tab: "butterfly", generation: 0,
};
const $ = (s) => document.querySelector(s);

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
    case "source": {
      const src = DATA.sources && (DATA.sources[p.node] || DATA.sources.all);
      if (src) return src;
      throw new Error(p.node == null ? "Select a function: the report holds each function's own source lines."
        : "The source of this function is not in this report (its file was not found, or is below the threshold).");
    }
    case "asm": if (DATA.asm) return DATA.asm; break;
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

// ---- the functions table ---------------------------------------------------

function columns() {
  const h = state.head || { events: [], unit: "" };
  const cols = [
    { key: "name", label: state.group === "function" ? "function" : state.group, cls: "name", width: "34%" },
    { key: "self", label: "self", width: "11%" },
    { key: "self_percent", label: "self %", sort: "self", width: "8%" },
  ];
  if (state.group === "function") {
    cols.push({ key: "inclusive", label: "inclusive", width: "11%" });
    cols.push({ key: "inclusive_percent", label: "incl. %", sort: "inclusive", width: "8%" });
  }
  cols.push({ key: "calls", label: "calls", width: "9%" });
  if (state.meta.diff) {
    cols.push({ key: "base_self", label: "A self", sort: "delta", width: "10%" });
    cols.push({ key: "delta_self", label: "Δ self (B−A)", sort: "delta", width: "10%" });
    if (state.group === "function") cols.push({ key: "delta_inclusive", label: "Δ incl.", sort: "delta_inclusive", width: "10%" });
  }
  if (h.events.length > 1) {
    h.events.forEach((e, i) => {
      if (e !== h.event) cols.push({ key: `event:${i}`, label: e, width: "8%" });
    });
  }
  return cols;
}

function cell(r, c) {
  const unit = state.head.unit;
  if (c.key === "name") {
    const t = r.is_cycle ? `${r.name}` : r.name;
    const extra = r.cycle && !r.is_cycle ? ` <cycle ${r.cycle}>` : "";
    return `<td class="name" title="${esc(r.name + (r.file ? "  " + r.file : ""))}">${esc(t + extra)}</td>`;
  }
  if (c.key === "self_percent" || c.key === "inclusive_percent") {
    const v = r[c.key];
    const w = v == null ? 0 : Math.max(0, Math.min(40, v * 0.4));
    return `<td><span class="bar" style="width:${w}px"></span>${pct(v)}</td>`;
  }
  if (c.key.startsWith("delta")) {
    const v = r[c.key];
    return `<td class="${v > 0 ? "pos" : v < 0 ? "neg" : ""}">${signed(v, unit)}</td>`;
  }
  if (c.key.startsWith("event:")) return `<td>${fmt(r.events[+c.key.slice(6)], "")}</td>`;
  if (c.key === "calls") return `<td>${r.calls ? r.calls.toLocaleString("en-US") : ""}</td>`;
  return `<td data-value="${r[c.key] == null ? "" : r[c.key]}">${fmt(r[c.key], unit)}</td>`;
}

function colgroup(cols) {
  return `<colgroup>${cols.map((c) => `<col style="width:${c.width}">`).join("")}</colgroup>`;
}

function drawHead() {
  const cols = columns();
  const sort = state.sort || (state.meta.diff ? "delta" : "self");
  $("#table-head").innerHTML = `<table>${colgroup(cols)}<thead><tr>${cols
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
  table.innerHTML = colgroup(cols) + "<tbody>" + slice
    .map((r, i) => `<tr data-row="${first + i}" ${r.node != null ? `data-node="${r.node}"` : ""} class="${r.is_cycle ? "cycle" : ""}${r.node != null && r.node === state.node ? " selected" : ""}">${cols.map((c) => cell(r, c)).join("")}</tr>`)
    .join("") + "</tbody>";
  for (const tr of table.querySelectorAll("tr[data-node]")) {
    tr.addEventListener("click", () => select(+tr.dataset.node));
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
    <td class="name">${esc(a.name)}${a.within_cycle ? " (within cycle)" : ""}${a.only_in_a ? " (only in A)" : ""}</td>
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
  $("#selected").textContent = `${f.name}${f.index != null ? `  [${f.index}]` : ""}`;
  const calls = f.self_calls ? `${f.called}+${f.self_calls}` : `${f.called}`;
  let html = `<table id="butterfly"><thead><tr><th class="name">function</th><th>self</th><th>descendants</th><th>measured inclusive</th><th>called</th>${state.meta.diff ? "<th>Δ (B−A)</th>" : ""}</tr></thead><tbody>`;
  const span = state.meta.diff ? 6 : 5;
  if (f.members) {
    html += `<tr class="primary" data-node="${f.node}" data-measured="${f.measured == null ? "" : f.measured}"><td class="name">${esc(f.name)}</td><td>${fmt(f.self, unit)}</td><td>${fmt(f.descendants, unit)}</td><td>${f.measured == null ? "" : fmt(f.measured, unit)}</td><td>${calls}</td>${deltaCell(f, unit)}</tr>`;
    html += `<tr><td class="section" colspan="${span}">members</td></tr>`;
    for (const m of f.members) {
      html += `<tr class="member" data-node="${m.node == null ? "" : m.node}"><td class="name">${esc(m.name)}</td><td>${fmt(m.self, unit)}</td><td>${fmt(m.descendants, unit)}</td><td></td><td>${m.called}${m.self_calls ? "+" + m.self_calls : ""}</td>${deltaCell(m, unit)}</tr>`;
    }
    if (f.members_left_out) html += leftOut(f.members_left_out, "members", span);
  } else {
    html += `<tr><td class="section" colspan="${span}">callers${f.spontaneous ? " (spontaneous)" : ""}</td></tr>`;
    for (const a of f.parents || []) html += arcRow("caller", a, unit, f.total);
    if (f.parents_left_out) html += leftOut(f.parents_left_out, "callers", span);
    html += `<tr class="primary" data-node="${f.node}" data-called="${f.called}" data-measured="${f.measured == null ? "" : f.measured}"><td class="name">${esc(f.name)}${f.cycle ? ` &lt;cycle ${f.cycle}&gt;` : ""}</td><td>${fmt(f.self, unit)}</td><td>${fmt(f.descendants, unit)}</td><td>${f.measured == null ? "" : fmt(f.measured, unit)}</td><td>${calls}</td>${deltaCell(f, unit)}</tr>`;
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
    if (m) g.addEventListener("click", () => select(+m[1]));
  }
}

async function showFlame() {
  const frame = $("#flame-frame");
  const key = `${state.event}`;
  if (frame.dataset.key === key) return;
  const svg = await api("flame", { event: state.event }, true);
  frame.dataset.key = key;
  const url = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
  frame.onload = () => {
    let doc = null;
    try { doc = frame.contentDocument; } catch (e) { doc = null; }
    if (!doc) return;
    doc.addEventListener("click", (ev) => {
      const g = ev.target.closest && ev.target.closest("g");
      const t = g && g.querySelector("title");
      if (!t) return;
      const text = t.textContent;
      const cut = text.lastIndexOf(" (");
      const name = cut > 0 ? text.slice(0, cut) : text;
      if (name !== "all") selectByName(name).catch(() => {});
    });
  };
  frame.src = url;
}

async function showText(kind) {
  const pre = $(`#tab-${kind} pre`);
  const whole = kind === "source" && state.whole ? "1" : "";
  const text = await api(kind, { event: state.event, part: state.part, node: state.node == null ? "" : state.node, whole }, true);
  pre.textContent = text;
  if (kind === "source") {
    const b = $("#source-whole");
    const cut = /^-- lines \d+ to \d+ only/m.test(text);
    b.style.display = (cut || state.whole) && !DATA ? "" : "none";
    b.textContent = state.whole ? "Show the function only" : "Show the whole file";
  }
  const name = state.node == null ? null : ($("#selected").textContent || "").split("  [")[0];
  if (name) {
    const at = text.indexOf(name);
    if (at >= 0) {
      pre.innerHTML = esc(text.slice(0, at)) + `<mark id="${kind}-mark">${esc(name)}</mark>` + esc(text.slice(at + name.length));
      const m = document.getElementById(`${kind}-mark`);
      if (m) m.scrollIntoView({ block: "center" });
    }
  }
}

async function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === tab);
  for (const d of document.querySelectorAll(".tab")) d.classList.toggle("active", d.id === `tab-${tab}`);
  try {
    if (state.node != null && tab !== "butterfly") {
      const f = await api("function", { event: state.event, part: state.part, node: state.node }).catch(() => null);
      if (f) { state.name = f.name; $("#selected").textContent = `${f.name}${f.index != null ? `  [${f.index}]` : ""}`; }
    }
    if (tab === "butterfly") await showButterfly();
    else if (tab === "graph") await showGraph();
    else if (tab === "flame") await showFlame();
    else await showText(tab);
    document.body.dataset.tab = tab;
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
    timer = setTimeout(() => { state.filter = $("#filter").value; reloadTable(); }, 200);
  });
  let pending = false;
  $("#table-scroll").addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; drawRows(); });
  });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("#source-whole").addEventListener("click", () => { state.whole = !state.whole; showTab("source"); });
  await reloadTable();
  await showTab("butterfly");
}

start();
