// k8sailor's built-in dashboard (served by the binary at /), driven in headless Chromium against a
// real k8sailor and the real control plane: live tables that follow changes made elsewhere
// without a reload, scaling and deletion from the page, the server's selector errors, a pod's
// events and YAML, delegated auth with a namespace-scoped token, and 10,000 pods in one
// namespace (figures in target/browser/dashboard-10k/result.json). Any console error or
// request to another host fails a test (the harness).
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { apply, deploymentsSettled, kubectl, namespacedToken, testNamespace } from "../lib/cluster.mjs";
import { eventually, proxyUnderPath, replicaBalancer, repoRoot, startK8sailor } from "../lib/servers.mjs";

const logFile = (scenario) => path.join(repoRoot, "target", "browser", `${scenario}.k8sailor.log`);

function deployment(namespace, name, replicas, labels = {}) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace, labels: { app: name, ...labels } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name, ...labels } },
        spec: { containers: [{ name: "app", image: `registry.invalid/k8sailor/${name}:1.0` }] },
      },
    },
  };
}

/** The count a live table shows (its `data-count`), as a number; NaN while loading. */
async function shownCount(page, selector) {
  return Number(await page.locator(selector).getAttribute("data-count", { timeout: 1000 }));
}

async function waitForCount(page, selector, n, what) {
  await eventually(`${what}: ${n}`, async () => (await shownCount(page, selector)) === n, { timeoutMs: 60_000 });
}

/** Every API call to `server`, as a pattern for the harness's `tolerateMatching`. */
const apiCalls = (server) => new RegExp(`^${server.api.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/`);

const LIST_COUNT = "main .toolbar .count";
const row = (page, namespace, name) => page.locator(`tr[data-key="${namespace}/${name}"]`);

