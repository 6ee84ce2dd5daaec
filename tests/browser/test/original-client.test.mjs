// The original k8sailor web client (the Vue app of the Go project), already built, driven in
// headless Chromium against a real k8sailor and the real control plane: it must show a waiting
// container's reason and the pod's event, throw no console error, call no other host, and a
// pod delete must answer within a second.
//
// The client is not part of this repository and nothing here builds it: point
// K8SAILOR_ORIGINAL_CLIENT_DIST at its built `dist/` directory (see tests/browser/README.md).
// Its API address is compiled in; the static server rewrites it to the k8sailor this test
// starts, and serves the one stylesheet it loads from a CDN from the same npm release, so the
// page needs no other host.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { apply, kubectl, testNamespace } from "../lib/cluster.mjs";
import { eventually, repoRoot, serveStatic, startK8sailor } from "../lib/servers.mjs";

const DIST = process.env.K8SAILOR_ORIGINAL_CLIENT_DIST;
// What the original client compiled in (webapp/src/apis/httpc.ts and DeploymentDetail.vue).
const ORIGINAL_API = "http://127.0.0.1:8088/k8sailor/v0";
// webapp/index.html; the integrity attribute stays, so Chromium checks the local copy is the
// same file byte for byte.
const BOOTSTRAP_CDN = "https://cdn.jsdelivr.net/npm/bootstrap@5.1.1/dist/css/bootstrap.min.css";
const BOOTSTRAP_LOCAL = "/__k8sailor-test/bootstrap.min.css";
const BOOTSTRAP_FILE = createRequire(import.meta.url).resolve("bootstrap/dist/css/bootstrap.min.css");

const DEPLOYMENT = "pull-fails";
const IMAGE = "registry.invalid/k8sailor/pull-fails:0";

/** Checks that `dist` is a build of the original client: its API address must be in it. */
function checkDist(dist) {
  assert.ok(existsSync(path.join(dist, "index.html")), `${dist}/index.html is missing: is it the client's dist/?`);
  const html = readFileSync(path.join(dist, "index.html"), "utf8");
  assert.ok(html.includes(BOOTSTRAP_CDN), `${dist}/index.html does not load ${BOOTSTRAP_CDN}: not the expected client build`);
  const assets = path.join(dist, "assets");
  const compiledIn = readdirSync(assets)
    .filter((f) => f.endsWith(".js"))
    .some((f) => readFileSync(path.join(assets, f), "utf8").includes(ORIGINAL_API));
  assert.ok(compiledIn, `no script in ${assets} names ${ORIGINAL_API}, so the test could not point the client at its server`);
}

/**
 * A Deployment of two pods whose image cannot be pulled. The local control plane has no nodes,
 * so nothing would ever pull it: the test writes what a kubelet would (a waiting container in
 * the pods' status, through the status subresource, and the kubelet's event about the pull).
 */
