// Drives Debian's chromium (headless, through playwright-core) over the
// timeline of a recording with sample times: opens the timeline view,
// counts the tracks, drags a range on the busiest track and reads the
// functions table's total before and after; prints what it saw as one
// JSON object, which the Rust test (crates/tally-cli/tests/it/timeline.rs)
// checks.
//
//   node timeline.mjs URL SHOTS_DIR PREFIX FROM TO
//
// URL: the page without a fragment; FROM and TO: where the drag starts and
// ends, as fractions of the track's width.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, shots, prefix, from, to] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-web-"));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 900 },
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
  const total = () => page.evaluate(() => state.head && !state.head.pending ? state.head.total : null);

  await page.goto(`${url}#view=timeline`);
  await page.waitForFunction(() => document.body.dataset.tab === "timeline" && document.body.dataset.stackBoxes);
  await page.waitForFunction(() => state.head && !state.head.pending);
  out.tab_shown = await page.$eval('#tabs button[data-tab="timeline"]', (b) => !b.hidden);
  out.tracks = await page.$$eval("#tab-timeline .tl-track", (rows) => rows.map((r) => r.querySelector(".tl-name").textContent));
  out.boxes = Number(await page.evaluate(() => document.body.dataset.stackBoxes));
  out.total_before = await total();
  await shot("timeline");

  // Drag over the chosen (busiest) thread's track.
  const canvas = await page.$("#tab-timeline .tl-track.chosen canvas");
  const box = await canvas.boundingBox();
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width * Number(from), y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * ((Number(from) + Number(to)) / 2), y, { steps: 4 });
  await page.mouse.move(box.x + box.width * Number(to), y, { steps: 4 });
  await page.mouse.up();
  await page.waitForFunction(() => /range=\d+-\d+/.test(location.hash));
  await page.waitForFunction((before) => state.head && !state.head.pending && state.head.total !== before
    && document.body.dataset.tab === "timeline", out.total_before);
  await page.waitForFunction(() => document.querySelector("#tab-timeline .tl-range"));
  out.hash = decodeURIComponent(await page.evaluate(() => location.hash));
  out.total_after = await total();
  out.range_text = await page.$eval("#tab-timeline .tl-range", (e) => e.textContent);
  await shot("range");

  // Another view under the range: the flame graph asks with it.
  const asked = [];
  page.on("request", (r) => { if (r.url().includes("/api/flame")) asked.push(r.url()); });
  await page.click('#tabs button[data-tab="flame"]');
  await page.waitForFunction(() => document.body.dataset.tab === "flame");
  await page.waitForTimeout(300);
  out.flame_requests = asked;
  await shot("flame");
} catch (e) {
  out.failure = String(e.stack || e);
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
