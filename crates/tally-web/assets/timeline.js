"use strict";
// The timeline of a recording whose samples have times: a track per thread
// (its cost in the chosen event over time), the stack chart of one thread
// under them (time × depth, Firefox Profiler's), and a range selection:
// dragging on a track chooses a time range that every other view is cut
// to (`range=START-END` in nanoseconds from the first sample, sent with
// every request and kept in the URL's fragment). A profile without times
// says so, and its tab stays hidden.

const TL_TRACK_HEIGHT = 34;
const TL_BOX_HEIGHT = 16;
const TL_LABEL = 150;
const tl = { data: null, event: null, thread: null, chart: null, loading: null };

const TL_CSS = `
#tab-timeline { padding: 6px 8px; }
#tab-timeline .tl-bar { display: flex; gap: 10px; align-items: center; margin-bottom: 6px; }
#tab-timeline .tl-track { display: flex; align-items: center; height: ${TL_TRACK_HEIGHT}px; border-bottom: 1px solid #e4e8ec; cursor: crosshair; }
#tab-timeline .tl-track.chosen .tl-name { font-weight: bold; }
#tab-timeline .tl-name { width: ${TL_LABEL}px; flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-size: 12px; }
#tab-timeline canvas { display: block; }
#tab-timeline .tl-chart { margin-top: 8px; overflow: auto; max-height: 60vh; border-top: 1px solid #ccd; }
#tab-timeline .tl-tip { position: fixed; pointer-events: none; background: #fffbe6; border: 1px solid #cca; padding: 2px 5px; font-size: 12px; display: none; z-index: 5; }
`;

// The request parameter `range` for `path`: every view but the timeline's
// own, which always shows the whole recording.
function rangeOf(path) {
  if (!state.range || path === "timeline" || path === "stackchart" || path === "meta") return "";
  return state.range;
}

