// The control plane a browser test runs against (K8SAILOR_TEST_KUBECONFIG, set by
// hack/browser-test) and the objects a scenario puts into it, through kubectl.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";

/** The kubeconfig of the control plane the tests use; hack/browser-test sets it. */
export function kubeconfig() {
  const kc = process.env.K8SAILOR_TEST_KUBECONFIG;
  if (!kc) throw new Error("K8SAILOR_TEST_KUBECONFIG is not set: run the browser tests with hack/browser-test");
  return kc;
}

/** Runs kubectl (from PATH, as `hack/cluster env` sets it) against the test control plane. */
export function kubectl(args, { input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn("kubectl", ["--kubeconfig", kubeconfig(), ...args], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`kubectl ${args.join(" ")} failed (${code}): ${err.trim()}`));
    });
    child.stdin.end(input ?? "");
  });
}

/** Applies `objects` (plain Kubernetes objects) with kubectl and returns what it printed. */
export function apply(objects) {
  const list = { apiVersion: "v1", kind: "List", items: objects };
  return kubectl(["apply", "-f", "-"], { input: JSON.stringify(list) });
}

/**
 * Waits until kube-controller-manager is done with every Deployment in `namespace`: its status
 * is for its current generation and its rollout is complete, so no further status write of the
 * controller's is on its way (a test counting changes would count them).
 */
export async function deploymentsSettled(namespace, { timeoutMs = 60_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = JSON.parse(await kubectl(["get", "deployments", "-n", namespace, "-o", "json"]));
    const pending = list.items.filter((d) => {
      const progressing = (d.status?.conditions ?? []).find((c) => c.type === "Progressing");
      return d.status?.observedGeneration !== d.metadata.generation || progressing?.reason !== "NewReplicaSetAvailable";
    });
    if (list.items.length > 0 && pending.length === 0) return;
    if (Date.now() > deadline) {
      throw new Error(`Deployments in ${namespace} not settled after ${timeoutMs} ms: ${pending.map((d) => d.metadata.name).join(", ")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * A namespace of its own for one scenario, `<prefix>-<random>`; `remove()` deletes it without
 * waiting for its objects to go.
 */
export async function testNamespace(prefix) {
  const name = `${prefix}-${randomBytes(3).toString("hex")}`;
  await kubectl(["create", "namespace", name]);
  // Pods need the namespace's default ServiceAccount, which kube-controller-manager makes; the
  // bench's control plane runs without it (bench/run reuses the many-pods scenario).
  await kubectl(["create", "serviceaccount", "default", "-n", name]).catch((e) => {
    if (!/already exists/.test(e.message)) throw e;
  });
  return {
    name,
    remove: () => kubectl(["delete", "namespace", name, "--wait=false"]),
  };
}

/**
 * A ServiceAccount `name` in `namespace` granted `rules` there (a Role and a RoleBinding), and a
 * token for it (`kubectl create token`, a TokenRequest): what a person with access to one
 * namespace holds.
 */
export async function namespacedToken(namespace, name, rules) {
  await apply([
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace }, rules },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name, namespace }],
    },
  ]);
  return (await kubectl(["create", "token", name, "-n", namespace, "--duration=1h"])).trim();
}