test("dashboard: live tables, scaling, filters, a pod's events and YAML, deletion", async (t) => {
  const ns = await testNamespace("dash");
  t.after(() => ns.remove());
  await apply([deployment(ns.name, "seed", 1, { role: "test" })]);
  const server = await startK8sailor({ logFile: logFile("dashboard") });
  t.after(() => server.stop());
  const b = await openBrowser({
    scenario: "dashboard",
    allowedOrigins: [server.origin],
    tolerateMatching: [
      { pattern: /labelSelector=app\+in\+%28web&/, reason: "the wrong selector the test types, whose 400 the page shows" },
      { pattern: /\/deployments\/web\/(pods|services|ingresses)\?/, reason: "what the page of the deleted Deployment asks of it (404)" },
    ],
  });
  t.after(() => b.close());
  const { page } = b;

  // Pick the namespace: the picker lists it from the Deployments the server has.
  await page.goto(`${server.origin}/`);
  await eventually("the namespace in the picker", async () => (await page.locator(`#namespace option[value="${ns.name}"]`).count()) === 1);
  await page.selectOption("#namespace", ns.name);
  await eventually("the namespace's route", async () => page.url().endsWith(`#/ns/${ns.name}/deployments`));
  await row(page, ns.name, "seed").waitFor();
  await eventually("the live badge", async () => (await page.locator("#connection").getAttribute("data-state")) === "live");

  // A Deployment created elsewhere appears without a reload.
  await page.evaluate(() => (window.__sameDocument = true));
  await apply([deployment(ns.name, "web", 1, { role: "test" })]);
  await row(page, ns.name, "web").waitFor({ timeout: 30_000 });
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page reloaded");
  await waitForCount(page, LIST_COUNT, 2, "Deployments shown");
  await b.screenshot("deployments");

  // Scale from the Deployment's page: the pod rows follow.
  await row(page, ns.name, "web").getByRole("link", { name: "web" }).click();
  await eventually("the Deployment's page", async () => page.url().endsWith(`#/ns/${ns.name}/deployments/web`));
  await waitForCount(page, "h2 .count", 1, "pods of web");
  await page.fill("#replicas", "3");
  await page.getByRole("button", { name: "Scale" }).click();
  await waitForCount(page, "h2 .count", 3, "pods of web after scaling up");
  assert.equal(await page.locator("table").first().locator("tr.row").count(), 3);
  const spec = JSON.parse(await kubectl(["get", "deployment", "web", "-n", ns.name, "-o", "json"]));
  assert.equal(spec.spec.replicas, 3, "the scale reached the apiserver");
  await b.screenshot("deployment-scaled");
  await page.fill("#replicas", "2");
  await page.getByRole("button", { name: "Scale" }).click();
  await waitForCount(page, "h2 .count", 2, "pods of web after scaling down");

  // What routes to it: a Service that selects its pods and an Ingress to that Service, made
  // while the page is open.
  await apply([
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web", namespace: ns.name },
      spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: 8080 }] },
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name: "web", namespace: ns.name },
      spec: {
        rules: [{ host: "web.example", http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "web", port: { number: 80 } } } }] } }],
      },
    },
  ]);
  await page.locator('[aria-label="Services that select its pods"] tr.row').filter({ hasText: "80/TCP" }).waitFor({ timeout: 30_000 });
  await page.locator('[aria-label="Ingresses to those Services"] tr.row').filter({ hasText: "web.example/ → web:80" }).waitFor({ timeout: 30_000 });
  await b.screenshot("deployment-routes");

  // Filters go to the server; a wrong selector shows the server's reason inline.
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments`);
  await waitForCount(page, LIST_COUNT, 2, "Deployments shown");
  await page.fill('input[name="labelSelector"]', "app=web");
  await page.keyboard.press("Enter");
  await eventually("the selector in the route", async () => page.url().includes("labelSelector=app%3Dweb"));
  await waitForCount(page, LIST_COUNT, 1, "Deployments matching app=web");
  assert.equal(await row(page, ns.name, "seed").count(), 0);
  const bad = "app in (web";
  const expected = await fetch(`${server.api}/deployments?namespace=${ns.name}&labelSelector=${encodeURIComponent(bad)}`).then(async (r) => {
    assert.equal(r.status, 400);
    return (await r.json()).error;
  });
  await page.fill('input[name="labelSelector"]', bad);
  await page.getByRole("button", { name: "Filter" }).click();
  const error = page.locator("main .error");
  await error.waitFor();
  assert.ok((await error.textContent()).includes(expected), `the page shows the server's reason ${expected}`);
  await b.screenshot("selector-error");

  // A pod's events (newest first) and YAML.
  const pods = JSON.parse(await kubectl(["get", "pods", "-n", ns.name, "-l", "app=web", "-o", "json"])).items;
  const pod = pods[0].metadata;
  const at = (s) => new Date(Date.now() - s * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  const event = (suffix, reason, message, ago, type = "Normal") => ({
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${pod.name}.${suffix}`, namespace: ns.name },
    involvedObject: { apiVersion: "v1", kind: "Pod", name: pod.name, namespace: ns.name, uid: pod.uid },
    reason,
    message,
    type,
    source: { component: "default-scheduler" },
    firstTimestamp: at(ago),
    lastTimestamp: at(ago),
    count: 1,
  });
  await apply([
    event("old", "Scheduled", `Successfully assigned ${ns.name}/${pod.name} to node-a`, 120),
    event("new", "FailedScheduling", "0/0 nodes are available: no nodes to schedule on", 5, "Warning"),
  ]);
  await page.goto(`${server.origin}/#/ns/${ns.name}/pods`);
  await row(page, ns.name, pod.name).getByRole("link").click();
  await eventually("the pod's page", async () => page.url().endsWith(`#/ns/${ns.name}/pods/${pod.name}`));
  const eventRows = page.locator('[aria-label="Events, newest first"] tr.row');
  await eventually("two events", async () => (await eventRows.count()) === 2);
  assert.match(await eventRows.nth(0).textContent(), /FailedScheduling/, "newest first");
  assert.match(await eventRows.nth(1).textContent(), /Scheduled/);
  assert.ok((await page.locator('[aria-label="Labels"]').textContent()).includes("role=test"));
  await b.screenshot("pod-events");
  await page.getByRole("link", { name: "YAML" }).click();
  const yaml = page.locator("pre.yaml");
  await yaml.waitFor();
  const text = await yaml.textContent();
  assert.match(text, /^kind: Pod$/m);
  assert.ok(text.includes(`name: ${pod.name}`));
  await b.screenshot("pod-yaml");

  // A pod's deletion asks first, as a Deployment's does; its row leaves the pods' table. (From
  // its overview: an open YAML tab would read the pod again while it goes, and get a 404.)
  await page.goto(`${server.origin}/#/ns/${ns.name}/pods/${pod.name}`);
  await eventually("the pod's events", async () => (await eventRows.count()) === 2);
  await page.getByRole("button", { name: "Delete…" }).click();
  await page.locator("#confirm-dialog").waitFor();
  await page.locator("#confirm-yes").click();
  await eventually("the pods list", async () => page.url().endsWith(`#/ns/${ns.name}/pods`));
  await eventually("the deleted pod's row gone, the others there", async () =>
    (await row(page, ns.name, pod.name).count()) === 0 && (await page.locator("main tr.row").count()) > 0,
  { timeoutMs: 60_000 });
  await kubectl(["get", "pod", pod.name, "-n", ns.name]).then(
    () => assert.fail(`the pod ${pod.name} is still in the apiserver`),
    () => {},
  );
  await b.screenshot("pod-deleted");

  // Deletion asks first; Escape closes the question and keeps the Deployment.
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments/web`);
  await page.getByRole("button", { name: "Delete…" }).click();
  const dialog = page.locator("#confirm-dialog");
  await dialog.waitFor();
  await b.screenshot("delete-confirmation");
  await page.keyboard.press("Escape");
  await eventually("the dialog closed", async () => !(await dialog.isVisible()));
  await kubectl(["get", "deployment", "web", "-n", ns.name]);
  await page.getByRole("button", { name: "Delete…" }).click();
  await page.locator("#confirm-yes").click();
  await eventually("the Deployments list", async () => page.url().endsWith(`#/ns/${ns.name}/deployments`));
  await waitForCount(page, LIST_COUNT, 1, "Deployments after the delete");
  await eventually("the Deployment gone from the apiserver", async () =>
    kubectl(["get", "deployment", "web", "-n", ns.name]).then(() => false, () => true),
  );

  // The page of a Deployment that is not there offers nothing to scale or delete.
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments/web`);
  await page.getByText("Not found.").waitFor();
  assert.match(await page.locator('main [role="alert"]').first().textContent(), /web is not in/);
  for (const name of ["Scale", "Delete…"]) {
    assert.ok(await page.getByRole("button", { name }).isDisabled(), `${name} is disabled for a missing Deployment`);
  }
  assert.ok(await page.locator("#replicas").isDisabled(), "the replicas field is disabled for a missing Deployment");
  await b.screenshot("deployment-missing");
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments`);

  // Keyboard: on a fresh load the first Tab reaches the skip link.
  await page.reload();
  await row(page, ns.name, "seed").waitFor();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "Skip to content");

  // Dark, and a phone's width without sideways scrolling.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments/seed`);
  await waitForCount(page, "h2 .count", 1, "pods of seed");
  await b.screenshot("dark");
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments`);
  await row(page, ns.name, "seed").waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone`);
  await b.screenshot("narrow-dark");
  b.check();
});

