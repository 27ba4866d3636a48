// Drives Debian's chromium (headless, through playwright-core) over tally's
// page, as a person would, and prints what it saw as one JSON object; the
// Rust test (crates/tally-cli/tests/it/web.rs) checks the numbers.
//
//   node drive.mjs URL SHOTS_DIR PREFIX FUNCTION [offline]
//
// URL: the page (`http://127.0.0.1:…/?t=…` or `file://…`); FUNCTION: the
// function to select; `offline`: networking disabled, every request that
// is not the file itself recorded.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, shots, prefix, fn, mode] = process.argv.slice(2);
const offline = mode === "offline";
fs.mkdirSync(shots, { recursive: true });
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-web-"));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 900 },
  offline,
  // The driver evaluates its checks in the page; the page itself allows no eval.
  bypassCSP: true,
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const out = { errors: [], requests: [] };
const timeout = 30000;
try {
  const page = browser.pages()[0] || (await browser.newPage());
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith("blob:") && !u.startsWith("data:") && u !== url) out.requests.push(u);
  });
  const shot = (name) => page.screenshot({ path: path.join(shots, `${prefix}-${name}.png`) });
  const ready = () => page.waitForFunction(() => document.body.dataset.ready === "1");
  const rows = () => page.$$eval("#functions tr[data-row]", (trs) => trs.map((tr) => ({
    node: tr.dataset.node == null ? null : +tr.dataset.node,
    name: tr.querySelector("td.name").textContent,
    cells: [...tr.querySelectorAll("td")].map((td) => td.dataset.value ?? td.textContent),
  })));
  const heads = () => page.$$eval("#table-head th", (ths) => ths.map((th) => th.dataset.sort));

  await page.goto(url);
  await ready();
  out.status = await page.textContent("#status");
  out.events = await page.$$eval("#event option", (os) => os.map((o) => o.value));
  out.columns = await heads();
  await shot("functions");

  // Sort by inclusive cost (descending).
  if (out.columns.includes("inclusive")) {
    await page.click('#table-head th[data-sort="inclusive"]');
    await page.waitForSelector('#table-head th.sorted[data-sort="inclusive"]');
    await page.waitForFunction(() => document.querySelector("#functions tr[data-row]"));
    out.by_inclusive = await rows();
    out.inclusive_column = out.columns.indexOf("inclusive");
  }

  // Select the function through the filter, then clear the filter.
  const re = `^${fn.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`;
  await page.fill("#filter", re);
  await page.waitForFunction((n) => {
    const r = document.querySelectorAll("#functions tr[data-row]");
    return r.length === 1 && r[0].querySelector("td.name").textContent.startsWith(n);
  }, fn);
  await page.click("#functions tr[data-row]");
  await page.waitForSelector("#butterfly tr.primary");
  out.butterfly = await page.$$eval("#butterfly tbody tr", (trs) => trs
    .filter((tr) => tr.classList.length && tr.querySelector("td.name"))
    .map((tr) => ({
      kind: tr.className,
      name: tr.querySelector("td.name").textContent,
      node: tr.dataset.node,
      count: tr.dataset.count,
      measured: tr.dataset.measured,
      cells: [...tr.querySelectorAll("td")].map((td) => td.textContent),
    })));
  out.selected = await page.textContent("#selected");
  await shot("butterfly");
  await page.fill("#filter", "");
  await page.waitForFunction(() => document.querySelectorAll("#functions tr[data-row]").length > 1);

  // Call graph around it: clickable nodes.
  await page.click('#tabs button[data-tab="graph"]');
  try {
    await page.waitForSelector("#tab-graph svg g.node", { timeout });
    out.graph_nodes = await page.$$eval("#tab-graph svg g.node title", (ts) => ts.map((t) => t.textContent));
    await shot("graph");
  } catch (e) {
    out.graph_error = String(e.message).split("\n")[0];
  }

  // Flame graph: a click on a frame (main) selects it in the table.
  try {
    await page.click('#tabs button[data-tab="flame"]');
    await page.waitForFunction(() => {
      const f = document.querySelector("#flame-frame");
      try { return f.contentDocument && f.contentDocument.querySelectorAll("g title").length > 2; } catch (e) { return false; }
    }, null, { timeout: 10000 });
    await page.waitForTimeout(300);
    await shot("flame");
    const frame = page.frames().find((f) => f !== page.mainFrame());
    if (frame) {
      const titles = await frame.$$eval("g title", (ts) => ts.map((t) => t.textContent));
      out.flame_titles = titles.length;
      const target = titles.find((t) => t.startsWith("main ("));
      if (target) {
        await frame.evaluate((t) => {
          const g = [...document.querySelectorAll("g")].find((g) => g.querySelector("title")?.textContent === t);
          g.dispatchEvent(new MouseEvent("click", { bubbles: true }));
        }, target);
        await page.waitForTimeout(500);
        out.flame_click_selected = await page.textContent("#selected");
      }
    }
  } catch (e) {
    out.flame_error = String(e.message).split("\n")[0];
  }

  // Source and assembly of the selected function.
  for (const tab of ["source", "asm"]) {
    await page.click(`#tabs button[data-tab="${tab}"]`);
    await page.waitForFunction((t) => document.body.dataset.tab === t || document.querySelector("#status.error"), tab);
    await page.waitForSelector(`#tab-${tab} .code-table, #tab-${tab} .note, #status.error`);
    out[tab] = await page.textContent(`#tab-${tab} .code`);
    await shot(tab);
  }

  // The whole table beside the selected function's callers and callees.
  await page.click('#tabs button[data-tab="butterfly"]');
  await page.waitForSelector("#butterfly tr.primary");
  await ready();
  await shot("overview");
  out.overview = true;

  // Switch event: the table follows.
  if (out.events.length > 1) {
    const ev = out.events[out.events.length - 1];
    await page.selectOption("#event", ev);
    await page.waitForFunction((e) => document.querySelector("#status").textContent.includes(` ${e} `), ev);
    await ready();
    out.switched_event = ev;
    out.switched_status = await page.textContent("#status");
    out.switched_rows = await rows();
    await shot("event");
  }
  out.final_status = await page.textContent("#status");
  out.status_error = await page.$eval("#status", (s) => s.classList.contains("error"));
} catch (e) {
  out.failure = String(e.stack || e);
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
