// A followed log outlives its streams: k8sailor ends each followed log after a watch's
// randomised lifetime (`--min-request-timeout` times [1, 2), 2 s here), and the log view opens
// it again from its newest line's time (`sinceTime`), dropping what it has already. The kwok
// nodes' containers all log the same numbered lines (hack/demo-logs/, one every half second,
// numbered in one sequence), so a log with no line lost and none repeated is one whose
// numbers, per pod, go up by one from its first line to its last. Also the newcomer's list of
// issue 21: counts in words ("1 Ingress"), a missing pod's page. A deleted pod's log is said to
// be gone, not asked for in a loop. Any console error or request
// to another host fails it (the harness). Screenshots in target/browser/dashboard-log-resume/.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { apply, kubectl, testNamespace } from "../lib/cluster.mjs";
import { eventually, repoRoot, startK8sailor } from "../lib/servers.mjs";

const SCENARIO = "dashboard-log-resume";
const NODE = "demo-node-1";
const LIST_COUNT = "main .toolbar .count";

function deployment(namespace, name, replicas) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { nodeName: NODE, containers: [{ name: "app", image: "registry.invalid/app:1.0" }] },
      },
    },
  };
}

const numberOf = (line) => Number(/\[(\d{6})\]/.exec(line)?.[1] ?? NaN);