test("dashboard under --auth delegated: a token asked once, what its user may see, 401/403 in words", async (t) => {
  const ns = await testNamespace("dash-auth");
  t.after(() => ns.remove());
  await apply([deployment(ns.name, "shop", 2)]);
  const token = await namespacedToken(ns.name, "viewer", [
    { apiGroups: ["apps"], resources: ["deployments", "replicasets"], verbs: ["get", "list", "watch"] },
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    { apiGroups: [""], resources: ["events"], verbs: ["list"] },
  ]);
  const server = await startK8sailor({ logFile: logFile("dashboard-delegated"), args: ["--auth", "delegated"] });
  t.after(() => server.stop());
  const b = await openBrowser({
    scenario: "dashboard-delegated",
    allowedOrigins: [server.origin],
    tolerateMatching: [
      { pattern: apiCalls(server), reason: "401 before the token and 403 outside its namespace, explained on the page" },
    ],
  });
  t.after(() => b.close());
  const { page } = b;

  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments`);
  const banner = page.locator("#banner");
  await banner.waitFor();
  assert.match(await banner.textContent(), /Not signed in: .*bearer token/);
  await b.screenshot("needs-token");
  await banner.getByRole("button", { name: "Enter a token" }).click();
  await page.fill("#token-input", token);
  await page.keyboard.press("Enter");
  await row(page, ns.name, "shop").waitFor({ timeout: 30_000 });
  assert.equal(await banner.isVisible(), false);
  await b.screenshot("signed-in");

  // Elsewhere: a 403 explained, with the apiserver's reason.
  await page.goto(`${server.origin}/#/ns/default/deployments`);
  const error = page.locator("main .error");
  await error.waitFor();
  const said = await error.textContent();
  assert.match(said, /^Not allowed: the cluster's RBAC/);
  assert.ok(said.includes(`system:serviceaccount:${ns.name}:viewer`), said);
  await b.screenshot("forbidden");

  // All namespaces: only its own, said so.
  await page.goto(`${server.origin}/#/deployments`);
  await row(page, ns.name, "shop").waitFor();
  await page.getByText("Only the namespaces your token may read are shown.").waitFor();
  assert.deepEqual(
    await page.locator("tr.row").evaluateAll((rows) => [...new Set(rows.map((r) => r.dataset.key.split("/")[0]))]),
    [ns.name],
  );

  // The token stays in the tab: in session storage, in no URL.
  assert.equal(await page.evaluate(() => sessionStorage.getItem("k8sailor.token")), token);
  const leaked = b.requests.filter((r) => r.url.includes(token));
  assert.deepEqual(leaked, [], "the token went into a URL");
  b.check();
});

// bench/run asks for fewer at its smoke scale (K8SAILOR_DASHBOARD_PODS, a multiple of 10).
const BIG = Number(process.env.K8SAILOR_DASHBOARD_PODS || 10_000);
const CHUNK = BIG / 10;

/** `n` bare pods in `namespace`, labelled batch=b0.. by tenths; they stay Pending. */
async function createPods(namespace, n) {
  const chunks = [];
  for (let c = 0; c * CHUNK < n; c++) {
    const items = [];
    for (let i = 0; i < CHUNK && c * CHUNK + i < n; i++) {
      items.push({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `load-${c}-${String(i).padStart(4, "0")}`, labels: { app: "load", batch: `b${c}` } },
        spec: { containers: [{ name: "app", image: "registry.invalid/k8sailor/load:0" }] },
      });
    }
    chunks.push({ apiVersion: "v1", kind: "List", items });
  }
  // kubectl create sends one POST per object; a few at a time keep the apiserver busy.
  const queue = [...chunks];
  const worker = async () => {
    for (let chunk = queue.shift(); chunk; chunk = queue.shift()) {
      await kubectl(["create", "-n", namespace, "-f", "-"], { input: JSON.stringify(chunk) });
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
}

test("dashboard: 10,000 pods in one namespace render windowed and follow a burst of deletes", async (t) => {
  const ns = await testNamespace("dash-10k");
  t.after(() => ns.remove());
  const started = Date.now();
  await createPods(ns.name, BIG);
  const createMs = Date.now() - started;
  const server = await startK8sailor({ logFile: logFile("dashboard-10k") });
  t.after(() => server.stop());
  await eventually(`${BIG} pods in k8sailor's cache`, async () => {
    const res = await fetch(`${server.api}/pods?namespace=${ns.name}&limit=1`).then((r) => r.json());
    return res.data.length + (res.metadata.remainingItemCount ?? 0) === BIG;
  });
  const b = await openBrowser({ scenario: "dashboard-10k", allowedOrigins: [server.origin] });
  t.after(() => b.close());
  const { page } = b;
  // Long tasks (50 ms or more on the main thread) as the browser reports them; the longest
  // that started in a window (entries arrive late: a task before the window may be reported in it).
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push(e);
    }).observe({ entryTypes: ["longtask"] });
  });
  await page.goto(`${server.origin}/#/deployments`);
  await page.locator("#connection[data-state=live]").waitFor();

  // From the route change to 10,000 pods counted and the first rows drawn.
  const first = await page.evaluate(async ({ hash, n, countAt }) => {
    const t0 = performance.now();
    location.hash = hash;
    await new Promise((resolve) => {
      const check = () => {
        const c = document.querySelector(countAt);
        if (c && c.dataset.count === String(n) && document.querySelector("tr.row")) resolve();
        else requestAnimationFrame(check);
      };
      check();
    });
    const ms = performance.now() - t0;
    // Let the observer deliver what it has.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const longest = Math.max(0, ...window.__longTasks.filter((e) => e.startTime >= t0 && e.startTime <= t0 + ms).map((e) => e.duration));
    return { ms, longestTaskMs: longest, rowsInDom: document.querySelectorAll("tr.row").length };
  }, { hash: `#/ns/${ns.name}/pods`, n: BIG, countAt: LIST_COUNT });
  assert.ok(first.rowsInDom < 200, `${first.rowsInDom} rows drawn: the table is not windowed`);
  await b.screenshot("10k-pods");

  // The last rows are reachable by scrolling, and drawn when in view.
  const lastName = `load-${BIG / CHUNK - 1}-${String(CHUNK - 1).padStart(4, "0")}`;
  const scroll = await page.locator(".scroller").evaluate(async (el, key) => {
    const t0 = performance.now();
    el.scrollTop = el.scrollHeight;
    await new Promise((resolve) => {
      const check = () => (document.querySelector(`tr[data-key="${key}"]`) ? resolve() : requestAnimationFrame(check));
      check();
    });
    const ms = performance.now() - t0;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const longest = Math.max(0, ...window.__longTasks.filter((e) => e.startTime >= t0 && e.startTime <= t0 + ms).map((e) => e.duration));
    return { ms, longestTaskMs: longest };
  }, `${ns.name}/${lastName}`);
  await b.screenshot("10k-pods-scrolled");

  // A burst: one request deletes a tenth of the pods (a thousand), as many DELETED events.
  const applied = page.evaluate(async ({ n, countAt }) => {
    const t0 = performance.now();
    await new Promise((resolve) => {
      const check = () => (document.querySelector(countAt)?.dataset.count === String(n) ? resolve() : requestAnimationFrame(check));
      check();
    });
    const at = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const longest = Math.max(0, ...window.__longTasks.filter((e) => e.startTime >= t0 && e.startTime <= at).map((e) => e.duration));
    return { at: performance.timeOrigin + at, longestTaskMs: longest };
  }, { n: BIG - CHUNK, countAt: LIST_COUNT });
  const sent = Date.now();
  await kubectl(["delete", "--raw", `/api/v1/namespaces/${ns.name}/pods?labelSelector=batch%3Db3`]);
  const deleteAnsweredMs = Date.now() - sent;
  const burst = await applied;
  // Scrolled to the end, the end stays in view as rows above it go.
  assert.equal(await row(page, ns.name, lastName).count(), 1, "the last row left the view");
  assert.ok((await page.locator("tr.row").count()) > 20, "rows in view were not drawn");

  const result = {
    pods: BIG,
    createPodsMs: createMs,
    firstRender: { ms: Math.round(first.ms), longestTaskMs: first.longestTaskMs, rowsInDom: first.rowsInDom },
    scrollToTheEnd: { ms: Math.round(scroll.ms), longestTaskMs: scroll.longestTaskMs },
    burstOfDeletes: {
      deleted: CHUNK,
      shownMsAfterRequest: Math.round(burst.at - sent),
      apiserverAnsweredMs: deleteAnsweredMs,
      longestTaskMs: burst.longestTaskMs,
    },
  };
  await writeFile(path.join(b.shotDir, "result.json"), `${JSON.stringify(result, null, 2)}\n`);
  console.log(JSON.stringify(result));
  // How long each step took and the longest task in it are figures, not checks: bench/run
  // reports them from this result.json (BENCHMARKS.md, "Dashboard" section).
  b.check();
});

