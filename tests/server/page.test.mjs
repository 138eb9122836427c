// The chat page at GET / in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): load it, send a message, watch streamed text appear, press stop.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, skipReason } from "./harness.mjs";

const CHROMIUM = process.env.WICK_CHROMIUM || "/usr/bin/chromium";
let chromium = null;
try { ({ chromium } = await import("playwright-core")); } catch { /* skipped below */ }
const skip = skipReason(!chromium ? "npm package playwright-core is not installed (run npm ci in tests/server)"
  : !existsSync(CHROMIUM) ? `no Chromium at ${CHROMIUM} (Debian package chromium)` : false);

test("chat page: stream a reply, then stop one", { skip, timeout: 120000 }, async () => {
  // A template without stop strings: the tiny random model's replies then run to max_tokens.
  const tmpl = path.join(mkdtempSync(path.join(tmpdir(), "wick-page-")), "template.json");
  writeFileSync(tmpl, JSON.stringify({ stop: [] }));
  const srv = await startServer(["--max-tokens-limit", "10000000", "--chat-template", tmpl],
                                { WICK_API_KEY: "page-key" });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    await page.goto(srv.url + "/");
    // The server wants a key: the page says so, then works once it is given.
    await page.waitForFunction(() => /API key/.test(document.getElementById("status").textContent));
    await page.fill("#key", "page-key");
    await page.dispatchEvent("#key", "change");
    await page.waitForFunction(() => document.getElementById("model").textContent !== "wick");
    await page.fill("#max", "40");
    await page.fill("#input", "Hello, who are you?");
    await page.click("#send");
    await page.waitForFunction(() => {
      const m = document.querySelectorAll(".msg.assistant");
      return m.length === 1 && m[0].textContent.length > 0;
    });
    await page.waitForFunction(() => !document.getElementById("send").disabled);
    assert.match(await page.textContent("#rate"), /tokens\/s/);
    // A long reply, stopped mid-way.
    await page.fill("#max", "5000000");
    await page.fill("#input", "Tell me everything.");
    await page.click("#send");
    await page.waitForFunction(() => {
      const m = document.querySelectorAll(".msg.assistant");
      return m.length === 2 && m[1].textContent.length > 20;
    });
    await page.click("#stop");
    await page.waitForFunction(() => document.getElementById("status").textContent === "stopped");
    assert.equal(await page.isDisabled("#stop"), true);
    const n1 = (await page.textContent(".msg.assistant >> nth=1")).length;
    await page.waitForTimeout(300);
    assert.equal((await page.textContent(".msg.assistant >> nth=1")).length, n1, "no text after stop");
  } finally {
    await browser.close();
    assert.equal((await srv.stop()).code, 0);
  }
});
