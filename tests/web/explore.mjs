// Drives Debian's chromium (headless, through playwright-core) over tally's
// page as a person exploring a profile does: opens a deep link, follows a
// call in the source view, walks back and forward, looks for clipped
// numbers at two window sizes, opens the assembly with its jump arrows
// and searches; prints what it saw as one JSON object, which the Rust test
// (crates/tally-cli/tests/it/web_explore.rs) checks.
//
//   node explore.mjs URL SHOTS_DIR PREFIX FUNCTION SEARCH
//
// URL: the page without a fragment (`http://127.0.0.1:…/?t=…` or
// `file://…`); FUNCTION: the function the deep link selects; SEARCH: a
// regex typed into the search box.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, shots, prefix, fn, search] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-web-"));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1920, height: 1080 },
  bypassCSP: true,
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const out = { errors: [] };
try {
  const page = browser.pages()[0] || (await browser.newPage());
  page.setDefaultTimeout(30000);
  page.on("pageerror", (e) => out.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(`console: ${m.text()}`); });
  const shot = (name) => page.screenshot({ path: path.join(shots, `${prefix}-${name}.png`) });
  const selected = () => page.$eval("#selected", (e) => e.textContent.split("  [")[0]);
  const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
  const shown = async (tab, name) => {
    await page.waitForFunction(([t, n]) => document.body.dataset.tab === t
      && document.querySelector("#selected").textContent.split("  [")[0] === n, [tab, name]);
  };

  // A deep link: the source view of FUNCTION.
  const link = `${url}#view=source&fn=${encodeURIComponent(fn)}`;
  await page.goto(link);
  await shown("source", fn);
  await page.waitForSelector("#source-table");
  out.deep = {
    hash: await hash(),
    selected: await selected(),
    tab: await page.$eval("#tabs button.active", (b) => b.dataset.tab),
    event: await page.$eval("#event", (s) => s.value),
    heads: await page.$$eval("#source-table thead th", (ths) => ths.map((t) => t.textContent)),
    lines: await page.$$eval("#source-table tr.line", (trs) => trs.map((tr) => ({
      line: +tr.dataset.line,
      cells: [...tr.querySelectorAll("td")].map((td) => td.textContent),
      heat: tr.style.background || "",
    }))),
    calls: await page.$$eval("#source-table tr.call", (trs) => trs.map((tr) => ({
      line: +tr.dataset.line,
      callee: tr.dataset.callee,
      href: tr.querySelector("a.callee").getAttribute("href"),
    }))),
  };
  await shot("source");

  // A call row's link selects its callee.
  const call = out.deep.calls.find((c) => !c.callee.startsWith(fn));
  if (call) {
    await page.click(`#source-table tr.call[data-callee="${call.callee}"] a.callee`);
    await shown("source", call.callee);
    out.followed = { callee: call.callee, selected: await selected(), hash: await hash() };
    // Back to FUNCTION, forward to the callee again.
    await page.goBack();
    await shown("source", fn);
    out.back = { selected: await selected(), hash: await hash() };
    await page.goForward();
    await shown("source", call.callee);
    out.forward = { selected: await selected(), hash: await hash() };
    await page.goBack();
    await shown("source", fn);
  }

  // Another view: one more step of history.
  await page.click('#tabs button[data-tab="butterfly"]');
  await shown("butterfly", fn);
  await page.waitForSelector("#butterfly tr.primary");
  out.callers_hash = await hash();

  // Numbers never clipped, names cut with an ellipsis and a title.
  out.clipping = [];
  for (const [width, height] of [[1920, 1080], [1280, 800]]) {
    await page.setViewportSize({ width, height });
    await page.waitForTimeout(300);
    out.clipping.push(await page.evaluate(([w, h]) => {
      const clipped = (sel) => [...document.querySelectorAll(sel)]
        .filter((td) => td.textContent && td.scrollWidth > td.clientWidth)
        .map((td) => td.textContent);
      const names = [...document.querySelectorAll("#butterfly td.name")];
      return {
        size: `${w}x${h}`,
        numbers: document.querySelectorAll("#functions td.num, #butterfly td:not(.name)").length,
        table: clipped("#functions td.num, #functions td.pct"),
        butterfly: clipped("#butterfly td:not(.name)"),
        names_cut: names.filter((td) => td.scrollWidth > td.clientWidth).length,
        names_without_title: names.filter((td) => !td.title).length,
      };
    }, [width, height]));
    await shot(`callers-${width}`);
  }
  await page.setViewportSize({ width: 1920, height: 1080 });

  // Assembly: one row per instruction, the jumps as arrows.
  await page.click('#tabs button[data-tab="asm"]');
  await shown("asm", fn);
  await page.waitForSelector("#asm-table, #tab-asm .note");
  out.asm = {
    hash: await hash(),
    heads: await page.$$eval("#asm-table thead th", (ths) => ths.map((t) => t.textContent)),
    rows: await page.$$eval("#asm-table tr.ins", (trs) => trs.map((tr) => ({
      address: +tr.dataset.address,
      cells: [...tr.querySelectorAll("td")].map((td) => td.textContent),
    }))),
    arrows: await page.$$eval("#tab-asm svg.jumps path[data-from]", (ps) => ps.map((p) => [+p.dataset.from, +p.dataset.to])),
    clipped: await page.$$eval("#asm-table td.num", (tds) => tds.filter((td) => td.scrollWidth > td.clientWidth).length),
  };
  await shot("asm");

  // Search: the table filtered, the flame graph's matches marked.
  await page.click('#tabs button[data-tab="flame"]');
  // The frame may be of another origin (a report opened from disk): the
  // driver reads it as a frame of its own.
  await page.frameLocator("#flame-frame").locator("g > title").first().waitFor({ state: "attached" });
  await page.fill("#filter", search);
  await page.waitForFunction((s) => document.body.dataset.flameSearch === s && document.body.dataset.ready === "1"
    && decodeURIComponent(location.hash).includes("search="), search);
  const frame = page.frames().find((f) => f !== page.mainFrame());
  out.search = {
    hash: await hash(),
    rows: await page.$$eval("#functions tr[data-row] td.name", (tds) => tds.map((td) => td.textContent)),
    marks: await page.$$eval("#functions td.name mark", (ms) => ms.map((m) => m.textContent)),
    hits: +(await page.evaluate(() => document.body.dataset.flameHits)),
    hit_titles: await frame.$$eval("g[data-hit] > title", (ts) => ts.map((t) => t.textContent)),
    frames: await frame.$$eval("g > title", (ts) => ts.map((t) => t.textContent)),
  };
  await page.waitForTimeout(200);
  await shot("search");
  // The search is in the link: opened again, the page shows it.
  await page.goto(`${url}#view=flame&search=${encodeURIComponent(search)}`);
  await page.waitForFunction(() => document.body.dataset.tab === "flame" && document.body.dataset.ready === "1");
  out.reopened_search = await page.$eval("#filter", (i) => i.value);
} catch (e) {
  out.failure = String(e.stack || e);
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