/**
 * What a kubelet would write for `pod`: running and ready, or (for `crashing`) a container
 * restarting in CrashLoopBackOff. The local control plane has no nodes, so the test writes it
 * through the status subresource.
 */
function kubeletStatus(pod, index, { crashing }) {
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const ip = `10.244.${index % 3}.${10 + index}`;
  const ready = !crashing;
  const condition = (type, status) => ({ type, status: status ? "True" : "False", lastTransitionTime: now });
  return {
    status: {
      phase: "Running",
      podIP: ip,
      podIPs: [{ ip }],
      hostIP: `172.18.0.${2 + (index % 3)}`,
      startTime: now,
      conditions: [condition("PodScheduled", true), condition("Initialized", true), condition("ContainersReady", ready), condition("Ready", ready)],
      containerStatuses: pod.spec.containers.map((c) => ({
        name: c.name,
        image: c.image,
        imageID: "",
        ready,
        started: ready,
        restartCount: crashing ? 7 : 0,
        state: crashing
          ? { waiting: { reason: "CrashLoopBackOff", message: `back-off 5m0s restarting failed container=${c.name}` } }
          : { running: { startedAt: now } },
        ...(crashing ? { lastState: { terminated: { exitCode: 1, reason: "Error", startedAt: now, finishedAt: now } } } : {}),
      })),
    },
  };
}