async function seedWaitingPods(namespace) {
  await apply([
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: DEPLOYMENT, namespace, labels: { app: DEPLOYMENT } },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: DEPLOYMENT } },
        template: {
          metadata: { labels: { app: DEPLOYMENT } },
          spec: { containers: [{ name: "app", image: IMAGE }] },
        },
      },
    },
  ]);
  const pods = await eventually(
    "the Deployment's two pods",
    async () => {
      const list = JSON.parse(await kubectl(["get", "pods", "-n", namespace, "-l", `app=${DEPLOYMENT}`, "-o", "json"]));
      return list.items.length === 2 ? list.items : null;
    },
    { timeoutMs: 60_000 },
  );
  // Sorted as the client sorts its table. The first pod gets no event, so the client asks for
  // the event of a pod that has none (it reads `data.message` unguarded); the test deletes it.
  pods.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const seeded = [];
  for (const [i, pod] of pods.entries()) {
    const { name, uid } = pod.metadata;
    const status = {
      status: {
        containerStatuses: [
          {
            name: "app",
            image: IMAGE,
            imageID: "",
            ready: false,
            started: false,
            restartCount: 0,
            state: { waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image "${IMAGE}"` } },
          },
        ],
      },
    };
    await kubectl(["patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", JSON.stringify(status)]);
    if (i === 0) {
      seeded.push({ name, message: "" });
      continue;
    }
    const message = `Failed to pull image "${IMAGE}": not found (pod ${name})`;
    await apply([
      {
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: `${name}.pull-failed`, namespace },
        involvedObject: { apiVersion: "v1", kind: "Pod", name, namespace, uid, fieldPath: "spec.containers{app}" },
        reason: "Failed",
        message,
        type: "Warning",
        source: { component: "kubelet" },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    ]);
    seeded.push({ name, message });
  }
  return seeded;
}

const SKIP = DIST ? false : "K8SAILOR_ORIGINAL_CLIENT_DIST is not set (tests/browser/README.md)";

/**
 * k8sailor, the client served from another loopback origin and pointed at it, and a browser
 * on it whose screenshots go to target/browser/<scenario>/; all stopped after the test.
 */
async function openClient(t, scenario) {
  const k8sailor = await startK8sailor({ logFile: path.join(repoRoot, "target", "browser", `${scenario}.k8sailor.log`) });
  t.after(() => k8sailor.stop());
  const web = await serveStatic({
    root: DIST,
    rewrites: [
      [ORIGINAL_API, k8sailor.api],
      [BOOTSTRAP_CDN, BOOTSTRAP_LOCAL],
    ],
    files: { [BOOTSTRAP_LOCAL]: BOOTSTRAP_FILE },
  });
  t.after(() => web.close());
  const b = await openBrowser({
    scenario,
    allowedOrigins: [web.origin, k8sailor.origin],
    // The client's "详细信息" link opens k8sailor's raw JSON in a tab, where Chromium asks
    // k8sailor for an icon it has not got (the original server had none either).
    tolerate: { [`${k8sailor.origin}/favicon.ico`]: "Chromium's icon for a tab of raw JSON" },
  });
  t.after(() => b.close());
  b.page.setDefaultTimeout(20_000);
  return { b, page: b.page, web };
}

/** The page's next answer from k8sailor to `method` on a path ending in `suffix`. */
function nextAnswer(page, method, suffix) {
  return page.waitForResponse((r) => r.request().method() === method && new URL(r.url()).pathname.endsWith(suffix));
}

/** Checks an answer is a 200 with the envelope's `code` 0, and returns its body. */
async function ok(response) {
  const body = await response.json();
  const what = `${response.request().method()} ${new URL(response.url()).pathname}`;
  assert.equal(response.status(), 200, `${what} answered ${response.status()}: ${JSON.stringify(body)}`);
  assert.equal(body.code, 0, `${what} answered code ${body.code}: ${body.error}`);
  return body;
}

/** Runs `steps`; on failure adds a screenshot and what the page did wrong to the error. */
async function recording(b, result, steps) {
  try {
    await steps();
    b.check();
  } catch (err) {
    await b.screenshot("failure").catch(() => {});
    const problems = b.problems();
    if (problems.length > 0 && !err.problems) err.message += `\nand the page misbehaved:\n  ${problems.join("\n  ")}`;
    throw err;
  } finally {
    result.problems = b.problems();
    result.warnings = b.warnings();
    result.screenshots = b.shotDir;
    await writeFile(path.join(b.shotDir, "result.json"), JSON.stringify(result, null, 2) + "\n");
  }
}

test(
  "the original web client shows a waiting container's reason and event, and deletes a pod at once",
  { skip: SKIP, timeout: 240_000 },
  async (t) => {
    checkDist(DIST);
    const ns = await testNamespace("browser-original");
    t.after(() => ns.remove());
    const pods = await seedWaitingPods(ns.name);
    const { b, page, web } = await openClient(t, "original-client");
    const result = { namespace: ns.name, pods: pods.map((p) => p.name) };
    await recording(b, result, async () => {
      // The client's namespace box and its "更新数据" (refresh) link, as a person uses them.
      await page.goto(`${web.origin}/deployments`);
      await page.locator("h3", { hasText: "deployments" }).waitFor();
      await page.locator('input[type="text"]').fill(ns.name);
      await Promise.all([
        page.waitForURL(`**/deployments?namespace=${ns.name}`),
        page.getByRole("button", { name: "更新数据" }).click(),
      ]);
      const row = page.locator("tbody tr").filter({ has: page.locator("a", { hasText: DEPLOYMENT }) });
      const link = row.locator("a", { hasText: DEPLOYMENT });
      await link.waitFor();
      // Total/available/unavailable pods, from the Deployment's status.
      await eventually("the Deployment row to count 2 pods", async () => (await row.innerText()).includes("2/0/2"));
      await b.screenshot("deployments");

      await Promise.all([page.waitForURL(`**/deployments/${DEPLOYMENT}?namespace=${ns.name}`), link.click()]);
      const podRows = page.locator(".pod-container tbody tr");
      for (const pod of pods) {
        const podRow = podRows.filter({ hasText: pod.name });
        // The reason in red where the phase would be, and the event fetched for it (empty for
        // the pod without one, once the client has its answer).
        await podRow.locator("p.color-red", { hasText: "ImagePullBackOff" }).waitFor();
        const event = podRow.locator("label.error");
        await event.waitFor({ state: "attached" });
        // The first row may keep the client's placeholder "等待中" (waiting) beside the answer:
        // Vue 3.2's Suspense leaves its fallback in place there, whatever the server answers.
        assert.equal(await event.innerText(), pod.message, `the event shown for pod ${pod.name}`);
      }
      await b.screenshot("pods-waiting");

      const victim = pods[0].name;
      const answered = nextAnswer(page, "DELETE", `/pods/${victim}`);
      const clicked = Date.now();
      await podRows.filter({ hasText: victim }).getByRole("button", { name: "删除" }).click();
      const response = await answered;
      const clickToAnswerMs = Date.now() - clicked;
      const body = await ok(response);
      result.delete = {
        body,
        clickToAnswerMs,
        // The DELETE alone, from its start to its last byte (the preflight before it excluded).
        requestMs: Math.round(response.request().timing().responseEnd),
      };
      // The times are figures for result.json, not checks: no test asserts a duration.
      assert.equal(body.data, true);
      await podRows.filter({ hasText: victim }).waitFor({ state: "detached" });
      await b.screenshot("pod-deleted");
    });
    t.diagnostic(`result: ${JSON.stringify(result)}`);
  },
);

test(
  "the original web client creates, scales, shows and deletes a Deployment",
  { skip: SKIP, timeout: 240_000 },
  async (t) => {
    checkDist(DIST);
    const ns = await testNamespace("browser-original-writes");
    t.after(() => ns.remove());
    const { b, page, web } = await openClient(t, "original-client-writes");
    const name = "made-in-browser";
    const result = { namespace: ns.name };
    await recording(b, result, async () => {
      await page.goto(`${web.origin}/deployments?namespace=${ns.name}`);
      // The creation panel: a JSON body, so a CORS preflight first.
      await page.getByRole("button", { name: "打开/关闭创建面板" }).click();
      await page.getByLabel("Name", { exact: true }).fill(name);
      await page.getByLabel("Namespace", { exact: true }).fill(ns.name);
      await page.getByLabel("Replicas", { exact: true }).fill("1");
      await page.locator(".edit-box .image input").fill("registry.invalid/k8sailor/web:1");
      const created = nextAnswer(page, "POST", `/deployments/${name}`);
      await page.getByRole("button", { name: "确认创建" }).click();
      const body = await ok(await created);
      assert.equal(body.data.name, name);
      assert.deepEqual(body.data.images, ["registry.invalid/k8sailor/web:1"]);
      const row = page.locator("tbody tr").filter({ has: page.locator("a", { hasText: name }) });
      await row.waitFor();
      await b.screenshot("created");

      // Scaling from the detail page: the pods follow as the control plane makes them.
      await Promise.all([page.waitForURL(`**/deployments/${name}?namespace=${ns.name}`), row.locator("a").click()]);
      const podRows = page.locator(".pod-container tbody tr");
      await eventually("the Deployment's pod", async () => (await podRows.count()) === 1);
      await page.locator(".deployment-container input").fill("3");
      const scaled = nextAnswer(page, "PUT", `/deployments/${name}/replicas`);
      await page.getByRole("button", { name: "设置" }).click();
      assert.equal((await ok(await scaled)).data, true);
      await eventually("three pods after scaling", async () => (await podRows.count()) === 3, { timeoutMs: 60_000 });
      await b.screenshot("scaled");

      // Raw output opens in a new tab, straight from k8sailor.
      const [tab] = await Promise.all([
        b.context.waitForEvent("page"),
        podRows.first().getByRole("link", { name: "详细信息" }).click(),
      ]);
      await tab.waitForLoadState();
      const raw = JSON.parse(await tab.locator("body").innerText());
      assert.equal(raw.kind, "Pod");
      assert.equal(raw.metadata.namespace, ns.name);
      await b.screenshot("raw-output", tab);
      await tab.close();

      await page.goto(`${web.origin}/deployments?namespace=${ns.name}`);
      const deleted = nextAnswer(page, "DELETE", `/deployments/${name}`);
      await row.getByRole("button", { name: "删除" }).click();
      assert.equal((await ok(await deleted)).data, true);
      await row.waitFor({ state: "detached" });
      await b.screenshot("deleted");
    });
  },
);
