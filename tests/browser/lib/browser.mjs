// The browser side of every browser test: Debian's headless Chromium driven by playwright-core
// (never a browser download), a guard that fails the test on any console error, uncaught page
// error, failed request or request to an origin other than the ones the test serves, and
// numbered screenshots under target/browser/<scenario>/.
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { chromium } from "playwright-core";

import { repoRoot } from "./servers.mjs";

export const CHROMIUM = process.env.K8SAILOR_CHROMIUM || "/usr/bin/chromium";

// Without the background-networking flags Chromium dials Google's hosts at start, which this
// machine's closed network refuses; the resolver rule makes sure that nothing a page asks for
// leaves loopback even if the guard is wrong about it.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
];

// Schemes that never reach a network.
const LOCAL_SCHEMES = new Set(["data:", "blob:", "about:", "chrome-error:"]);

/**
 * Starts Chromium and opens a page; every request, console message and page error of it and of
 * any page it opens is checked. `allowedOrigins` are the only origins the pages may talk to (the
 * static server's and k8sailor's). `tolerate` lists URLs whose failure to load is no fault of the
 * page, each with the reason (such as the icon Chromium asks for when it shows raw JSON in a
 * tab); their console errors are kept as warnings. `tolerateMatching` does the same for every
 * URL a pattern matches (`[{ pattern: RegExp, reason }]`), and for requests to it that fail:
 * what the scenario provokes on purpose, such as a 403 the page must explain or a server it
 * stops. Call `check()` at the end (it throws listing
 * every problem) and `close()` always.
 */
export async function openBrowser({ scenario, allowedOrigins, tolerate = {}, tolerateMatching = [], viewport = { width: 1400, height: 900 } }) {
  const shotDir = path.join(repoRoot, "target", "browser", scenario);
  await rm(shotDir, { recursive: true, force: true });
  await mkdir(shotDir, { recursive: true });

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  const context = await browser.newContext({ viewport });
  const allowed = new Set(allowedOrigins.map((o) => new URL(o).origin));
  const problems = [];
  const warnings = [];
  const requests = [];

  // Listening on the context, not a page, also covers a tab the page opens (a link with
  // target=_blank) from its first message on: a listener added when the tab appears misses
  // what its first script says.
  context.on("console", (msg) => {
    const where = msg.location();
    const reason = tolerate[where.url] ?? tolerateMatching.find((t) => where.url && t.pattern.test(where.url))?.reason;
    if (msg.type() === "error" && reason !== undefined) {
      warnings.push(`tolerated: ${msg.text()} (at ${where.url}: ${reason})`);
    } else if (msg.type() === "error") {
      problems.push(`console error: ${msg.text()}${where.url ? ` (at ${where.url}:${where.lineNumber})` : ""}`);
    } else if (msg.type() === "warning") {
      warnings.push(msg.text());
    }
  });
  context.on("weberror", (err) => {
    const e = err.error();
    problems.push(`uncaught page error: ${e.stack || e.message}`);
  });
  context.on("request", (req) => {
    const url = new URL(req.url());
    requests.push({ method: req.method(), url: req.url() });
    if (!LOCAL_SCHEMES.has(url.protocol) && !allowed.has(url.origin)) {
      problems.push(`request to a foreign origin: ${req.method()} ${req.url()}`);
    }
  });
  context.on("requestfailed", (req) => {
    const reason = req.failure()?.errorText ?? "unknown";
    const tolerated = tolerateMatching.find((t) => t.pattern.test(req.url()))?.reason;
    // A navigation cancels the previous page's polling requests: that is no fault.
    if (reason === "net::ERR_ABORTED") return;
    if (tolerated !== undefined) warnings.push(`tolerated: ${req.method()} ${req.url()} failed: ${reason} (${tolerated})`);
    else problems.push(`request failed: ${req.method()} ${req.url()}: ${reason}`);
  });
  const page = await context.newPage();

  let shots = 0;
  return {
    browser,
    context,
    page,
    requests,
    shotDir,
    /** Saves a full-page screenshot of `of` (the first page) as NN-name.png; returns its path. */
    async screenshot(name, of = page) {
      shots += 1;
      const file = path.join(shotDir, `${String(shots).padStart(2, "0")}-${name}.png`);
      await of.screenshot({ path: file, fullPage: true });
      return file;
    },
    /** The problems seen so far (console errors, page errors, foreign or failed requests). */
    problems() {
      return [...problems];
    },
    /** Console warnings: not failures, but worth a look (a framework's complaints land here). */
    warnings() {
      return [...warnings];
    },
    /** Throws if anything went wrong in the page since it opened. */
    check() {
      if (problems.length > 0) {
        const err = new Error(`the page misbehaved:\n  ${problems.join("\n  ")}`);
        throw Object.assign(err, { problems: [...problems] });
      }
    },
    async close() {
      await browser.close();
    },
  };
}