test("dashboard: the demo workloads of hack/run", async (t) => {
  // The namespaces and Deployments hack/run seeds, applied as it applies them, and removed
  // after (their pods would otherwise show in every later test's cluster-wide lists).
  const demo = path.join(repoRoot, "hack", "demo.yaml");
  await kubectl(["apply", "-f", demo]);
  t.after(() => kubectl(["delete", "-f", demo, "--ignore-not-found", "--wait=false"]));
  const namespaces = ["shop", "payments", "monitoring"];
  // Every replica of the demo's ReplicaSets made (the bare pods exist once applied).
  const pods = await eventually(
    "every pod of the demo's ReplicaSets",
    async () => {
      const items = [];
      let replicas = 0;
      for (const ns of namespaces) {
        items.push(...JSON.parse(await kubectl(["get", "pods", "-n", ns, "-o", "json"])).items);
        const replicasets = JSON.parse(await kubectl(["get", "replicasets", "-n", ns, "-o", "json"])).items;
        replicas += replicasets.reduce((sum, rs) => sum + (rs.spec.replicas ?? 1), 0);
      }
      const live = items.filter((p) => !p.metadata.deletionTimestamp);
      const owned = live.filter((p) => (p.metadata.ownerReferences ?? []).length > 0);
      return owned.length === replicas ? live : null;
    },
    { timeoutMs: 60_000 },
  );
  const crashing = pods.filter((p) => p.metadata.labels.app === "fraud-check").length;
  pods.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const [i, pod] of pods.entries()) {
    const status = kubeletStatus(pod, i, { crashing: pod.metadata.labels.app === "fraud-check" });
    await kubectl(["patch", "pod", pod.metadata.name, "-n", pod.metadata.namespace, "--subresource=status", "--type=merge", "-p", JSON.stringify(status)]);
  }
  const server = await startK8sailor({ logFile: logFile("dashboard-demo") });
  t.after(() => server.stop());
  const b = await openBrowser({ scenario: "dashboard-demo", allowedOrigins: [server.origin], viewport: { width: 1280, height: 560 } });
  t.after(() => b.close());
  const { page } = b;
  // The demo's Deployments all have a tier; other tests' namespaces may still be going away.
  await page.goto(`${server.origin}/#/deployments?labelSelector=tier`);
  // The ReplicaSet controller counts the ready pods into the Deployments' status.
  await eventually("frontend 3/3 ready", async () => (await row(page, "shop", "frontend").textContent()).includes("3/3"), { timeoutMs: 60_000 });
  await eventually("ledger 2/2 ready", async () => (await row(page, "payments", "ledger").textContent()).includes("2/2"), { timeoutMs: 60_000 });
  await b.screenshot("deployments");
  await page.goto(`${server.origin}/#/ns/payments/pods`);
  assert.ok(crashing > 0, "the demo has crashing pods to show");
  await eventually("the crashing pods", async () => (await page.locator("td.s-bad").count()) === crashing);
  for (const cell of await page.locator("td.s-bad").allTextContents()) assert.match(cell, /CrashLoopBackOff/);
  await b.screenshot("pods");
  b.check();
});

