// Drives Debian's chromium (headless, through playwright-core, launched as
// drive.mjs launches it) over the comparison of two profiles on the call
// trees and the differential flame graph: `tally serve --diff A B`, the
// report of the same (`report --html --diff`, opened from file:// with
// networking off) and a report made with a transform. Prints what it saw
// as one JSON object, which
// crates/tally-cli/tests/it/web_compare_trees.rs checks.
//
//   node compare-trees.mjs SERVE_URL DIFF_REPORT_URL TRANSFORM_REPORT_URL SHOTS_DIR FUNCTION
//
// FUNCTION: the function to find in the top-down tree (opened along the
// heaviest path down to it).
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [serveUrl, diffReport, tfReport, shots, fn] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const out = { errors: [], requests: [] };

async function open(offline) {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-web-"));
  const browser = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1600, height: 900 },
    offline,
    bypassCSP: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = browser.pages()[0] || (await browser.newPage());
  page.setDefaultTimeout(30000);
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });
  if (offline) {
    page.on("request", (r) => {
      const u = r.url();
      if (!u.startsWith("blob:") && !u.startsWith("data:") && !u.startsWith("file:")) out.requests.push(u);
    });
  }
  return { browser, page, userDir };
}

// A tree's rows as the page shows them.
const rows = (page, sel) => page.$$eval(sel, (lis) => lis.map((li) => {
  const row = li.querySelector(":scope > .tree-row");
  return {
    fn: li.dataset.fn,
    a: row.dataset.a == null ? null : +row.dataset.a,
    b: row.dataset.b == null ? null : +row.dataset.b,
    delta: row.dataset.delta == null ? null : +row.dataset.delta,
    change: row.dataset.change || null,
    cells: [...row.querySelectorAll(".num")].map((s) => s.textContent),
  };
}));

// Opens the top-down tree along its heaviest path (the first closed node
// in document order) until `name` shows.
async function openDownTo(page, tab, name) {
  for (let i = 0; i < 15; i++) {
    if (await page.$(`#tab-${tab} li[data-fn="${name}"]`)) return true;
    const n = await page.$$eval(`#tab-${tab} li`, (lis) => lis.length);
    const closed = await page.$(`#tab-${tab} li[aria-expanded="false"] > .tree-row .twist`);
    if (!closed) return false;
    await closed.click();
    await page.waitForFunction(([t, k]) => document.querySelectorAll(`#tab-${t} li`).length > k ||
      document.querySelector("#status.error"), [tab, n]);
  }
  return !!(await page.$(`#tab-${tab} li[data-fn="${name}"]`));
}

// The differential flame graph's frames and its list of stacks only in A.
async function flame(page) {
  await page.click('#tabs button[data-tab="flame"]');
  // The frame is a document of its own, cross-origin in a report opened
  // from disk: asked through playwright's frame, not the page's DOM.
  let frame = null;
  for (let i = 0; i < 300 && !frame; i++) {
    for (const f of page.frames()) {
      if (f === page.mainFrame() || !f.url().startsWith("blob:")) continue;
      const n = await f.evaluate(() => document.querySelectorAll("#frames > g").length).catch(() => 0);
      if (n > 2) frame = f;
    }
    if (!frame) await page.waitForTimeout(100);
  }
  if (!frame) throw new Error("no flame graph drawn");
  return frame.evaluate(() => ({
    frames: [...document.querySelectorAll("#frames > g")].map((g) => ({
      name: g.getAttribute("data-n"),
      b: +g.getAttribute("data-w"),
      a: +g.getAttribute("data-a"),
      change: g.getAttribute("data-change"),
      fill: g.querySelector("rect").getAttribute("fill"),
    })),
    only_in_a: [...document.querySelectorAll("#only-a g.only-a")].map((g) => ({
      name: g.getAttribute("data-n"), a: +g.getAttribute("data-a"),
    })),
    legend: (document.querySelector("#legend") || {}).textContent || "",
  }));
}

// The Compare tab's four lists: function and the A, B, B − A cells.
async function lists(page) {
  await page.click('#tabs button[data-tab="compare"]');
  await page.waitForSelector('#tab-compare section[data-list="only_in_a"]');
  return page.$$eval("#tab-compare section.compare-list", (ss) => Object.fromEntries(ss.map((s) => [
    s.dataset.list,
    [...s.querySelectorAll("tr[data-fn]")].map((tr) => {
      const td = [...tr.querySelectorAll("td")].map((x) => x.textContent);
      return { fn: tr.dataset.fn, a: td[1], b: td[2], delta: td[3] };
    }),
  ])));
}

async function diffPage(page, url, prefix) {
  const seen = {};
  const shot = (name) => page.screenshot({ path: path.join(shots, `${prefix}-${name}.png`) });
  await page.goto(`${url}#view=tree`);
  await page.waitForSelector("#tab-tree ul.tree > li");
  seen.roots = await rows(page, "#tab-tree ul.tree > li");
  seen.note = await page.$eval("#tab-tree p.note:nth-of-type(2)", (p) => p.textContent).catch(() => null);
  seen.found = await openDownTo(page, "tree", fn);
  seen.tree = await rows(page, "#tab-tree li");
  await shot("tree");
  await page.click('#tabs button[data-tab="inverted"]');
  await page.waitForSelector("#tab-inverted ul.tree > li");
  seen.inverted = await rows(page, "#tab-inverted ul.tree > li");
  await shot("inverted");
  seen.flame = await flame(page);
  await shot("flame");
  seen.lists = await lists(page);
  await shot("compare");
  return seen;
}

for (const [url, offline, key] of [[serveUrl, false, "served"], [diffReport, true, "report"]]) {
  const { browser, page, userDir } = await open(offline);
  try {
    out[key] = await diffPage(page, url, `compare-trees-${key}`);
  } catch (e) {
    out.failure = `${key}: ${String(e.stack || e)}`;
  } finally {
    await browser.close();
    fs.rmSync(userDir, { recursive: true, force: true });
  }
}

// The report made with a transform: its tree and its breadcrumb.
{
  const { browser, page, userDir } = await open(true);
  try {
    await page.goto(`${tfReport}#view=tree`);
    await page.waitForSelector("#tab-tree ul.tree > li");
    out.transformed = {
      roots: await rows(page, "#tab-tree ul.tree > li"),
      crumbs: await page.$$eval("#crumbs button", (bs) => bs.map((b) => ({ text: b.textContent, read_only: b.getAttribute("aria-disabled") === "true" }))),
    };
    await page.screenshot({ path: path.join(shots, "compare-trees-transformed-tree.png") });
  } catch (e) {
    out.failure = `transformed: ${String(e.stack || e)}`;
  } finally {
    await browser.close();
    fs.rmSync(userDir, { recursive: true, force: true });
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
