"use strict";
// Transforms (a context menu on any function, a breadcrumb that pops them
// one step at a time, every view asking the server with `tf`) and the
// call trees (top-down and inverted, expanded one level per request).
// Loaded before app.js, whose `state`, `api` and `selectByName` these use.

const TRANSFORMS = [
  ["focus", "Focus on function (only stacks through it)"],
  ["focus-subtree", "Focus on subtree (root stacks at it)"],
  ["ignore", "Drop stacks through function"],
  ["hide", "Merge function into callers"],
  ["collapse-recursion", "Collapse recursion"],
  ["collapse-object", "Collapse library into one frame"],
  ["show", "Show only this function's frames"],
];
const TRANSFORM_KEYS = ["focus", "ignore", "hide", "show", "focus-subtree", "collapse-recursion", "collapse-object"];

function quoteRe(s) { return "^" + s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$"; }

// The `tf` parameter: the transforms in order, each value encoded.
function tfParam() {
  return (state.transforms || []).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
}

// The transforms of a fragment, in order (a key may repeat).
function transformsOf(hash) {
  const out = [];
  for (const pair of hash.replace(/^#/, "").split("&")) {
    const at = pair.indexOf("=");
    if (at < 0) continue;
    try {
      const k = decodeURIComponent(pair.slice(0, at));
      if (TRANSFORM_KEYS.includes(k)) out.push([k, decodeURIComponent(pair.slice(at + 1))]);
    } catch (e) { /* a malformed pair is ignored */ }
  }
  return out;
}

function drawCrumbs() {
  const box = document.querySelector("#crumbs");
  if (!box) return;
  if (DATA) return drawReportCrumbs(box);
  const t = state.transforms || [];
  box.innerHTML = "";
  if (!t.length) return;
  const all = document.createElement("button");
  all.type = "button";
  all.textContent = "Complete profile";
  all.addEventListener("click", () => popTransforms(0));
  box.appendChild(all);
  t.forEach(([k, v], i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "crumb";
    b.dataset.index = String(i);
    b.textContent = `› ${k} ${v}`;
    b.title = i + 1 < t.length ? "back to this step" : "the transforms applied";
    b.addEventListener("click", () => popTransforms(i + 1));
    box.appendChild(b);
  });
}

async function popTransforms(n) {
  state.transforms = (state.transforms || []).slice(0, n);
  await transformsChanged();
}

async function pushTransform(key, value) {
  state.transforms = [...(state.transforms || []), [key, value]];
  await transformsChanged();
}

// Every view asks again, with the new list.
async function transformsChanged() {
  $("#flame-frame").dataset.key = "";
  drawCrumbs();
  record();
  await reloadTable();
  await followSelection();
}

function closeMenu() {
  const m = document.querySelector("#menu");
  if (m) m.remove();
}

// The context menu of a function (a table row, a tree node, a flame
// frame, a call-graph node): select it, or apply one of its transforms.
// `ev` needs only `preventDefault` and the pointer's `clientX`/`clientY`
// in the page (a frame's menu comes as a message from its document).
function openMenu(ev, name, object) {
  ev.preventDefault();
  closeMenu();
  const m = document.createElement("div");
  m.id = "menu";
  m.setAttribute("role", "menu");
  m.dataset.fn = name;
  const item = (label, act) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => { closeMenu(); act().catch((e) => status(e.message, true)); });
    m.appendChild(b);
    return b;
  };
  item("Select function", () => selectByName(name)).dataset.action = "select";
  for (const [key, label] of TRANSFORMS) {
    if (key === "collapse-object" && !object) continue;
    // A report holds the complete profile only: no transforms there.
    if (DATA) continue;
    const text = key === "collapse-object" ? `${label}: ${object.split("/").pop()}` : label;
    item(text, () => pushTransform(key, quoteRe(key === "collapse-object" ? object : name))).dataset.transform = key;
  }
  if (DATA) {
    const p = document.createElement("p");
    p.className = "note";
    p.textContent = "transforms need `tally serve`";
    m.appendChild(p);
  }
  document.body.appendChild(m);
  // Kept inside the window near its edges.
  const x = Math.max(0, Math.min(ev.clientX, window.innerWidth - m.offsetWidth - 2));
  const y = Math.max(0, Math.min(ev.clientY, window.innerHeight - m.offsetHeight - 2));
  m.style.left = `${x}px`;
  m.style.top = `${y}px`;
}