test("dashboard: says when the server is gone, and comes back on its own", async (t) => {
  const ns = await testNamespace("dash-reconnect");
  t.after(() => ns.remove());
  await apply([deployment(ns.name, "before", 1)]);
  // The page keeps one origin, a Service's: the server behind it is stopped, and another one
  // (on a port of its own: none is reused) takes its place.
  const servers = [await startK8sailor({ logFile: logFile("dashboard-reconnect") })];
  t.after(() => Promise.all(servers.map((s) => s.stop())));
  const targets = [servers[0].origin];
  const service = await replicaBalancer({ targets });
  t.after(() => service.close());
  const b = await openBrowser({
    scenario: "dashboard-reconnect",
    allowedOrigins: [service.origin],
    tolerateMatching: [{ pattern: new RegExp(`^${service.origin}/`), reason: "the server the test stops" }],
  });
  t.after(() => b.close());
  const { page } = b;
  await page.goto(`${service.origin}/#/ns/${ns.name}/deployments`);
  await row(page, ns.name, "before").waitFor();
  const badge = page.locator("#connection");
  await eventually("the live badge", async () => (await badge.getAttribute("data-state")) === "live");

  service.use(null);
  await servers[0].stop();
  await eventually("the disconnected badge", async () => (await badge.getAttribute("data-state")) === "down");
  assert.match(await badge.textContent(), /^disconnected/);
  // The rows shown are what was true when the server went away: dimmed until it is back.
  const table = page.locator("main table").first();
  const rowsOpacity = () => table.locator("tbody").first().evaluate((el) => Number(getComputedStyle(el).opacity));
  await eventually("the table marked stale", async () => (await table.getAttribute("class"))?.split(" ").includes("stale"));
  assert.ok((await rowsOpacity()) < 1, "stale rows are dimmed");
  await b.screenshot("disconnected");
  // A change made while the page cannot hear of it.
  await apply([deployment(ns.name, "during", 1)]);
  await kubectl(["delete", "deployment", "before", "-n", ns.name]);

  servers.push(await startK8sailor({ logFile: logFile("dashboard-reconnect-again") }));
  targets.push(servers[1].origin);
  service.use(1);
  await eventually("the live badge again", async () => (await badge.getAttribute("data-state")) === "live", { timeoutMs: 60_000 });
  await row(page, ns.name, "during").waitFor({ timeout: 30_000 });
  await eventually("the deleted Deployment gone", async () => (await row(page, ns.name, "before").count()) === 0);
  assert.ok(!(await table.getAttribute("class"))?.split(" ").includes("stale"), "live rows are not marked stale");
  assert.equal(await rowsOpacity(), 1, "live rows are not dimmed");
  await b.screenshot("reconnected");

  // Stale data: the server says so in a header of every answer (its e2e tests make it do so by
  // stopping the apiserver, which this shared control plane cannot); here the header is added
  // to its answers on the way, to see the page tell it and take it back.
  const stale = /\/ping$/;
  await page.route(stale, async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, headers: { ...response.headers(), "k8sailor-stale-seconds": "42" } });
  });
  await eventually("the stale badge", async () => (await badge.getAttribute("data-state")) === "stale");
  assert.match(await badge.textContent(), /42 s/);
  await b.screenshot("stale");
  await page.unroute(stale);
  await eventually("the live badge after the stale spell", async () => (await badge.getAttribute("data-state")) === "live");
  b.check();
});

