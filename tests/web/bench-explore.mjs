// Times what a person exploring a large profile waits for in tally's page,
// in Debian's chromium (headless, through playwright-core): the first
// table, a selection's callers and callees, a transform applied (table and
// the open view redrawn), one level of the call tree opened. Run by
// bench/web-explore.sh, which starts the server; prints one JSON object of
// milliseconds: the first round's (`cold`: nothing computed yet) and the
// median of the others (`warm`: the server's replies kept), each round in
// a fresh page.
//
//   node bench-explore.mjs URL ROUNDS
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, roundsArg] = process.argv.slice(2);
const rounds = +roundsArg || 3;
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-bench-"));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 900 },
  bypassCSP: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const times = { first_table: [], callers: [], transform: [], tree_level: [] };
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
try {
  for (let r = 0; r < rounds; r++) {
    const page = await browser.newPage();
    page.setDefaultTimeout(120000);
    let t = Date.now();
    await page.goto(`${url}#view=callers&round=${r}`);
    await page.waitForSelector("#functions tr[data-node]");
    times.first_table.push(Date.now() - t);
    // Wait for the full analysis, so the next steps time themselves only.
    await page.waitForFunction(() => !document.querySelector("#status").textContent.includes("computing"));
    // The second row's callers and callees, timed in the page from the
    // click to the first frame painted with the panel: the driver's own
    // round trips (tens of ms each on a loaded 2-core host) left out.
    const row = (await page.$$("#functions tr[data-node]"))[1];
    times.callers.push(
      await row.evaluate(
        (tr) =>
          new Promise((done) => {
            const t0 = performance.now();
            tr.click();
            const shown = `#tab-butterfly #butterfly tr.primary[data-node="${tr.dataset.node}"]`;
            const check = () =>
              document.querySelector(shown)
                ? requestAnimationFrame(() => done(Math.round(performance.now() - t0)))
                : requestAnimationFrame(check);
            check();
          }),
      ),
    );
    // A transform from the menu: the table and the open view again.
    const name = await row.$eval("td.name", (td) => td.textContent);
    const before = await page.$eval("#status", (s) => s.textContent);
    t = Date.now();
    await row.click({ button: "right" });
    await page.click('#menu button[data-transform="focus"]');
    await page.waitForFunction((b) => {
      const s = document.querySelector("#status").textContent;
      return s !== b && !s.includes("computing") && document.querySelector("#tab-butterfly #butterfly");
    }, before);
    times.transform.push(Date.now() - t);
    // One level of the call tree (of the transformed profile).
    await page.click('#tabs button[data-tab="tree"]');
    await page.waitForSelector("#tab-tree ul.tree > li");
    await page.focus("#tab-tree ul.tree");
    t = Date.now();
    await page.keyboard.press("ArrowRight");
    await page.waitForSelector("#tab-tree ul.tree > li > ul > li");
    times.tree_level.push(Date.now() - t);
    times.focus = name;
    await page.close();
  }
} finally {
  await browser.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
const out = { rounds };
for (const [k, v] of Object.entries(times)) {
  out[k] = Array.isArray(v) ? { cold: v[0], warm: v.length > 1 ? median(v.slice(1)) : null } : v;
}
process.stdout.write(JSON.stringify(out) + "\n");