document.addEventListener("click", (e) => { if (!e.target.closest("#menu")) closeMenu(); });
document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeMenu(); });

// ---- call trees ------------------------------------------------------------

function treeParams(kind, at) {
  return kind === "tree" ? { event: state.event, node: at } : { event: state.event, path: at };
}

function treeItem(kind, c, grand, depth, path) {
  const li = document.createElement("li");
  li.setAttribute("role", "treeitem");
  li.tabIndex = -1;
  li.dataset.fn = c.function;
  li.dataset.object = c.object;
  li.dataset.depth = String(depth);
  const at = kind === "tree" ? String(c.node) : [...path, c.id].join(",");
  li.dataset.at = at;
  if (c.more) li.setAttribute("aria-expanded", "false");
  const share = (x) => (grand ? (x * 100 / grand).toFixed(2) : "0.00") + "%";
  const row = document.createElement("div");
  row.className = "tree-row";
  row.style.paddingLeft = `${depth * 14}px`;
  row.innerHTML = c.a != null ? diffTreeCells(c, row) : `<span class="twist">${c.more ? "▸" : "·"}</span>` +
    `<span class="num" title="${c.total.toLocaleString()}">${share(c.total)}</span>` +
    `<span class="num self" title="${c.self.toLocaleString()}">${c.self ? share(c.self) : ""}</span>` +
    `<span class="tree-name" title="${esc(c.function)}${c.file ? " · " + esc(c.file) : ""}">${esc(c.function)}</span>`;
  li.appendChild(row);
  row.addEventListener("click", (e) => {
    if (e.target.classList.contains("twist")) toggleItem(kind, li).catch((x) => status(x.message, true));
    else focusItem(li);
  });
  row.addEventListener("dblclick", () => selectByName(c.function));
  row.addEventListener("contextmenu", (e) => openMenu(e, c.function, c.object));
  return li;
}

async function fillLevel(kind, ul, at, depth, path) {
  const v = await treeLevel(kind, treeParams(kind, at));
  ul.innerHTML = "";
  for (const c of v.children) ul.appendChild(treeItem(kind, c, v.grand_total, depth, path));
  return v;
}

async function toggleItem(kind, li, open) {
  if (li.getAttribute("aria-expanded") == null) return;
  const opened = li.getAttribute("aria-expanded") === "true";
  const want = open == null ? !opened : open;
  if (want === opened) return;
  li.setAttribute("aria-expanded", String(want));
  li.querySelector(".twist").textContent = want ? "▾" : "▸";
  let ul = li.querySelector(":scope > ul");
  if (!want) { if (ul) ul.hidden = true; return; }
  if (!ul) {
    ul = document.createElement("ul");
    ul.setAttribute("role", "group");
    li.appendChild(ul);
    const path = kind === "tree" ? [] : li.dataset.at.split(",").filter((x) => x);
    await fillLevel(kind, ul, li.dataset.at, +li.dataset.depth + 1, path);
  }
  ul.hidden = false;
}

function focusItem(li) {
  for (const x of document.querySelectorAll(".tree li.focused")) x.classList.remove("focused");
  li.classList.add("focused");
  li.focus();
}

function visibleItems(box) {
  return [...box.querySelectorAll("li")].filter((li) => !li.closest("ul[hidden]"));
}

async function treeKey(kind, box, e) {
  const li = box.querySelector("li.focused") || box.querySelector("li");
  if (!li) return;
  const items = visibleItems(box);
  const i = items.indexOf(li);
  if (e.key === "ArrowDown" && i + 1 < items.length) focusItem(items[i + 1]);
  else if (e.key === "ArrowUp" && i > 0) focusItem(items[i - 1]);
  else if (e.key === "ArrowRight") {
    if (li.getAttribute("aria-expanded") === "true") {
      const first = li.querySelector(":scope > ul > li");
      if (first) focusItem(first);
    } else await toggleItem(kind, li, true);
  } else if (e.key === "ArrowLeft") {
    if (li.getAttribute("aria-expanded") === "true") await toggleItem(kind, li, false);
    else {
      const up = li.parentElement.closest("li");
      if (up) focusItem(up);
    }
  } else if (e.key === "Enter") await selectByName(li.dataset.fn);
  else return;
  e.preventDefault();
}

