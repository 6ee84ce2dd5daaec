// The harness itself, in the real browser: a guard that missed a console error or a request to
// another host would let every browser test pass whatever the page did.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { serveStatic } from "../lib/servers.mjs";

let dir;
let web;

before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "k8sailor-harness-"));
  await writeFile(
    path.join(dir, "index.html"),
    `<!doctype html><title>spa</title><link rel="icon" href="data:,"><h1 id="api">API_BASE</h1><script src="/app.js"></script>`,
  );
  await writeFile(
    path.join(dir, "opener.html"),
    `<!doctype html><title>opener</title><link rel="icon" href="data:,"><a target="_blank" href="/bad.html">open</a>`,
  );
  await writeFile(path.join(dir, "app.js"), `document.title = "API_BASE";`);
  await writeFile(
    path.join(dir, "bad.html"),
    `<!doctype html><title>bad</title>
     <link rel="stylesheet" href="https://cdn.example.com/x.css">
     <script>
       console.error("something broke");
       setTimeout(() => { throw new Error("uncaught in a timer"); }, 0);
       fetch("/missing.json");
     </script>`,
  );
  web = await serveStatic({
    root: dir,
    rewrites: [["API_BASE", "http://127.0.0.1:1/api"]],
    files: { "/extra.txt": path.join(dir, "app.js") },
  });
});

after(async () => {
  await web?.close();
  await rm(dir, { recursive: true, force: true });
});

test("a clean single-page app passes, with rewrites and history-mode fallback", async (t) => {
  const b = await openBrowser({ scenario: "harness-clean", allowedOrigins: [web.origin] });
  t.after(() => b.close());
  await b.page.goto(`${web.origin}/some/client/route?x=1`);
  assert.equal(await b.page.locator("#api").innerText(), "http://127.0.0.1:1/api");
  assert.equal(await b.page.title(), "http://127.0.0.1:1/api");
  const shot = await b.screenshot("clean");
  assert.ok(existsSync(shot), `no screenshot at ${shot}`);
  b.check();
});

test("console errors, page errors, failed loads and foreign hosts are each caught", async (t) => {
  const b = await openBrowser({ scenario: "harness-bad", allowedOrigins: [web.origin] });
  t.after(() => b.close());
  await b.page.goto(`${web.origin}/bad.html`);
  await b.page.waitForTimeout(500);
  const problems = b.problems().join("\n");
  assert.match(problems, /console error: something broke/);
  assert.match(problems, /uncaught page error: Error: uncaught in a timer/);
  assert.match(problems, /request to a foreign origin: GET https:\/\/cdn\.example\.com\/x\.css/);
  // Chromium reports a 404 as a console error; the guard must see it.
  assert.match(problems, /404/);
  assert.throws(() => b.check(), /the page misbehaved/);
});

test("a tab the page opens is held to the same rules", async (t) => {
  const b = await openBrowser({ scenario: "harness-tab", allowedOrigins: [web.origin] });
  t.after(() => b.close());
  await b.page.goto(`${web.origin}/opener.html`);
  const [tab] = await Promise.all([b.context.waitForEvent("page"), b.page.click("a")]);
  await tab.waitForLoadState();
  await tab.waitForTimeout(500);
  await b.screenshot("tab", tab);
  const problems = b.problems().join("\n");
  assert.match(problems, /console error: something broke/);
  assert.match(problems, /request to a foreign origin: GET https:\/\/cdn\.example\.com\/x\.css/);
});
