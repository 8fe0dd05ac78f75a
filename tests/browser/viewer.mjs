// Opens a results page in the system Chromium (headless) and exercises it; prints one JSON line.
// usage: node tests/browser/viewer.mjs <page.html> <screenshot.png> <stop to filter on>
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [page_path, shot, stop] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "turngym-chromium-"));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const out = {};
try {
  const page = browser.pages()[0] || (await browser.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const t0 = Date.now();
  await page.goto(pathToFileURL(page_path).href);
  await page.waitForSelector("body[data-ready='1']");
  out.open_ms = Date.now() - t0;
  out.ready_in_page_ms = Number(await page.getAttribute("body", "data-ready-ms"));
  out.rows_all = await page.locator("#eplist tr.ep").count();
  const t1 = Date.now();
  await page.selectOption("#fstop", stop);
  await page.waitForFunction((n) => document.querySelectorAll("#eplist tr.ep").length < n, out.rows_all);
  out.filter_ms = Date.now() - t1;
  out.filter_in_page_ms = Number(await page.getAttribute("body", "data-render-ms"));
  out.rows_stop = await page.locator("#eplist tr.ep").count();
  out.stops_shown = await page.$$eval("#eplist tr.ep td:nth-child(3)", (tds) => [...new Set(tds.map((t) => t.textContent))]);
  await page.selectOption("#fbreak", "yes");
  await page.fill("#rmin", "0.5");
  out.rows_stop_break_reward = await page.locator("#eplist tr.ep").count();
  out.count_text = await page.textContent("#count");
  await page.locator("#eplist tr.ep").first().click();
  await page.waitForSelector("#eplist tr.txrow .turn");
  out.turns = await page.locator("#eplist tr.txrow .turn").count();
  out.tokens = await page.locator("#eplist tr.txrow pre.ac span").count();
  out.break_text = await page.textContent("#eplist tr.txrow .brk");
  out.open_filter_ms = out.open_ms + out.filter_ms;
  await page.screenshot({ path: shot, fullPage: false });
  out.errors = errors;
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