// The tab of a tree: its first level, then levels as they are opened.
async function showTree(kind) {
  const box = $(`#tab-${kind}`);
  const key = `${state.event}|${tfParam()}|${state.range || ""}|${compareNoise()}`;
  if (box.dataset.key === key && box.querySelector("ul")) return;
  box.dataset.key = key;
  box.innerHTML = `<p class="note">${kind === "tree" ? "Top-down: each node a stack, its total the cost of the samples through it." : "Inverted: functions by self cost, each expanded into the callers of that cost."} Arrows move, open and close; Enter selects; right-click transforms.</p>`;
  const ul = document.createElement("ul");
  ul.className = "tree";
  ul.setAttribute("role", "tree");
  ul.tabIndex = 0;
  box.appendChild(ul);
  try {
    const v = await fillLevel(kind, ul, kind === "tree" ? 0 : "", 0, []);
    if (v.estimated) box.firstChild.textContent += " Stacks estimated from call arcs.";
    diffTreeHead(box, v);
  } catch (e) {
    box.innerHTML = `<p class="note">${esc(e.message)}</p>`;
    return;
  }
  ul.addEventListener("keydown", (e) => treeKey(kind, ul, e).catch((x) => status(x.message, true)));
  const first = ul.querySelector("li");
  if (first) focusItem(first);
}

// ---- the comparison of `serve --diff A B`: four lists ---------------------

async function showCompare() {
  const box = $("#tab-compare");
  const by = box.dataset.by || "self";
  const noise = box.dataset.noise || "0.1";
  box.innerHTML = `<p class="note">Each function in one list: regressed or improved by more than the noise (a share of A's total), or found in one profile only. <label>by <select id="cmp-by"><option value="self">self</option><option value="inclusive">inclusive</option></select></label> <label>noise % <input id="cmp-noise" type="number" min="0" step="0.1" value="${esc(noise)}" style="width:5em"></label></p>`;
  box.querySelector("#cmp-by").value = by;
  const again = () => {
    box.dataset.by = box.querySelector("#cmp-by").value;
    box.dataset.noise = box.querySelector("#cmp-noise").value;
    showCompare().catch((e) => status(e.message, true));
  };
  box.querySelector("#cmp-by").addEventListener("change", again);
  box.querySelector("#cmp-noise").addEventListener("change", again);
  const v = await compareLists({ event: state.event, part: state.part, by, noise });
  const lists = [["regressed", "Regressed"], ["improved", "Improved"], ["only_in_b", "Only in B"], ["only_in_a", "Only in A"]];
  for (const [key, title] of lists) {
    const l = v[key];
    const rows = l.entries.map((e) => {
      const m = e[v.by];
      const change = m.change_percent == null ? "" : `${m.change_percent > 0 ? "+" : ""}${m.change_percent.toFixed(1)}%`;
      return `<tr data-fn="${esc(e.function)}"><td class="name" title="${esc(e.function)}${e.file ? " · " + esc(e.file) : ""}">${esc(e.function)}</td>` +
        `<td>${fmt(m.a || 0)}</td><td>${fmt(m.b || 0)}</td><td class="delta ${m.delta > 0 ? "pos" : m.delta < 0 ? "neg" : ""}">${signed(m.delta)}</td><td>${change}</td></tr>`;
    }).join("");
    const more = l.count > l.entries.length ? `<p class="note">${l.count - l.entries.length} more</p>` : "";
    const section = document.createElement("section");
    section.className = "compare-list";
    section.dataset.list = key;
    section.innerHTML = `<h3>${title} (${l.count})</h3><table class="fit"><thead><tr><th class="name">function</th><th>A</th><th>B</th><th>B − A</th><th>change</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
    box.appendChild(section);
  }
  for (const tr of box.querySelectorAll("tr[data-fn]")) tr.addEventListener("click", () => selectByName(tr.dataset.fn));
}