/** The numbers of the lines of each pod in a downloaded log (`[pod/NAME/CONTAINER] ...`, or one pod's bare lines). */
function numbersByPod(text) {
  const byPod = new Map();
  for (const line of text.split("\n").filter(Boolean)) {
    const pod = /^\[pod\/([^/]+)\//.exec(line)?.[1] ?? "";
    if (!byPod.has(pod)) byPod.set(pod, []);
    byPod.get(pod).push(numberOf(line));
  }
  return byPod;
}

/** Throws unless each pod's numbers go up by one from first to last: no line lost, none twice. */
function assertWhole(byPod, what) {
  for (const [pod, numbers] of byPod) {
    const broken = numbers.findIndex((n, i) => i > 0 && n !== numbers[i - 1] + 1);
    assert.equal(broken, -1, `${what} ${pod}: ${numbers[broken - 1]} then ${numbers[broken]} (of ${numbers.length} lines, ${numbers[0]}..${numbers.at(-1)})`);
  }
}

test("dashboard: a followed log goes on after its stream ends, with no line lost or repeated", async (t) => {
  const ns = await testNamespace("dash-resume");
  t.after(() => ns.remove());
  await apply([
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "solo", namespace: ns.name },
      spec: { nodeName: NODE, containers: [{ name: "app", image: "registry.invalid/app:1.0" }] },
    },
    deployment(ns.name, "api", 2),
    deployment(ns.name, "web", 1),
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name: "shop", namespace: ns.name },
      spec: { defaultBackend: { service: { name: "api", port: { number: 80 } } } },
    },
  ]);
  await eventually("four pods", async () => (await kubectl(["get", "pods", "-n", ns.name, "-o", "name"])).trim().split("\n").length === 4, { timeoutMs: 60_000 });
  await kubectl(["wait", "--for=condition=Ready", "pod", "--all", "-n", ns.name, "--timeout=60s"]);
  const server = await startK8sailor({
    logFile: path.join(repoRoot, "target", "browser", `${SCENARIO}.k8sailor.log`),
    args: ["--min-request-timeout", "2s"],
  });
  t.after(() => server.stop());
  const b = await openBrowser({
    scenario: SCENARIO,
    allowedOrigins: [server.origin],
    tolerateMatching: [{ pattern: /\/pods\/solo\/logs\?/, reason: "the log of the pod the test deletes, whose 404 the page shows" }],
  });
  t.after(() => b.close());
  const { page } = b;
  const logRequests = [];
  page.on("request", (req) => {
    if (/\/logs\?/.test(req.url())) logRequests.push(new URL(req.url()));
  });
  const resumed = () => logRequests.filter((u) => u.searchParams.has("sinceTime"));
  const logLines = page.locator(".log-window .log-line");
  const lastLine = async () => (await logLines.last().textContent()) ?? "";
  const state = page.locator('.log-toolbar [role="status"]');
  const download = async () => {
    const [file] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download" }).click()]);
    return readFile(await file.path(), "utf8");
  };

  // A pod's log: its streams end every 2 to 4 s; each time the view reads on from its newest
  // line, and new lines keep coming.
  await page.goto(`${server.origin}/#/ns/${ns.name}/pods/solo/logs`);
  await eventually("the pod's log", async () => numberOf(await lastLine()) > 0, { timeoutMs: 30_000 });
  const before = numberOf(await lastLine());
  await eventually("the log opened again twice", async () => resumed().length >= 2, { timeoutMs: 60_000 });
  const since = resumed()[0];
  assert.equal(since.searchParams.get("tailLines"), null, "opened again: every line since, none cut");
  assert.equal(since.searchParams.get("timestamps"), "true");
  await eventually("lines after the streams ended", async () => numberOf(await lastLine()) > before + 6, { timeoutMs: 30_000 });
  assert.doesNotMatch(await lastLine(), /^\d{4}-\d\d-\d\dT/, "timestamps are not shown unless asked for");
  await b.screenshot("pod-log-resumed");
  let saved = numbersByPod(await download());
  assert.equal(saved.size, 1);
  assertWhole(saved, "the pod's log");
  assert.ok(saved.get("").at(-1) > before + 6, `lines from after the ends: ${saved.get("").at(-1)}`);

  // Paused, an ended stream is not opened again until the person follows again; then it
  // reads on from where it was.
  await page.getByRole("button", { name: "Pause" }).click();
  await eventually("the stream ended while paused", async () => (await state.getAttribute("data-state")) === "paused", { timeoutMs: 30_000 });
  const whilePaused = logRequests.length;
  await b.screenshot("pod-log-paused-ended");
  await page.getByRole("button", { name: "Follow" }).click();
  await eventually("opened again once followed", async () => logRequests.length > whilePaused, { timeoutMs: 30_000 });
  const followedAt = numberOf(await lastLine());
  await eventually("new lines once followed", async () => numberOf(await lastLine()) > followedAt + 2, { timeoutMs: 30_000 });
  saved = numbersByPod(await download());
  assertWhole(saved, "the pod's log, paused and followed again");

  // The pod deleted: once its stream ends, the log is asked for once more, is not found, and
  // that is the end of it (kwok's streams outlive their pods; a kubelet's would end, with
  // the server's `ended` event).
  await kubectl(["delete", "pod", "solo", "-n", ns.name, "--wait=false"]);
  await eventually("the deleted pod's log not found", async () => (await state.getAttribute("data-state")) === "failed", { timeoutMs: 60_000 });
  assert.match(await state.textContent(), /Not found/);
  const soloRequests = () => logRequests.filter((u) => u.pathname.endsWith("/pods/solo/logs")).length;
  const soloAtEnd = soloRequests();
  await b.screenshot("pod-log-deleted");

  // A Deployment's merged log: each pod's lines whole across the ends.
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments/api/logs`);
  const pods = async () => new Set((await page.locator(".log-window .log-pod").allTextContents()).map((t) => t.split("/")[0]));
  await eventually("lines from both pods", async () => (await pods()).size === 2, { timeoutMs: 30_000 });
  const merged = () => resumed().filter((u) => u.pathname.endsWith("/deployments/api/logs"));
  await eventually("the merged log opened again twice", async () => merged().length >= 2, { timeoutMs: 60_000 });
  const mergedBefore = numberOf(await lastLine());
  await eventually("merged lines after the ends", async () => numberOf(await lastLine()) > mergedBefore + 4, { timeoutMs: 30_000 });
  await b.screenshot("deployment-log-resumed");
  saved = numbersByPod(await download());
  assert.equal(saved.size, 2, `two pods: ${[...saved.keys()]}`);
  assertWhole(saved, "the Deployment's log, pod");
  for (const [pod, numbers] of saved) assert.ok(numbers.at(-1) > mergedBefore, `${pod}'s lines from after the ends: ${numbers.at(-1)}`);
  // Leaving the page ends the log: nothing more is asked for.
  await page.goto(`${server.origin}/#/ns/${ns.name}/ingresses`);
  const leftAt = logRequests.length;

  // Counts in words, singular for one.
  await page.locator(LIST_COUNT).filter({ hasText: /^1 Ingress$/ }).waitFor({ timeout: 30_000 });
  await page.goto(`${server.origin}/#/ns/${ns.name}/pods`);
  await page.locator(LIST_COUNT).filter({ hasText: /^3 Pods$/ }).waitFor({ timeout: 60_000 });
  await page.goto(`${server.origin}/#/ns/${ns.name}/replicasets`);
  await page.locator(LIST_COUNT).filter({ hasText: /^2 ReplicaSets$/ }).waitFor({ timeout: 30_000 });
  // A kind with no create form has none, and no stray text where it would be.
  assert.doesNotMatch(await page.locator("main").innerText(), /\bnull\b/);
  await b.screenshot("counts");

  // A missing pod's page says so, with nothing to delete.
  await page.goto(`${server.origin}/#/ns/${ns.name}/pods/none-such`);
  await page.getByText("Not found.").waitFor({ timeout: 30_000 });
  assert.ok(await page.getByRole("button", { name: "Delete…" }).isDisabled(), "Delete is disabled for a missing pod");
  await b.screenshot("pod-missing");
  assert.equal(logRequests.length, leftAt, "no log asked for once the page was left");
  assert.equal(soloRequests(), soloAtEnd, "a deleted pod's log is not asked for again and again");
  b.check();
});
