// The dashboard's create forms (POST /deployments|services|ingresses/{name}), driven in headless
// Chromium against a real k8sailor and the real control plane: each kind's form on its table
// page, the new object appearing in the live table without a reload, what reaches the
// apiserver, and the server's 400 reason shown in words for a name it refuses.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { kubectl, testNamespace } from "../lib/cluster.mjs";
import { eventually, repoRoot, startK8sailor } from "../lib/servers.mjs";

const row = (page, namespace, name) => page.locator(`tr[data-key="${namespace}/${name}"]`);

/** Opens the kind's create form on its table page and submits `values` (input name → text). */
async function create(page, kind, values) {
  const title = `Create ${/^[AEIOU]/.test(kind) ? "an" : "a"} ${kind}`;
  const form = page.getByRole("form", { name: title });
  if (!(await form.isVisible())) await page.getByText(title, { exact: true }).click();
  for (const [name, value] of Object.entries(values)) await form.locator(`input[name="${name}"]`).fill(value);
  await form.getByRole("button", { name: "Create" }).click();
}

const outcome = (page) => page.locator("details.create [role=status]");

test("dashboard-create: a form per kind, the new object in the live table, the server's reason", async (t) => {
  const ns = await testNamespace("dash-create");
  t.after(() => ns.remove());
  const server = await startK8sailor({ logFile: path.join(repoRoot, "target", "browser", "dashboard-create.k8sailor.log") });
  t.after(() => server.stop());
  const b = await openBrowser({
    scenario: "dashboard-create",
    allowedOrigins: [server.origin],
    tolerateMatching: [{ pattern: /\/deployments\/Bad_Name\?/, reason: "the name the test types, whose 400 the page shows" }],
  });
  t.after(() => b.close());
  const { page } = b;

  await page.goto(`${server.origin}/#/ns/${ns.name}/deployments`);
  await page.evaluate(() => (window.__sameDocument = true));
  await create(page, "Deployment", { name: "shop", image: "registry.invalid/k8sailor/shop:1.0", replicas: "2" });
  await row(page, ns.name, "shop").waitFor({ timeout: 30_000 });
  await eventually("the page says it is created", async () => (await outcome(page).textContent()) === "Deployment shop created");
  const made = JSON.parse(await kubectl(["get", "deployment", "shop", "-n", ns.name, "-o", "json"]));
  assert.equal(made.spec.replicas, 2, "the replicas reached the apiserver");
  assert.equal(made.spec.template.spec.containers[0].image, "registry.invalid/k8sailor/shop:1.0");

  // A name the server refuses: its reason, in words, under the form; nothing added.
  await create(page, "Deployment", { name: "Bad_Name" });
  await eventually("the refusal shown", async () => /^Not created: .*Bad_Name/.test(await outcome(page).textContent()));
  assert.equal(await outcome(page).getAttribute("class"), "error");
  assert.equal(await page.locator("tr.row").count(), 1, "only shop is listed");
  await b.screenshot("deployment-refused");

  await page.goto(`${server.origin}/#/ns/${ns.name}/services`);
  await create(page, "Service", { name: "shop", services: "80:8080" });
  await row(page, ns.name, "shop").waitFor({ timeout: 30_000 });
  const service = JSON.parse(await kubectl(["get", "service", "shop", "-n", ns.name, "-o", "json"]));
  assert.deepEqual(service.spec.ports.map((p) => [p.port, p.targetPort]), [[80, 8080]]);
  await b.screenshot("service-created");

  await page.goto(`${server.origin}/#/ns/${ns.name}/ingresses`);
  await create(page, "Ingress", { name: "shop", endpoints: "http://shop.example.com/?backend=shop:80" });
  await row(page, ns.name, "shop").waitFor({ timeout: 30_000 });
  const ingress = JSON.parse(await kubectl(["get", "ingress", "shop", "-n", ns.name, "-o", "json"]));
  assert.equal(ingress.spec.rules[0].host, "shop.example.com");
  await b.screenshot("ingress-created");
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page reloaded");

  await b.check();
});
