// Drives Debian's chromium (headless, through playwright-core) over the
// context menu of the flame graph and the call graph and over the
// assembly view's control-flow graph: right-clicks a flame frame and
// focuses on it, right-clicks a call-graph node and hides it, then opens
// a function's assembly, turns the control-flow graph on and clicks the
// block a loop jumps back to. Prints what it saw as one JSON object,
// which crates/tally-cli/tests/it/web_cfg.rs checks.
//
//   node cfg.mjs URL SHOTS_DIR FOCUS HIDE CFG_FUNCTION
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, shots, focus, hide, cfgFn] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-web-"));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 900 },
  bypassCSP: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const out = { errors: [] };
try {
  const page = browser.pages()[0] || (await browser.newPage());
  page.setDefaultTimeout(30000);
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });
  const shot = (name) => page.screenshot({ path: path.join(shots, `cfg-${name}.png`) });
  const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
  const crumbs = () => page.$$eval("#crumbs button.crumb", (bs) => bs.map((b) => b.textContent));
  const settled = () => page.waitForFunction(() => document.body.dataset.ready === "1" &&
    !document.querySelector("#status").textContent.includes("computing"));
  // The table's functions (a small program: every row is drawn).
  const table = () => page.$$eval("#functions tr[data-row] td.name", (tds) => tds.map((td) => td.title.split("  ")[0].replace(/ <cycle \d+>$/, "")));
  const menu = () => page.$$eval("#menu button", (bs) => bs.map((b) => b.dataset.transform || b.dataset.action));

  // A right-click on a flame frame: the menu, then focus.
  await page.goto(`${url}#view=flame`);
  await settled();
  out.complete = await table();
  await page.waitForFunction(() => {
    const f = document.querySelector("#flame-frame");
    try { return f.contentDocument && f.contentDocument.querySelectorAll("g title").length > 2; } catch (e) { return false; }
  });
  const frame = page.frames().find((f) => f !== page.mainFrame());
  const at = await frame.evaluate((n) => {
    const g = [...document.querySelectorAll("g")].find((x) => {
      const t = x.querySelector(":scope > title");
      return t && t.textContent.startsWith(`${n} (`);
    });
    const r = g.querySelector(":scope > rect").getBoundingClientRect();
    return { x: r.x + Math.min(r.width / 2, 30), y: r.y + r.height / 2 };
  }, focus);
  const fb = await page.$eval("#flame-frame", (f) => { const r = f.getBoundingClientRect(); return { x: r.x, y: r.y }; });
  await page.mouse.click(fb.x + at.x, fb.y + at.y, { button: "right" });
  await page.waitForSelector("#menu");
  out.flame_menu = await menu();
  out.flame_menu_fn = await page.$eval("#menu", (m) => m.dataset.fn);
  await shot("flame-menu");
  await page.click('#menu button[data-transform="focus"]');
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 1);
  await page.waitForFunction(() => decodeURIComponent(location.hash).includes("focus="));
  await settled();
  out.focused = await table();
  out.focused_crumbs = await crumbs();
  out.focused_hash = await hash();
  await page.waitForFunction(() => {
    const f = document.querySelector("#flame-frame");
    try { return f.contentDocument && f.contentDocument.querySelectorAll("g title").length > 2; } catch (e) { return false; }
  });
  await page.waitForTimeout(300);
  await shot("flame-focused");

  // A right-click on a call-graph node: hide it.
  await page.click('#tabs button[data-tab="graph"]');
  await page.waitForSelector("#tab-graph svg g.node");
  const node = page.locator("#tab-graph g.node", { has: page.locator("text", { hasText: new RegExp(`^${hide}$`) }) }).first();
  await node.click({ button: "right" });
  await page.waitForSelector("#menu");
  out.graph_menu = await menu();
  out.graph_menu_fn = await page.$eval("#menu", (m) => m.dataset.fn);
  await shot("graph-menu");
  await page.click('#menu button[data-transform="hide"]');
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 2);
  await settled();
  out.hidden = await table();
  out.hidden_crumbs = await crumbs();
  out.hidden_hash = await hash();
  await page.waitForFunction((h) => {
    const texts = [...document.querySelectorAll("#tab-graph g.node text")].map((t) => t.textContent);
    return texts.length > 0 && !texts.includes(h);
  }, hide);
  out.hidden_graph = await page.$$eval("#tab-graph g.node text", (ts) => ts.map((t) => t.textContent));
  await shot("graph-hidden");

  // The control-flow graph of a function, on the complete profile.
  await page.goto(`${url}#view=asm&fn=${encodeURIComponent(cfgFn)}`);
  await page.waitForSelector("#asm-table");
  await page.click("#cfg-toggle");
  await page.waitForSelector('#cfg[data-ready="1"]');
  out.cfg_head = await page.textContent("#cfg .cfg-head");
  out.cfg_note = await page.$eval("#cfg", (c) => (c.querySelector(".cfg-note") || {}).textContent || null);
  out.blocks = await page.$$eval("#cfg g.node", (gs) => gs.map((g) => ({
    title: g.querySelector("title").textContent,
    start: g.dataset.start == null ? null : +g.dataset.start,
    text: [...g.querySelectorAll("text")].map((t) => t.textContent),
  })));
  out.edges = await page.$$eval("#cfg g.edge", (gs) => gs.map((g) => ({
    title: g.querySelector("title").textContent,
    text: [...g.querySelectorAll("text")].map((t) => t.textContent).join(" "),
  })));
  await shot("cfg");
  // The block the loop jumps back to: its instructions marked, in view.
  const back = out.edges
    .map((e) => e.title.split("->").map((b) => +b.replace(/^b/, "")))
    .find(([from, to]) => to <= from);
  if (back) {
    await page.click(`#cfg g.node:has(> title:text-is("b${back[1]}"))`);
    await page.waitForSelector("#asm-table tr.in-block");
    out.clicked = `b${back[1]}`;
    out.marked = await page.$$eval("#asm-table tr.in-block", (trs) => trs.map((tr) => +tr.dataset.address));
    out.marked_in_view = await page.evaluate(() => {
      const code = document.querySelector("#tab-asm .code").getBoundingClientRect();
      const r = document.querySelector("#asm-table tr.in-block").getBoundingClientRect();
      return r.top >= code.top && r.bottom <= code.bottom;
    });
    await shot("cfg-block");
  }
} catch (e) {
  out.failure = String(e.stack || e);
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
