// Drives Debian's chromium (headless, through playwright-core) over the
// call trees and the transforms of tally's page: opens the top-down tree,
// expands it with the keyboard and selects with Enter; applies transforms
// from the table's context menu, pops them with back and the breadcrumb;
// opens a deep link with a transform in the inverted tree. Prints what it
// saw as one JSON object, which crates/tally-cli/tests/it/web_transforms.rs
// checks.
//
//   node transforms.mjs URL SHOTS_DIR FOCUS COLLAPSE INVERTED_FOCUS
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, shots, focus, collapse, invFocus] = process.argv.slice(2);
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
  const shot = (name) => page.screenshot({ path: path.join(shots, `transforms-${name}.png`) });
  const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
  const total = () => page.$eval("#status", (s) => s.textContent);
  const crumbs = () => page.$$eval("#crumbs button.crumb", (bs) => bs.map((b) => b.textContent));
  const items = (sel) => page.$$eval(sel, (lis) => lis.map((li) => ({
    fn: li.dataset.fn,
    total: li.querySelector(".num").textContent,
  })));
  const rowOf = (name) => `#functions tr[data-node]:has(td.name:text-is("${name}"))`;

  // The top-down tree, opened by its link, expanded with the keyboard.
  await page.goto(`${url}#view=tree`);
  await page.waitForSelector("#tab-tree ul.tree > li");
  out.roots = await items("#tab-tree ul.tree > li");
  await page.focus("#tab-tree ul.tree");
  await page.keyboard.press("ArrowRight");
  await page.waitForSelector("#tab-tree ul.tree > li > ul > li");
  out.second = await items("#tab-tree ul.tree > li > ul > li");
  await page.keyboard.press("ArrowDown");
  out.focused = await page.$eval("#tab-tree li.focused", (li) => li.dataset.fn);
  await page.keyboard.press("Enter");
  await page.waitForFunction((n) => document.querySelector("#selected").textContent.startsWith(n), out.focused);
  out.selected = await page.$eval("#selected", (e) => e.textContent.split("  [")[0]);
  await shot("tree");
  out.before = await total();

  // Transforms from the table's context menu.
  await page.click(rowOf(focus), { button: "right" });
  await page.click('#menu button[data-transform="focus"]');
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 1);
  await page.waitForFunction((t) => document.querySelector("#status").textContent !== t, out.before);
  await page.waitForFunction(() => decodeURIComponent(location.hash).includes("focus="));
  await page.waitForFunction(() => !document.querySelector("#status").textContent.includes("computing"));
  out.focused_hash = await hash();
  out.focused_total = await total();
  out.focused_crumbs = await crumbs();
  await page.click(rowOf(collapse), { button: "right" });
  await page.click('#menu button[data-transform="collapse-recursion"]');
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 2);
  out.two_hash = await hash();
  out.two_crumbs = await crumbs();
  out.two_tree = await items("#tab-tree ul.tree li");
  await shot("transformed");
  // Back pops the last; the breadcrumb's first button pops them all.
  await page.goBack();
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 1);
  await page.waitForFunction(() => !decodeURIComponent(location.hash).includes("collapse-recursion"));
  out.back_hash = await hash();
  await page.click("#crumbs button:not(.crumb)");
  await page.waitForFunction(() => document.querySelectorAll("#crumbs button.crumb").length === 0);
  await page.waitForFunction((t) => document.querySelector("#status").textContent === t, out.before);
  out.popped_total = await total();
  out.popped_hash = await hash();

  // A deep link with a transform, in the inverted tree.
  await page.goto(`${url}#view=inverted&focus=${encodeURIComponent(invFocus)}`);
  await page.waitForSelector("#tab-inverted ul.tree > li");
  out.inverted_crumbs = await crumbs();
  out.inverted_tab = await page.$eval("#tabs button.active", (b) => b.dataset.tab);
  out.inverted = await items("#tab-inverted ul.tree > li");
  await shot("inverted");
} catch (e) {
  out.failure = String(e.stack || e);
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