/** Events replica `server` has sent on its watches of `kind` (its /metrics). */
async function watchEventsSent(server, kind) {
  const text = await (await fetch(`${server.origin}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("k8sailor_api_watch_events_total{") && l.includes(`kind="${kind}"`));
  return line ? Number(line.split(" ").pop()) : 0;
}

test("dashboard: a dropped stream resumes on another replica with only what it missed", async (t) => {
  const ns = await testNamespace("dash-resume");
  t.after(() => ns.remove());
  const names = Array.from({ length: 20 }, (_, i) => `d${String(i).padStart(2, "0")}`);
  await apply(names.map((name) => deployment(ns.name, name, 0)));
  // The controller's status writes to the 20 would otherwise be among what replica B sends.
  await deploymentsSettled(ns.name);
  const replicas = [
    await startK8sailor({ logFile: logFile("dashboard-resume-a") }),
    await startK8sailor({ logFile: logFile("dashboard-resume-b") }),
  ];
  t.after(() => Promise.all(replicas.map((r) => r.stop())));
  const service = await replicaBalancer({ targets: replicas.map((r) => r.origin) });
  t.after(() => service.close());
  const b = await openBrowser({
    scenario: "dashboard-resume",
    allowedOrigins: [service.origin],
    tolerateMatching: [{ pattern: new RegExp(`^${service.origin}/`), reason: "the replica the test takes away" }],
  });
  t.after(() => b.close());
  const { page } = b;
  await page.goto(`${service.origin}/#/ns/${ns.name}/deployments`);
  await waitForCount(page, LIST_COUNT, 20, "the Deployments");
  const badge = page.locator("#connection");
  await eventually("the live badge", async () => (await badge.getAttribute("data-state")) === "live");
  // A change after both replicas listed, so the version the page holds is one replica B can
  // resume from: B's history begins at its own list's version, and one held from before it
  // would rightly be 410 (start again), which sends everything.
  await apply([deployment(ns.name, "marker", 0)]);
  await waitForCount(page, LIST_COUNT, 21, "the Deployments with the marker");
  await deploymentsSettled(ns.name);

  // Replica A goes away; while no replica answers, the namespace changes.
  service.use(null);
  await eventually("the disconnected badge", async () => (await badge.getAttribute("data-state")) === "down");
  await apply([deployment(ns.name, "during", 0)]);
  await kubectl(["delete", "deployment", "d00", "-n", ns.name]);
  const onB = `${replicas[1].api}/deployments?namespace=${ns.name}`;
  await eventually("replica B to see the changes", async () => {
    const shown = (await (await fetch(onB)).json()).data.map((d) => d.name);
    return shown.includes("during") && !shown.includes("d00");
  });
  const sentBefore = await watchEventsSent(replicas[1], "Deployment");
  const resumed = page.waitForResponse((r) => r.url().includes("/deployments?") && r.url().includes("resourceVersion="), {
    timeout: 60_000,
  });
  service.use(1);
  const answer = await resumed;
  assert.equal(answer.status(), 200, `the resumed watch: ${answer.url()}`);
  await row(page, ns.name, "during").waitFor({ timeout: 30_000 });
  await eventually("d00 gone", async () => (await row(page, ns.name, "d00").count()) === 0);
  await waitForCount(page, LIST_COUNT, 21, "the Deployments after the changes");
  await eventually("the live badge again", async () => (await badge.getAttribute("data-state")) === "live");
  await b.screenshot("resumed");
  // Only what it missed crossed the wire: a fresh watch would have sent all 21 again.
  const sent = (await watchEventsSent(replicas[1], "Deployment")) - sentBefore;
  assert.ok(sent > 0 && sent < 21, `replica B sent ${sent} Deployment events on the resumed watch`);
  b.check();
});

test("dashboard: a restart after a deletion is recovered at the first answer", async (t) => {
  const ns = await testNamespace("dash-restart");
  t.after(() => ns.remove());
  await apply(["keep", "gone"].map((name) => deployment(ns.name, name, 0)));
  // One origin, a Service's, as in the reconnect test: the restarted server gets a port of
  // its own (none is reused) behind it.
  const servers = [await startK8sailor({ logFile: logFile("dashboard-restart-1") })];
  t.after(() => Promise.all(servers.map((s) => s.stop())));
  const targets = [servers[0].origin];
  const service = await replicaBalancer({ targets });
  t.after(() => service.close());
  const b = await openBrowser({
    scenario: "dashboard-restart",
    allowedOrigins: [service.origin],
    tolerateMatching: [{ pattern: new RegExp(`^${service.origin}/`), reason: "the server the test restarts" }],
  });
  t.after(() => b.close());
  const { page } = b;
  await page.goto(`${service.origin}/#/ns/${ns.name}/deployments`);
  await waitForCount(page, LIST_COUNT, 2, "the Deployments");
  const badge = page.locator("#connection");
  await eventually("the live badge", async () => (await badge.getAttribute("data-state")) === "live");

  // The last change of the kind is a deletion: the newest Deployment left is older than the
  // version the dashboard holds.
  await kubectl(["delete", "deployment", "gone", "-n", ns.name]);
  await waitForCount(page, LIST_COUNT, 1, "the Deployments after the deletion");
  service.use(null);
  await servers[0].stop();
  await eventually("the disconnected badge", async () => (await badge.getAttribute("data-state")) === "down");
  const answers = [];
  page.on("response", (r) => {
    const url = r.url();
    if (url.includes("/deployments?") && url.includes("watch=true")) {
      answers.push(`${r.status()} ${url.includes("resourceVersion=") ? "resumed" : "fresh"}`);
    }
  });
  servers.push(await startK8sailor({ logFile: logFile("dashboard-restart-2") }));
  targets.push(servers[1].origin);
  service.use(1);
  await eventually("the live badge again", async () => (await badge.getAttribute("data-state")) === "live", {
    timeoutMs: 60_000,
  });
  // The first answer of the restarted server brings it back: the resumed watch is served, or
  // told to start again (410) and started again at once; never 503 "newer than this cache".
  assert.ok(["200 resumed", "410 resumed,200 fresh"].includes(answers.join(",")), `watch answers: ${answers}`);
  await apply([deployment(ns.name, "after", 0)]);
  await row(page, ns.name, "after").waitFor({ timeout: 30_000 });
  await waitForCount(page, LIST_COUNT, 2, "the Deployments after the restart");
  await b.screenshot("recovered");
  b.check();
});

test("dashboard: behind an ingress sub-path, every request stays under it", async (t) => {
  const ns = await testNamespace("dash-subpath");
  t.after(() => ns.remove());
  await apply([deployment(ns.name, "api", 1)]);
  const server = await startK8sailor({ logFile: logFile("dashboard-subpath") });
  t.after(() => server.stop());
  const proxy = await proxyUnderPath({ target: server.origin, mount: "/team/" });
  t.after(() => proxy.close());
  // Only the proxy's origin: a request to the server's own would be a foreign origin.
  const b = await openBrowser({ scenario: "dashboard-subpath", allowedOrigins: [proxy.origin] });
  t.after(() => b.close());
  const { page } = b;
  await page.goto(`${proxy.url}#/ns/${ns.name}/deployments`);
  await row(page, ns.name, "api").waitFor();
  await apply([deployment(ns.name, "worker", 1)]);
  await row(page, ns.name, "worker").waitFor({ timeout: 30_000 });
  await row(page, ns.name, "api").getByRole("link", { name: "api" }).click();
  await waitForCount(page, "h2 .count", 1, "pods of api");
  const outside = b.requests.filter((r) => !r.url.startsWith(proxy.url));
  assert.deepEqual(outside, [], "requests outside the sub-path");
  assert.ok(b.requests.some((r) => r.url.startsWith(`${proxy.url}k8sailor/v0/deployments?`)), "the API through the sub-path");
  await b.screenshot("subpath");
  b.check();
});