function tlTime(ns) {
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(3)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${ns} ns`;
}

// Asks for the timeline once the page knows its profile, and shows the
// tab when the samples have times.
async function initTimeline() {
  const style = document.createElement("style");
  style.textContent = TL_CSS;
  document.head.appendChild(style);
  const button = document.querySelector('#tabs button[data-tab="timeline"]');
  try {
    await loadTimeline();
  } catch (e) {
    tl.data = { timed: false, note: e.message };
  }
  if (button) button.hidden = !tl.data.timed;
  document.body.dataset.timed = String(!!tl.data.timed);
}

async function loadTimeline() {
  const event = state.event || "";
  if (tl.data && tl.event === event) return tl.data;
  if (!tl.loading || tl.loadingEvent !== event) {
    tl.loadingEvent = event;
    // A derived event has no costs per sample: the timeline then shows
    // the first recorded one.
    tl.loading = api("timeline", { event }).catch(() => api("timeline", {}));
  }
  tl.data = await tl.loading;
  tl.event = event;
  if (tl.data.timed && (tl.thread == null || tl.thread >= tl.data.threads.length)) {
    // The busiest thread's chart first.
    tl.thread = tl.data.threads.reduce((b, t) => (t.total > tl.data.threads[b].total ? t.index : b), 0);
  }
  return tl.data;
}

function tlRange() {
  const m = /^(\d+)-(\d+)$/.exec(state.range || "");
  return m ? [Number(m[1]), Number(m[2])] : null;
}

// Sets the range every view is cut to ("" for the whole recording).
function setRange(range) {
  if ((state.range || "") === range) return;
  state.range = range;
  $("#flame-frame").dataset.key = "";
  status(range ? `range ${rangeText()}` : "");
  reloadTable().then(followSelection).catch((e) => status(e.message, true));
}

function rangeText() {
  const r = tlRange();
  return r ? `${tlTime(r[0])} – ${tlTime(r[1])} (${tlTime(r[1] - r[0])})` : "the whole recording";
}

async function showTimeline() {
  const box = $("#tab-timeline");
  const d = await loadTimeline();
  if (!d.timed) {
    box.innerHTML = `<p class="note">${esc(d.note || "This profile has no sample times.")}</p>`;
    return;
  }
  const width = Math.max(200, box.clientWidth - TL_LABEL - 24);
  box.innerHTML = `<div class="tl-bar"><span>${d.samples} samples of ${esc(d.event || "")} over ${tlTime(d.end)}; drag on a track to choose a range.</span>
    <span class="tl-range"></span><button type="button" class="tl-clear">Whole recording</button></div>
    <div class="tl-tracks"></div><div class="tl-chart"><canvas></canvas></div><div class="tl-tip"></div>`;
  box.querySelector(".tl-range").textContent = `Range: ${rangeText()}`;
  box.querySelector(".tl-clear").addEventListener("click", () => setRange(""));
  const tracks = box.querySelector(".tl-tracks");
  const max = Math.max(1, ...d.threads.flatMap((t) => t.buckets));
  const x = (ns) => (ns / d.end) * width;
  for (const t of d.threads) {
    const row = document.createElement("div");
    row.className = `tl-track${t.index === tl.thread ? " chosen" : ""}`;
    row.dataset.thread = t.index;
    const label = `${t.name || "?"} (${t.tid})`;
    row.innerHTML = `<span class="tl-name" title="${esc(`${label}, pid ${t.pid}: ${t.samples} samples`)}">${esc(label)}</span>`;
    const c = document.createElement("canvas");
    c.width = width;
    c.height = TL_TRACK_HEIGHT - 4;
    row.appendChild(c);
    tracks.appendChild(row);
    drawTrack(c, t, max, x);
    dragOn(c, t.index, width, d.end);
  }
  document.body.dataset.timelineTracks = String(d.threads.length);
  await drawChart(box, width, d);
}

function drawTrack(c, t, max, x) {
  const g = c.getContext("2d");
  const n = t.buckets.length;
  const w = c.width / n;
  g.fillStyle = "#3d7cc9";
  t.buckets.forEach((v, i) => {
    if (!v) return;
    const h = Math.max(1, (v / max) * c.height);
    g.fillRect(i * w, c.height - h, Math.max(1, w), h);
  });
  const r = tlRange();
  if (r) {
    g.fillStyle = "rgba(232,131,58,0.25)";
    g.fillRect(x(r[0]), 0, Math.max(1, x(r[1]) - x(r[0])), c.height);
  }
}

// Dragging chooses a range; a click (no drag) chooses the thread whose
// stack chart is shown.
function dragOn(c, thread, width, end) {
  c.addEventListener("mousedown", (e) => {
    e.preventDefault();
    const left = c.getBoundingClientRect().left;
    const from = Math.max(0, Math.min(width, e.clientX - left));
    const g = c.getContext("2d");
    const saved = g.getImageData(0, 0, c.width, c.height);
    let to = from;
    const move = (m) => {
      to = Math.max(0, Math.min(width, m.clientX - left));
      g.putImageData(saved, 0, 0);
      g.fillStyle = "rgba(232,131,58,0.35)";
      g.fillRect(Math.min(from, to), 0, Math.abs(to - from), c.height);
    };
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      if (Math.abs(to - from) < 3) {
        tl.thread = thread;
        showTimeline().catch((x) => status(x.message, true));
        return;
      }
      const a = Math.floor((Math.min(from, to) / width) * end);
      const b = Math.max(a + 1, Math.ceil((Math.max(from, to) / width) * end));
      setRange(`${a}-${b}`);
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  });
}

// The stack chart of the chosen thread over the range (or the whole
// recording): one box per function and depth while consecutive samples
// keep it.
async function drawChart(box, width, d) {
  const r = tlRange() || [0, d.end];
  const chart = await api("stackchart", { thread: tl.thread, from: r[0], to: r[1] });
  const depth = chart.boxes.reduce((m, b) => Math.max(m, b.depth + 1), 0);
  const c = box.querySelector(".tl-chart canvas");
  c.width = width + TL_LABEL;
  c.height = Math.max(20, depth * TL_BOX_HEIGHT + 4);
  const g = c.getContext("2d");
  const span = Math.max(1, r[1] - r[0]);
  const x = (ns) => TL_LABEL + ((ns - r[0]) / span) * width;
  const t = d.threads[tl.thread];
  g.font = "11px sans-serif";
  g.fillStyle = "#333";
  g.fillText(`${t.name || "?"} (${t.tid})`, 2, 12);
  for (const b of chart.boxes) {
    const x0 = x(b.start), w = Math.max(1, x(b.end) - x0), y = b.depth * TL_BOX_HEIGHT;
    let hash = 0;
    for (let i = 0; i < b.name.length; i++) hash = (hash * 31 + b.name.charCodeAt(i)) | 0;
    g.fillStyle = `hsl(${20 + (Math.abs(hash) % 40)}, 80%, ${62 + (Math.abs(hash >> 8) % 14)}%)`;
    g.fillRect(x0, y, w, TL_BOX_HEIGHT - 1);
    if (w > 30) {
      g.save();
      g.beginPath();
      g.rect(x0, y, w - 2, TL_BOX_HEIGHT);
      g.clip();
      g.fillStyle = "#222";
      g.fillText(b.name, x0 + 2, y + 12);
      g.restore();
    }
  }
  tl.chart = { boxes: chart.boxes, x };
  document.body.dataset.stackBoxes = String(chart.boxes.length);
  const tip = box.querySelector(".tl-tip");
  c.onmousemove = (e) => {
    const rect = c.getBoundingClientRect();
    const px = e.clientX - rect.left, py = e.clientY - rect.top;
    const hit = chart.boxes.find((b) => b.depth === Math.floor(py / TL_BOX_HEIGHT) && x(b.start) <= px && px <= Math.max(x(b.end), x(b.start) + 1));
    tip.style.display = hit ? "block" : "none";
    if (hit) {
      tip.textContent = `${hit.name}: ${tlTime(hit.end - hit.start)} at ${tlTime(hit.start)}`;
      tip.style.left = `${e.clientX + 12}px`;
      tip.style.top = `${e.clientY + 12}px`;
    }
  };
  c.onmouseleave = () => { tip.style.display = "none"; };
  c.onclick = (e) => {
    const rect = c.getBoundingClientRect();
    const px = e.clientX - rect.left, py = e.clientY - rect.top;
    const hit = chart.boxes.find((b) => b.depth === Math.floor(py / TL_BOX_HEIGHT) && x(b.start) <= px && px <= x(b.end));
    if (hit) selectByName(hit.name).catch((x2) => status(x2.message, true));
  };
}
