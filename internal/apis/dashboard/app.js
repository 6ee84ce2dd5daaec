// k8sailor's built-in dashboard: hand-written, no framework, no build step. Every table follows
// a `watch=true` stream read with fetch (so the Authorization header goes with it), applies each
// event in place, and when the stream ends resumes it from the last resourceVersion it saw (on
// any replica: only what it missed), or, told that is too old (410), starts again from a fresh
// list+watch. Big tables
// render only the rows in view. Views are hash routes, so each is a link and the server needs
// no route per view; every URL is relative, so the page works under an ingress sub-path.

import { LogWindow, Resume, readEvents, stampedLine } from "./logs.js";

const PREFIX = document.querySelector('meta[name="k8sailor-api-prefix"]').content.replace(/^\/+|\/+$/g, "");
const TOKEN_KEY = "k8sailor.token";
const ROW_HEIGHT = 32;
// Tables up to this many rows are drawn whole, in the page's flow; bigger ones in a scroller
// that draws only what is in view.
const WHOLE_TABLE_ROWS = 200;
const OVERSCAN_ROWS = 10;
const MAX_BACKOFF_MS = 30_000;
const PING_EVERY_MS = 10_000;
const REDRAW_EVERY_MS = 100;

// ---------------------------------------------------------------------------------------------
// The API

class ApiFailure extends Error {
  constructor(status, reason) {
    super(explain(status, reason));
    this.status = status;
    this.reason = reason;
  }
}

/** A failure in words a person can act on; the server's own reason always follows. */
function explain(status, reason) {
  switch (status) {
    case 0:
      return `The server cannot be reached: ${reason}`;
    case 401:
      return `Not signed in: this server checks every call with the cluster (--auth delegated) and needs a valid bearer token. Use the Token button. The server said: ${reason}`;
    case 403:
      return `Not allowed: the cluster's RBAC does not let your token's user do this. The server said: ${reason}`;
    case 404:
      return `Not found: ${reason}`;
    case 503:
      return `The server is not ready: ${reason}`;
    default:
      return reason;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function headers(accept) {
  const h = { Accept: accept };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** `path` under the API prefix, relative to the page. */
function apiUrl(path, params = {}) {
  const relative = PREFIX ? `${PREFIX}${path}` : path.replace(/^\//, "");
  const url = new URL(relative, document.baseURI);
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  return url;
}

async function failureOf(res) {
  const text = await res.text().catch(() => "");
  let reason = text || res.statusText;
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === "string" && body.error) reason = body.error;
  } catch {
    // Not the envelope (a proxy's page): the text is the reason.
  }
  return new ApiFailure(res.status, reason);
}

/**
 * One call; resolves to the envelope's `data`, or the text when `text` is set. `body` is sent
 * as JSON. A call made in the background (`background`) does not set the badge: the ping does
 * that.
 */
async function api(path, params = {}, { method = "GET", text = false, signal, background = false, body } = {}) {
  let res;
  try {
    const sent = headers(text ? "*/*" : "application/json");
    if (body !== undefined) sent["Content-Type"] = "application/json";
    res = await fetch(apiUrl(path, params), {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiFailure(0, err.message);
  }
  if (!background) connection.sawResponse(res);
  if (!res.ok) {
    const failure = await failureOf(res);
    if (failure.status === 401) signInNeeded(failure);
    throw failure;
  }
  return text ? res.text() : (await res.json()).data;
}

/**
 * The API routes this server has (`/pods/{name}`, ...), read from its OpenAPI description:
 * routes that may come with later versions are used only where served, without a request
 * that fails (Chromium reports every failed one on the console).
 */
const served = fetch(new URL("openapi.json", document.baseURI), { headers: { Accept: "application/json" } })
  .then((res) => (res.ok ? res.json() : { paths: {} }))
  .then((doc) => {
    const mount = PREFIX ? `/${PREFIX}` : "";
    return new Set(Object.keys(doc.paths || {}).filter((p) => p.startsWith(`${mount}/`)).map((p) => p.slice(mount.length)));
  })
  .catch(() => new Set());

// ---------------------------------------------------------------------------------------------
// Connection state: the badge in the header

const connection = {
  watches: new Set(),
  staleSeconds: 0,
  unreachable: null,
  sawResponse(res) {
    this.unreachable = null;
    this.staleSeconds = Number(res.headers.get("k8sailor-stale-seconds") || 0);
    this.show();
  },
  show() {
    const badge = document.getElementById("connection");
    const down = [...this.watches].filter((w) => w.state === "down");
    let text = "live";
    let cls = "live";
    if (this.unreachable || down.length > 0) {
      const retry = down.length > 0 ? Math.max(0, Math.ceil((Math.min(...down.map((w) => w.retryAt)) - Date.now()) / 1000)) : 0;
      text = `disconnected${retry > 0 ? `, retrying in ${retry} s` : ", retrying"}`;
      cls = "down";
    } else if (this.staleSeconds > 0) {
      text = `stale: the server has not heard from the apiserver for ${this.staleSeconds} s`;
      cls = "stale";
    } else if ([...this.watches].some((w) => w.state === "connecting")) {
      text = "connecting";
      cls = "";
    }
    badge.textContent = text;
    badge.className = `badge ${cls}`;
    badge.dataset.state = cls || "connecting";
    // What the tables show may have changed since the server went away: dimmed until it answers.
    for (const table of document.querySelectorAll("#main table")) table.classList.toggle("stale", cls === "down");
  },
};

// The stale header comes with every API answer; a stream has one answer, so a ping keeps the
// figure current (and notices a server that went away between events).
setInterval(() => {
  if (document.hidden) return;
  api("/ping", {}, { text: true }).catch((err) => {
    if (err.status === 0) {
      connection.unreachable = err;
      connection.show();
    }
  });
}, PING_EVERY_MS);
setInterval(() => connection.show(), 1000);

// ---------------------------------------------------------------------------------------------
// Watches

const keyOf = (o) => `${o.namespace || ""}/${o.name}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The pause before trying again after `failures` failures in a row: 1 s, 2 s, 4 s, ... up to
 * MAX_BACKOFF_MS, jittered so that many clients do not come back at once. */
const backoff = (failures) => Math.min(MAX_BACKOFF_MS, 1000 * 2 ** failures) * (0.75 + Math.random() / 2);

/**
 * A live set of objects: `watch=true` as JSON lines. Until the BOOKMARK the objects collect in
 * a new map that then replaces the old one, so a fresh start never leaves a deleted object
 * behind. Once synced it remembers the resourceVersion each event brings it to, and a
 * reconnection asks for the changes after it alone, applied to the set it has.
 * `onChange` is called once for many events (see `changed`).
 */
class LiveSet {
  constructor(path, params, { onChange, onFailure }) {
    this.path = path;
    this.params = { ...params, watch: "true" };
    this.onChange = onChange;
    this.onFailure = onFailure;
    this.items = new Map();
    this.synced = false;
    // The version the set is at, once synced: where a reconnection resumes.
    this.version = null;
    this.state = "connecting";
    this.retryAt = 0;
    this.stopped = false;
    this.controller = null;
    this.timer = 0;
    this.frame = 0;
    this.drawnAt = -Infinity;
    connection.watches.add(this);
    this.run();
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
    clearTimeout(this.timer);
    cancelAnimationFrame(this.frame);
    connection.watches.delete(this);
    connection.show();
  }

  /**
   * At most one redraw per REDRAW_EVERY_MS, in an animation frame: a burst of thousands of
   * events costs a few redraws, and a person sees no difference.
   */
  changed() {
    if (this.timer || this.frame) return;
    const wait = Math.max(0, this.drawnAt + REDRAW_EVERY_MS - performance.now());
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.drawnAt = performance.now();
        if (!this.stopped) this.onChange(this);
      });
    }, wait);
  }

  setState(state) {
    this.state = state;
    connection.show();
  }

  async run() {
    let failures = 0;
    while (!this.stopped) {
      this.controller = new AbortController();
      this.setState("connecting");
      const resuming = this.version !== null;
      const params = resuming ? { ...this.params, resourceVersion: this.version } : this.params;
      try {
        const res = await fetch(apiUrl(this.path, params), {
          headers: headers("application/x-ndjson"),
          signal: this.controller.signal,
        });
        connection.sawResponse(res);
        if (resuming && res.status === 410) {
          // Too old for the server's history: a fresh list+watch, at once.
          await res.body?.cancel();
          this.version = null;
          continue;
        }
        if (!res.ok) {
          const failure = await failureOf(res);
          // The request itself is wrong or refused: asking again would get the same answer.
          if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
            if (failure.status === 401) signInNeeded(failure);
            this.setState("failed");
            this.onFailure(failure);
            return;
          }
          throw failure;
        }
        const expired = await this.read(res.body, resuming, () => {
          failures = 0;
        });
        if (expired) continue;
      } catch (err) {
        if (this.stopped) return;
        if (err instanceof ApiFailure && err.status >= 500) this.onFailure(err);
      }
      if (this.stopped) return;
      // Ended by the server (shutdown) or the network: again from a fresh list, after a
      // growing pause so that a server in trouble is not hammered.
      const pause = backoff(failures);
      failures += 1;
      this.retryAt = Date.now() + pause;
      this.setState("down");
      await sleep(pause);
    }
  }

  /**
   * Applies the stream's events; true when the server said to start again (410). Resuming,
   * the changes before the BOOKMARK apply to the set as it is; otherwise they make a new one.
   */
  async read(body, resuming, onSynced) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let rest = "";
    let initial = resuming ? this.items : new Map();
    this.synced = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      const lines = (rest + value).split("\n");
      rest = lines.pop();
      for (const line of lines) {
        if (!line) continue;
        const event = JSON.parse(line);
        const target = this.synced ? this.items : initial;
        // A fresh start's objects come in name order, not version order: only the BOOKMARK
        // says where it stands. Changes come in version order.
        if ((this.synced || resuming) && event.object?.resourceVersion) {
          this.version = event.object.resourceVersion;
        }
        switch (event.type) {
          case "ADDED":
          case "MODIFIED":
            target.set(keyOf(event.object), event.object);
            break;
          case "DELETED":
            target.delete(keyOf(event.object));
            break;
          case "BOOKMARK":
            this.items = initial;
            initial = null;
            this.version = event.object.resourceVersion || null;
            this.synced = true;
            this.accessFiltered = Boolean(event.object.accessFiltered);
            this.setState("live");
            onSynced();
            break;
          case "ERROR":
            // Fallen behind: resuming from where it is may still do, else the server says 410.
            if (event.object.code === 410) return true;
            this.onFailure(new ApiFailure(event.object.code, event.object.error));
            return false;
          default:
            break;
        }
      }
      if (this.synced) this.changed();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// DOM helpers

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** kubectl's AGE: 42s, 7m, 5h, 3d. */
function age(timestamp) {
  if (!timestamp) return "";
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(timestamp)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function statusClass(text) {
  if (text === "Running" || text === "Completed" || text === "Succeeded") return "s-ok";
  if (text === "Pending" || text === "ContainerCreating" || text === "Terminating" || /^Init:/.test(text)) return "s-warn";
  return "s-bad";
}

function labelList(labels) {
  const entries = Object.entries(labels || {});
  if (entries.length === 0) return h("p", { class: "note" }, "No labels.");
  return h("ul", { class: "labels", "aria-label": "Labels" }, entries.map(([k, v]) => h("li", {}, `${k}=${v}`)));
}

const byNamespaceThenName = (a, b) =>
  a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;

/**
 * A table of live objects. Small ones are drawn whole; big ones inside a scroller of fixed
 * height that draws only the rows in view (plus a few), so 10,000 rows cost what 40 do.
 */
class LiveTable {
  constructor({ columns, label, empty }) {
    this.columns = columns;
    this.empty = empty;
    this.rows = [];
    this.drawn = new Map();
    this.frame = 0;
    // The rows in view sit between two spacers that stand for the rows above and below.
    this.emptyRow = h("tr", { hidden: true }, h("td", { colspan: columns.length, class: "note" }, empty));
    this.above = this.spacer();
    this.below = this.spacer();
    this.tbody = h("tbody", {}, this.emptyRow, this.above, this.below);
    this.scroller = h(
      "div",
      { class: "scroller short", tabindex: "0", role: "region", "aria-label": label },
      h("table", {}, h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.title)))), this.tbody),
    );
    this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.el = this.scroller;
  }

  setRows(rows) {
    this.rows = rows;
    // A windowed table lays out fixed columns: its widths then do not depend on the rows in
    // view (they would jump while scrolling), and a redraw does not measure every cell.
    this.scroller.classList.toggle("short", rows.length <= WHOLE_TABLE_ROWS);
    this.draw();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    const n = this.rows.length;
    const whole = n <= WHOLE_TABLE_ROWS;
    let first = 0;
    let last = n;
    if (!whole) {
      const inView = Math.ceil((this.scroller.clientHeight || 600) / ROW_HEIGHT);
      // The scroll position may still be the one of a longer table (rows went while scrolled
      // to the end): the browser clamps it only once the spacers shrink.
      const top = Math.min(Math.floor(this.scroller.scrollTop / ROW_HEIGHT), Math.max(0, n - inView));
      first = Math.max(0, top - OVERSCAN_ROWS);
      last = Math.min(n, top + inView + OVERSCAN_ROWS);
    }
    this.emptyRow.hidden = n !== 0;
    this.above.hidden = first === 0;
    this.above.firstChild.style.height = `${first * ROW_HEIGHT}px`;
    this.below.hidden = last >= n;
    this.below.firstChild.style.height = `${(n - last) * ROW_HEIGHT}px`;
    // Rows whose object did not change are kept where they are, not built or moved again: in
    // a burst of changes most rows in view stay as they were, and each new or moved element
    // costs style and layout.
    const drawn = new Map();
    let cursor = this.above.nextSibling;
    for (let i = first; i < last; i++) {
      const o = this.rows[i];
      const key = keyOf(o);
      const at = age(o.creationTimestamp);
      const kept = this.drawn.get(key);
      const tr = kept?.object === o && kept.at === at ? kept.tr : this.row(o, key);
      const cls = i % 2 ? "row alt" : "row";
      if (tr.className !== cls) tr.className = cls;
      drawn.set(key, { object: o, tr, at });
      if (cursor === tr) cursor = cursor.nextSibling;
      else this.tbody.insertBefore(tr, cursor);
    }
    // What is left between the last row drawn and the lower spacer is out of view or gone.
    while (cursor && cursor !== this.below) {
      const next = cursor.nextSibling;
      cursor.remove();
      cursor = next;
    }
    this.drawn = drawn;
  }

  row(o, key) {
    return h(
      "tr",
      { "data-key": key },
      this.columns.map((c) => {
        const content = c.cell(o);
        // The whole text on hover, where a narrow column cuts it.
        const text = content instanceof Node ? content.textContent : content;
        return h("td", { class: c.class?.(o), title: text === "" || text === undefined || text === null ? undefined : String(text) }, content);
      }),
    );
  }

  spacer() {
    return h("tr", { class: "spacer", "aria-hidden": "true", hidden: true }, h("td", { colspan: this.columns.length }));
  }
}

// ---------------------------------------------------------------------------------------------
// Routes: #/deployments, #/ns/<ns>/deployments/<name>, #/ns/<ns>/pods/<name>/yaml, ...
// with ?labelSelector=... on the lists.

function parseRoute() {
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  let namespace = "";
  if (parts[0] === "ns" && parts.length >= 2) {
    namespace = parts[1];
    parts.splice(0, 2);
  }
  const params = new URLSearchParams(query);
  return {
    namespace,
    kind: parts[0] || "deployments",
    name: parts[1] || "",
    tab: parts[2] || "",
    labelSelector: params.get("labelSelector") || "",
    search: params.get("search") || "",
    wide: params.get("wide") === "1",
  };
}

function link({ namespace = "", kind, name = "", tab = "", labelSelector = "", search = "", wide = false }) {
  let path = namespace ? `#/ns/${encodeURIComponent(namespace)}/${kind}` : `#/${kind}`;
  if (name) path += `/${encodeURIComponent(name)}`;
  if (tab) path += `/${tab}`;
  const query = new URLSearchParams();
  if (labelSelector) query.set("labelSelector", labelSelector);
  if (search) query.set("search", search);
  if (wide) query.set("wide", "1");
  if ([...query].length > 0) path += `?${query}`;
  return path;
}

const a = (href, text) => h("a", { href }, text);

// ---------------------------------------------------------------------------------------------
// Columns

const namespaceColumn = (kind) => ({ title: "Namespace", cell: (o) => a(link({ namespace: o.namespace, kind }), o.namespace) });
const nameColumn = (kind) => ({ title: "Name", cell: (o) => a(link({ namespace: o.namespace, kind, name: o.name }), o.name) });

const deploymentColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn("deployments")] : []),
  nameColumn("deployments"),
  { title: "Ready", cell: (d) => d.ready, class: (d) => (d.available >= d.replicas ? "s-ok" : "s-warn") },
  { title: "Up-to-date", cell: (d) => d.upToDate },
  { title: "Available", cell: (d) => d.available },
  { title: "Age", cell: (d) => age(d.creationTimestamp) },
  { title: "Images", cell: (d) => (d.images || []).join(", ") },
];

const podColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn("pods")] : []),
  nameColumn("pods"),
  { title: "Ready", cell: (p) => p.ready },
  { title: "Status", cell: (p) => p.statusText, class: (p) => statusClass(p.statusText) },
  { title: "Restarts", cell: (p) => p.restarts },
  { title: "Age", cell: (p) => age(p.creationTimestamp) },
  { title: "Node", cell: (p) => p.nodeName },
  { title: "IP", cell: (p) => p.podIp },
];

const replicaSetColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn("replicasets")] : []),
  nameColumn("replicasets"),
  { title: "Desired", cell: (r) => r.desired },
  { title: "Current", cell: (r) => r.current },
  { title: "Ready", cell: (r) => r.ready },
  { title: "Age", cell: (r) => age(r.creationTimestamp) },
  { title: "Deployment", cell: (r) => (r.deployment ? a(link({ namespace: r.namespace, kind: "deployments", name: r.deployment }), r.deployment) : "") },
  { title: "Images", cell: (r) => (r.images || []).join(", ") },
];

const selectorText = (labels) => Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(",");

const serviceColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn("services")] : []),
  nameColumn("services"),
  { title: "Type", cell: (s) => s.type },
  { title: "Cluster-IP", cell: (s) => s.clusterIp },
  { title: "External-IP", cell: (s) => s.externalIp },
  { title: "Port(s)", cell: (s) => s.ports },
  { title: "Age", cell: (s) => age(s.creationTimestamp) },
  { title: "Selector", cell: (s) => selectorText(s.selector) || "<none>" },
];

const ingressColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn("ingresses")] : []),
  nameColumn("ingresses"),
  { title: "Class", cell: (i) => i.class },
  { title: "Hosts", cell: (i) => i.hosts },
  { title: "Address", cell: (i) => i.address },
  { title: "Ports", cell: (i) => i.ports },
  { title: "Age", cell: (i) => age(i.creationTimestamp) },
  {
    title: "Routes",
    cell: (i) => (i.paths || []).map((p) => `${p.host || "*"}${p.path || "/"} → ${p.service || "(resource)"}${p.port ? `:${p.port}` : ""}`).join(", "),
  },
];

const namespaceListColumns = () => [
  nameColumn("namespaces"),
  { title: "Status", cell: (n) => n.status, class: (n) => (n.status === "Active" ? "s-ok" : "s-warn") },
  { title: "Age", cell: (n) => age(n.creationTimestamp) },
];

/**
 * The kinds whose answers are the original client's records rather than kubectl's cells, with
 * the columns drawn from them; every other kind's table is drawn from its cells.
 */
const KINDS = {
  deployments: { columns: deploymentColumns },
  pods: { columns: podColumns },
  replicasets: { columns: replicaSetColumns },
  services: { columns: serviceColumns },
  ingresses: { columns: ingressColumns },
  namespaces: { columns: namespaceListColumns },
};

// ---------------------------------------------------------------------------------------------
// What the server serves (GET /resources), grouped as Headlamp groups kinds.

const GROUPS = [
  ["Workloads", ["pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs"]],
  ["Network", ["services", "endpoints", "endpointslices", "ingresses", "ingressclasses", "networkpolicies"]],
  [
    "Config",
    ["configmaps", "secrets", "horizontalpodautoscalers", "verticalpodautoscalers", "poddisruptionbudgets", "resourcequotas", "limitranges", "priorityclasses", "runtimeclasses", "leases", "mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
  ],
  ["Storage", ["persistentvolumeclaims", "persistentvolumes", "storageclasses", "volumeattachments", "csidrivers", "csinodes", "csistoragecapacities", "volumeattributesclasses"]],
  ["Access", ["serviceaccounts", "roles", "rolebindings", "clusterroles", "clusterrolebindings"]],
  ["Cluster", ["namespaces", "nodes", "events", "customresourcedefinitions", "apiservices"]],
  ["Custom resources", []],
];

/** The API groups of Kubernetes itself: a resource of any other group is a custom one. */
const BUILT_IN_GROUPS = new Set([
  "",
  "apps",
  "batch",
  "autoscaling",
  "policy",
  ...["networking", "rbac.authorization", "storage", "scheduling", "node", "coordination", "discovery", "apiextensions", "admissionregistration", "certificates", "flowcontrol.apiserver", "events", "resource", "storagemigration", "internal.apiserver", "authentication", "authorization", "apiregistration"].map((g) => `${g}.k8s.io`),
]);

function groupOf(resource) {
  const listed = GROUPS.find(([, names]) => names.includes(resource.name));
  if (listed && BUILT_IN_GROUPS.has(resource.group)) return listed[0];
  return BUILT_IN_GROUPS.has(resource.group) ? "Cluster" : "Custom resources";
}

/** A kind's name as a heading: StatefulSets, Ingresses, NetworkPolicies, Endpoints. */
function plural(kind) {
  if (/(ss|x|ch|sh)$/.test(kind)) return `${kind}es`;
  if (/s$/.test(kind)) return kind;
  if (/[^aeiou]y$/.test(kind)) return `${kind.slice(0, -1)}ies`;
  return `${kind}s`;
}

/** "1 Ingress", "227 Pods". */
const counted = (n, resource) => `${n} ${n === 1 ? resource.kind : plural(resource.kind)}`;

const registry = {
  byName: new Map(),
  ready: null,
  /** The served resource of kind `kind` in API version `apiVersion` (an ownerReference's). */
  ofKind(apiVersion, kind) {
    const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
    return [...this.byName.values()].find((r) => r.kind === kind && r.group === group);
  },
  async load() {
    try {
      const list = await api("/resources", {}, { background: true });
      const names = list.map((r) => r.name).join(",");
      this.byName = new Map(list.map((r) => [r.name, r]));
      if (names !== this.names) {
        this.names = names;
        drawSidebar();
      }
    } catch (err) {
      showFailure(document.getElementById("sidebar-error"), err);
    }
  },
};
registry.ready = registry.load();
// On a phone the kinds fold away under their summary until asked for.
const phone = matchMedia("(max-width: 700px)");
const foldSidebar = () => (document.getElementById("sidebar-details").open = !phone.matches);
phone.addEventListener("change", foldSidebar);
foldSidebar();
// A custom resource is served a moment after its CRD is made: the list is read again now and
// then (a watch of the CRDs would hold one of the six connections a browser gives a server).
setInterval(() => {
  if (!document.hidden) registry.load();
}, 10_000);

function drawSidebar() {
  const route = parseRoute();
  const nav = document.getElementById("sidebar-groups");
  const grouped = new Map(GROUPS.map(([name]) => [name, []]));
  for (const r of registry.byName.values()) {
    // A built-in kind named with its group is another API's shape of a kind listed already
    // (events.events.k8s.io: the Events): one entry, as Headlamp has.
    if (r.builtIn && r.name !== r.plural) continue;
    grouped.get(groupOf(r)).push(r);
  }
  nav.replaceChildren(
    ...GROUPS.map(([group, order]) => {
      const rs = grouped.get(group);
      if (rs.length === 0) return null;
      const rank = (r) => (order.includes(r.name) ? order.indexOf(r.name) : order.length);
      rs.sort((x, y) => rank(x) - rank(y) || (plural(x.kind) < plural(y.kind) ? -1 : 1));
      return h(
        "section",
        { class: "nav-group", "aria-label": group },
        h("h2", {}, group),
        h("ul", {}, rs.map((r) => h("li", {}, h("a", { id: `nav-${r.name}`, href: link({ namespace: route.namespace, kind: r.name }), title: r.group ? `${r.name} (${r.group}/${r.version})` : r.name }, plural(r.kind))))),
      );
    }),
  );
  markCurrent();
}

function markCurrent() {
  const route = parseRoute();
  for (const el of document.querySelectorAll("#sidebar-groups a")) {
    const kind = el.id.slice(4);
    el.href = link({ namespace: route.namespace, kind });
    if (route.kind === kind) el.setAttribute("aria-current", "page");
    else el.removeAttribute("aria-current");
  }
}

/** A kubectl cell as text: an Age cell as kubectl prints it, anything else as it is. */
function cellText(cell) {
  if (cell === null || cell === undefined) return "";
  if (typeof cell !== "object") return String(cell);
  if ("Age" in cell) return cell.Age ? age(cell.Age) : "<unknown>";
  const [value] = Object.values(cell);
  if (value === null || value === undefined) return "<none>";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** The columns of a kind answered with cells: kubectl's, the wide ones too when asked. */
function cellColumns(resource, { all, wide }) {
  const columns = resource.columns
    .map((c, i) => ({ ...c, index: i }))
    .filter((c) => wide || c.priority === 0)
    .map((c) => {
      if (c.format === "name" || c.name === "Name") return nameColumn(resource.name);
      return {
        title: c.name,
        tooltip: c.description,
        cell: (o) => cellText(o.cells?.[c.index]),
        class: c.name === "Status" ? (o) => statusClass(cellText(o.cells?.[c.index])) : undefined,
      };
    });
  return [...(all && resource.namespaced ? [namespaceColumn(resource.name)] : []), ...columns];
}

function columnsOf(resource, options) {
  const typed = KINDS[resource.name];
  return typed ? typed.columns(options.all && resource.namespaced) : cellColumns(resource, options);
}

// ---------------------------------------------------------------------------------------------
// Views: each returns a function that stops what it started.

const main = document.getElementById("main");

/** Words of a free-text field: entries separated by spaces, commas or lines. */
const entriesOf = (text) => text.split(/[\s,]+/).filter(Boolean);

/**
 * The create form of each kind the API creates (POST /{kind}/{name}), in the original client's
 * short forms; the server checks every field and says what is wrong.
 */
const CREATE_FORMS = {
  deployments: {
    fields: [
      { name: "image", label: "Images", placeholder: "nginx:1.27, redis:7", help: "one container per image" },
      { name: "replicas", label: "Replicas", type: "number", value: "1" },
    ],
    body: (v) => ({ replicas: Number(v.replicas), containers: entriesOf(v.image).map((image) => ({ image })) }),
  },
  services: {
    fields: [{ name: "services", label: "Ports", placeholder: "80:8080 !30080:443:8443", help: "port:targetPort; ! NodePort, # headless, @name ExternalName" }],
    body: (v) => ({ services: entriesOf(v.services) }),
  },
  ingresses: {
    fields: [{ name: "endpoints", label: "Rules", placeholder: "http://shop.example.com/api*?backend=api:8080", help: "one per rule" }],
    body: (v) => ({ endpoints: entriesOf(v.endpoints) }),
  },
};

/**
 * The form creating a `resource` in `namespace`, folded until opened; the created object shows
 * in the live table beside it through the watch, the server's refusal in words under it.
 */
function createForm(resource, namespace) {
  const spec = CREATE_FORMS[resource.name];
  const title = `Create ${/^[AEIOU]/.test(resource.kind) ? "an" : "a"} ${resource.kind}`;
  const outcome = h("p", { class: "note", role: "status" });
  const name = h("input", { name: "name", required: true, placeholder: "web", spellcheck: "false", autocomplete: "off" });
  const inputs = spec.fields.map((f) =>
    h("input", { name: f.name, type: f.type || "text", value: f.value || "", placeholder: f.placeholder || "", required: true, spellcheck: "false", autocomplete: "off", title: f.help || "" }),
  );
  const form = h(
    "form",
    {
      class: "toolbar create",
      "aria-label": title,
      onsubmit: async (e) => {
        e.preventDefault();
        const values = Object.fromEntries(inputs.map((i) => [i.name, i.value.trim()]));
        outcome.className = "note";
        outcome.textContent = "creating";
        try {
          await api(`/${resource.name}/${encodeURIComponent(name.value.trim())}`, { namespace }, { method: "POST", body: spec.body(values) });
          outcome.textContent = `${resource.kind} ${name.value.trim()} created`;
        } catch (err) {
          outcome.className = "error";
          outcome.textContent = `Not created: ${err.message}`;
        }
      },
    },
    h("label", {}, "Name", name),
    ...spec.fields.map((f, i) => h("label", {}, f.label, inputs[i])),
    h("button", { type: "submit" }, "Create"),
  );
  return h("details", { class: "create" }, h("summary", {}, title), form, outcome);
}

/**
 * A live table of a kind in the route's namespace (a cluster-wide kind's everywhere): the
 * server filters with the label selector, the page with the name search.
 */
function listView(route, resource) {
  const all = !route.namespace || !resource.namespaced;
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const count = h("span", { class: "count", "aria-live": "polite" }, "loading");
  const note = h("p", { class: "note", hidden: true });
  const wideAvailable = !KINDS[resource.name] && resource.columns.some((c) => c.priority > 0);
  const table = new LiveTable({ columns: columnsOf(resource, { all, wide: route.wide }), label: plural(resource.kind), empty: `No ${plural(resource.kind)} here.` });
  const input = h("input", {
    name: "labelSelector",
    value: route.labelSelector,
    placeholder: "app=web,tier in (backend,cache),!canary",
    "aria-describedby": "selector-help",
    spellcheck: "false",
    autocomplete: "off",
  });
  const search = h("input", { name: "search", type: "search", value: route.search, placeholder: "part of a name", spellcheck: "false", autocomplete: "off" });
  let rowsOfSet = [];
  const draw = () => {
    const needle = search.value.trim().toLowerCase();
    const rows = needle ? rowsOfSet.filter((o) => o.name.toLowerCase().includes(needle)) : rowsOfSet;
    count.textContent = needle && rows.length !== rowsOfSet.length ? `${counted(rows.length, resource)} of ${rowsOfSet.length}` : counted(rows.length, resource);
    count.dataset.count = rows.length;
    table.setRows(rows);
  };
  search.addEventListener("input", () => {
    draw();
    // Kept in the route (a link to share), without a new view.
    history.replaceState(null, "", link({ ...route, search: search.value.trim() }));
  });
  const form = h(
    "form",
    {
      class: "toolbar",
      role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = link({ ...route, name: "", labelSelector: input.value.trim(), search: search.value.trim() });
      },
    },
    h("label", {}, "Label selector", input),
    h("button", { type: "submit" }, "Filter"),
    route.labelSelector ? a(link({ ...route, labelSelector: "" }), "Clear") : null,
    h("label", { class: "search" }, "Name", search),
    wideAvailable ? h("a", { href: link({ ...route, wide: !route.wide }), class: "button secondary", role: "button", "aria-pressed": String(route.wide) }, route.wide ? "Fewer columns" : "Wide") : null,
    count,
  );
  const where = !resource.namespaced ? "cluster-wide" : route.namespace ? `in ${route.namespace}` : "in all namespaces";
  main.replaceChildren(
    h("h1", {}, plural(resource.kind), " ", h("span", { class: "count" }, where)),
    form,
    h("p", { id: "selector-help", class: "note" }, "kubectl's syntax, evaluated by the server: a=b, a!=b, a in (x,y), a notin (x), a, !a."),
    // replaceChildren, unlike h, writes a null as the text "null".
    ...(CREATE_FORMS[resource.name] && route.namespace ? [createForm(resource, route.namespace)] : []),
    error,
    note,
    table.el,
  );
  const live = new LiveSet(
    `/${resource.name}`,
    { namespace: resource.namespaced ? route.namespace : "", labelSelector: route.labelSelector },
    {
      onChange: (set) => {
        error.hidden = true;
        rowsOfSet = [...set.items.values()].sort(byNamespaceThenName);
        note.hidden = !set.accessFiltered;
        note.textContent = "Only the namespaces your token may read are shown.";
        draw();
        if (resource.namespaced) namespaces.add(rowsOfSet);
      },
      onFailure: (failure) => {
        showFailure(error, failure);
        count.textContent = "";
      },
    },
  );
  const tick = setInterval(() => table.draw(), 30_000);
  return () => {
    live.stop();
    clearInterval(tick);
  };
}

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function showFailure(el, failure) {
  el.textContent = failure.message;
  el.hidden = false;
}

/**
 * One object, followed live through a watch of its name; what goes wrong is said in `error`,
 * and `missing` is called while the object is not there.
 */
function followOne(path, route, error, render, missing = () => {}) {
  return new LiveSet(
    path,
    { namespace: route.namespace, fieldSelector: `metadata.name=${route.name}` },
    {
      onChange: (set) => {
        const o = set.items.get(`${route.namespace}/${route.name}`);
        if (!o) {
          showFailure(error, new ApiFailure(404, route.namespace ? `${route.name} is not in ${route.namespace} (any more).` : `there is no ${route.name} (any more).`));
          missing();
          return;
        }
        error.hidden = true;
        render(o);
      },
      onFailure: (failure) => showFailure(error, failure),
    },
  );
}

/** The kinds whose objects own others, and the resources of what they own. */
const OWNED = {
  Deployment: ["replicasets"],
  ReplicaSet: ["pods"],
  StatefulSet: ["pods"],
  DaemonSet: ["pods"],
  Job: ["pods"],
  CronJob: ["jobs"],
};

/** The kinds whose pods' logs the page shows merged; a pod's own log besides. */
const LOGGED = new Set(["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"]);

/** `spec.selector` as a label selector in kubectl's syntax; "" for none. */
function selectorOf(object) {
  const selector = object?.spec?.selector;
  if (!selector || typeof selector !== "object") return "";
  const terms = Object.entries(selector.matchLabels || {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector.matchExpressions || []) {
    if (e.operator === "In") terms.push(`${e.key} in (${e.values.join(",")})`);
    else if (e.operator === "NotIn") terms.push(`${e.key} notin (${e.values.join(",")})`);
    else if (e.operator === "Exists") terms.push(e.key);
    else if (e.operator === "DoesNotExist") terms.push(`!${e.key}`);
  }
  return terms.join(",");
}

/** The Kubernetes API's path (beside the prefix, at the server's root) of a namespace's list. */
function kubeListUrl(resource, namespace, labelSelector) {
  const plural = resource.name.split(".")[0];
  const base = resource.group ? `apis/${resource.group}/${resource.version}` : `api/${resource.version}`;
  const url = new URL(`${base}/namespaces/${encodeURIComponent(namespace)}/${plural}`, document.baseURI);
  if (labelSelector) url.searchParams.set("labelSelector", labelSelector);
  return url;
}

/**
 * What an object owns: the objects of its namespace whose ownerReferences name its uid, among
 * the resources its kind makes (ReplicaSets of a Deployment, pods of a StatefulSet, Jobs of a
 * CronJob). Narrowed by its selector, one request per owned resource, read again whenever a
 * watch of that resource says something changed. ReplicaSets are kept as records that name
 * their Deployment; the others are read whole from the Kubernetes API.
 */
function ownedBy(object, route, table, error) {
  const uid = object.metadata.uid;
  const selector = selectorOf(object);
  const watches = [];
  const found = new Map();
  const show = () => table.setRows([...found.values()].flat().sort(byNamespaceThenName));
  for (const name of OWNED[object.kind] || []) {
    const resource = registry.byName.get(name);
    if (!resource) continue;
    const controller = new AbortController();
    const read = async (set) => {
      try {
        let rows;
        if (name === "replicasets") {
          rows = [...set.items.values()].filter((r) => r.deployment === object.metadata.name).map((r) => ({ ...r, kind: "ReplicaSet", resource: name }));
        } else {
          const res = await fetch(kubeListUrl(resource, route.namespace, selector), { headers: headers("application/json"), signal: controller.signal });
          if (!res.ok) throw await failureOf(res);
          const list = await res.json();
          rows = list.items
            .filter((o) => (o.metadata.ownerReferences || []).some((ref) => ref.uid === uid))
            .map((o) => ({ name: o.metadata.name, namespace: o.metadata.namespace, creationTimestamp: o.metadata.creationTimestamp, kind: resource.kind, resource: name }));
        }
        found.set(name, rows);
        show();
      } catch (err) {
        if (err.name !== "AbortError") showFailure(error, err);
      }
    };
    const live = new LiveSet(`/${name}`, { namespace: route.namespace, labelSelector: selector }, { onChange: read, onFailure: (failure) => showFailure(error, failure) });
    watches.push({ stop: () => (controller.abort(), live.stop()) });
  }
  if (watches.length === 0) table.setRows([]);
  return () => watches.forEach((w) => w.stop());
}

const ownedColumns = [
  { title: "Kind", cell: (o) => o.kind },
  { title: "Name", cell: (o) => a(link({ namespace: o.namespace, kind: o.resource, name: o.name }), o.name) },
  { title: "Age", cell: (o) => age(o.creationTimestamp) },
];

/** Events about an object, newest first, live: Events whose involvedObject is its uid. */
function eventsOf(uid, namespace, body) {
  const resource = registry.byName.get("events");
  if (!resource) {
    body.replaceChildren(h("p", { class: "note" }, "This server does not serve Events."));
    return () => {};
  }
  const index = (name) => resource.columns.findIndex((c) => c.name === name);
  const [seen, type, reason, from, count, message] = ["Last Seen", "Type", "Reason", "Source", "Count", "Message"].map(index);
  const lastSeen = (e) => e.cells?.[seen]?.Age || e.creationTimestamp || "";
  const table = new LiveTable({
    label: "Events, newest first",
    empty: "No events.",
    columns: [
      { title: "Last seen", cell: (e) => cellText(e.cells?.[seen]) },
      { title: "Type", cell: (e) => cellText(e.cells?.[type]), class: (e) => (cellText(e.cells?.[type]) === "Warning" ? "s-warn" : "") },
      { title: "Reason", cell: (e) => cellText(e.cells?.[reason]) },
      { title: "From", cell: (e) => cellText(e.cells?.[from]) },
      { title: "Count", cell: (e) => cellText(e.cells?.[count]) },
      { title: "Message", cell: (e) => cellText(e.cells?.[message]) },
    ],
  });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  body.replaceChildren(error, table.el);
  const live = new LiveSet("/events", { namespace, fieldSelector: `involvedObject.uid=${uid}` }, {
    onChange: (set) => {
      error.hidden = true;
      table.setRows([...set.items.values()].sort((x, y) => (lastSeen(x) < lastSeen(y) ? 1 : lastSeen(x) > lastSeen(y) ? -1 : 0)));
    },
    onFailure: (failure) => showFailure(error, failure),
  });
  return () => live.stop();
}

/**
 * What every object's page has below its summary: its owner and what it owns, and tabs for its
 * events, its YAML and, for a pod or a workload, its logs. `update(row)` is called with the
 * followed row each time it changes.
 */
function objectDetails(route, resource, { overview = false } = {}) {
  const { namespace, name } = route;
  const logged = resource.kind === "Pod" || LOGGED.has(resource.kind);
  const tabs = [...(overview ? ["overview"] : []), "events", "yaml", ...(logged ? ["logs"] : [])];
  const tab = tabs.includes(route.tab) ? route.tab : tabs[0];
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const owner = h("div", { "aria-label": "Owner" }, "loading");
  const owned = new LiveTable({ columns: ownedColumns, label: "What it owns", empty: "Nothing." });
  const body = h("section", { class: "tab-body" }, "loading");
  const tabLink = (id, text) => h("a", { href: link({ ...route, tab: id === tabs[0] ? "" : id }), "aria-current": tab === id ? "page" : null }, text);
  if (overview) body.hidden = tab === "overview";
  const el = h(
    "div",
    {},
    error,
    h("div", { class: "grid" }, h("div", { class: "panel" }, h("h2", {}, "Owner"), owner), overview || !OWNED[resource.kind] ? null : h("div", { class: "panel" }, h("h2", {}, "Owns"), owned.el)),
    h(
      "nav",
      { class: "tabs", "aria-label": `${resource.kind} details` },
      overview ? tabLink("overview", "Overview") : null,
      tabLink("events", "Events"),
      tabLink("yaml", "YAML"),
      logged ? tabLink("logs", "Logs") : null,
    ),
    body,
  );
  const controller = new AbortController();
  const output = (outputFormat) =>
    api(`/${resource.name}/${encodeURIComponent(name)}/output`, { namespace, outputFormat }, { text: true, signal: controller.signal });
  let stops = [];
  let version = null;
  let started = false;
  const start = async (row) => {
    started = true;
    let object;
    try {
      object = JSON.parse(await output("json"));
    } catch (err) {
      if (err.name !== "AbortError") {
        showFailure(error, err);
        owner.replaceChildren(h("p", { class: "note" }, "Unknown: the object could not be read."));
      }
      return;
    }
    if (controller.signal.aborted) return;
    const refs = object.metadata.ownerReferences || [];
    owner.replaceChildren(
      refs.length === 0
        ? h("p", { class: "note" }, "None: nothing owns it.")
        : h(
            "ul",
            { class: "plain" },
            refs.map((ref) => {
              const of = registry.ofKind(ref.apiVersion, ref.kind);
              const target = of ? a(link({ namespace: of.namespaced ? namespace : "", kind: of.name, name: ref.name }), ref.name) : ref.name;
              return h("li", {}, `${ref.kind} `, target, ref.controller ? h("span", { class: "note" }, " (controller)") : null);
            }),
          ),
    );
    // A Deployment's overview lists its ReplicaSets itself.
    if (resource.namespaced && !overview) stops.push(ownedBy(object, route, owned, error));
    else owned.setRows([]);
    if (tab === "events") stops.push(eventsOf(row.uid, resource.namespaced ? namespace : "", body));
    if (tab === "logs") stops.push(logView(route, resource, object, body));
  };
  const showYaml = async () => {
    try {
      const yaml = await output("yaml");
      const pre = body.querySelector("pre.yaml");
      if (pre) pre.textContent = yaml;
      else body.replaceChildren(h("pre", { class: "yaml", tabindex: "0", "aria-label": `The ${resource.kind} as YAML` }, yaml));
    } catch (err) {
      if (err.name !== "AbortError") body.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  };
  return {
    el,
    tab,
    update(row) {
      if (!started) start(row);
      // The YAML follows the object: read again at each new version.
      if (tab === "yaml" && row.resourceVersion !== version) {
        version = row.resourceVersion;
        showYaml();
      }
    },
    stop() {
      controller.abort();
      stops.forEach((stop) => stop());
      stops = [];
    },
  };
}

/** What an object's page shows while the object is not there. */
function gone(summary, labels, details) {
  summary.replaceChildren(h("p", { class: "note" }, "Not found."));
  labels.replaceChildren();
  details.el.hidden = true;
}

/** The facts of a row: its kind's columns, as the table shows them. */
function rowFacts(resource, row) {
  const columns = columnsOf(resource, { all: false, wide: true }).filter((c) => c.title !== "Name");
  return facts([...(resource.namespaced ? [["Namespace", row.namespace]] : []), ...columns.map((c) => [c.title, c.cell(row) ?? ""])]);
}

/** Any served object's page: its row's facts, labels, owner, what it owns, events, YAML, logs. */
function objectView(route, resource) {
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "panel" }, "loading");
  const labels = h("div", { class: "panel" });
  const details = objectDetails(route, resource);
  const back = resource.namespaced ? `← ${plural(resource.kind)} in ${route.namespace}` : `← ${plural(resource.kind)}`;
  main.replaceChildren(
    h("p", {}, a(link({ namespace: route.namespace, kind: resource.name }), back)),
    h("h1", {}, `${resource.kind} ${route.name}`),
    error,
    h("div", { class: "grid" }, summary, labels),
    details.el,
  );
  const live = followOne(
    `/${resource.name}`,
    { ...route, namespace: resource.namespaced ? route.namespace : "" },
    error,
    (o) => {
      details.el.hidden = false;
      summary.replaceChildren(rowFacts(resource, o));
      labels.replaceChildren(h("h2", {}, "Labels"), labelList(o.labels));
      details.update(o);
    },
    () => gone(summary, labels, details),
  );
  return () => {
    live.stop();
    details.stop();
  };
}

// ---------------------------------------------------------------------------------------------
// Logs

/** A line, then the container or pod a merged log's line comes from. */
const LOG_TAILS = [100, 1000, 10000, 50000];

/**
 * The log of a pod, or of a workload's pods merged (its own route where the server has one,
 * else the pods its selector picks), followed as Server-Sent Events into a LogWindow.
 */
function logView(route, resource, object, body) {
  const { namespace, name } = route;
  const merged = resource.kind !== "Pod";
  const podContainers = merged ? [] : [...(object.spec.initContainers || []), ...(object.spec.containers || [])].map((c) => c.name);
  const template = merged ? object.spec.template?.spec || object.spec.jobTemplate?.spec?.template?.spec || {} : {};
  const containerNames = merged ? (template.containers || []).map((c) => c.name) : podContainers;
  const defaultContainer = object.metadata.annotations?.["kubectl.kubernetes.io/default-container"] || (object.spec.containers || [])[0]?.name;
  const view = new LogWindow({ h, label: `Log of ${resource.kind} ${name}`, merged });
  const status = h("span", { class: "note", role: "status" }, "connecting");
  const count = h("span", { class: "count", "aria-live": "off" });
  const follow = h("button", { type: "button", class: "secondary", "aria-pressed": "true" }, "Pause");
  const container = h(
    "select",
    { name: "container" },
    merged ? h("option", { value: "" }, "All containers") : null,
    containerNames.map((c) => h("option", { value: c, selected: c === defaultContainer && !merged }, c)),
  );
  const check = (label, name) => {
    const input = h("input", { type: "checkbox", name });
    return [input, h("label", { class: "check" }, input, label)];
  };
  const [previous, previousLabel] = check("Previous", "previous");
  const [timestamps, timestampsLabel] = check("Timestamps", "timestamps");
  const [wrap, wrapLabel] = check("Wrap", "wrap");
  const tail = h("select", { name: "tailLines" }, LOG_TAILS.map((n) => h("option", { value: n, selected: n === 1000 }, `last ${n.toLocaleString("en")}`)));
  const search = h("input", { type: "search", name: "logSearch", placeholder: "search", spellcheck: "false", autocomplete: "off" });
  const download = h("button", { type: "button", class: "secondary" }, "Download");
  body.replaceChildren(
    h(
      "div",
      { class: "toolbar log-toolbar" },
      follow,
      h("label", { class: "inline" }, "Container ", container),
      h("label", { class: "inline" }, "Lines ", tail),
      previousLabel,
      timestampsLabel,
      wrapLabel,
      h("label", { class: "search" }, "Search", search),
      download,
      count,
      status,
    ),
    view.el,
  );
  follow.addEventListener("click", () => view.setFollowing(!view.following));
  wrap.addEventListener("change", () => view.setWrap(wrap.checked));
  search.addEventListener("input", () => view.setQuery(search.value));
  download.addEventListener("click", () => {
    const url = URL.createObjectURL(new Blob([view.text()], { type: "text/plain" }));
    const save = h("a", { href: url, download: `${namespace}-${name}${merged ? "" : `-${container.value}`}.log` });
    document.body.append(save);
    save.click();
    save.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });

  const pods = new Set();
  let controller = null;
  let pending = [];
  let flush = 0;
  // The opening planned after an end, and the ends in a row that were failures.
  let retry = 0;
  let failures = 0;
  // Set when the log's end was seen while paused: following again opens it again.
  let endedWhilePaused = false;
  let left = false;
  const showCount = () => {
    const shown = view.query ? `${view.shown.length.toLocaleString("en")} of ` : "";
    count.textContent = `${shown}${view.lines.length.toLocaleString("en")} lines${merged ? ` from ${pods.size} ${pods.size === 1 ? "pod" : "pods"}` : ""}${view.unseen ? `, ${view.unseen.toLocaleString("en")} new` : ""}`;
    count.dataset.lines = view.lines.length;
    count.dataset.shown = view.shown.length;
  };
  const say = (state, text, className = "note") => {
    status.textContent = text;
    status.className = className;
    status.dataset.state = state;
  };
  search.addEventListener("input", showCount);
  // Lines arrive one event each: they are handed to the window once a frame.
  const add = (line) => {
    pending.push(line);
    if (!flush) {
      flush = requestAnimationFrame(() => {
        flush = 0;
        view.append(pending);
        pending = [];
        showCount();
      });
    }
  };
  /** Stops the stream and any reopening planned. */
  const halt = () => {
    controller?.abort();
    controller = null;
    clearTimeout(retry);
    retry = 0;
  };
  /**
   * Reads the log into the view: from the toolbar's options, or (`resume`) on from where the
   * view's lines end, without the lines it has. Whatever ends the stream decides what next:
   * a refusal or the log's own end is said and stays; any other end (the server's stream
   * lifetime, shutdown, a broken connection, a 5xx) opens it again while it is followed.
   */
  const stream = async (resume) => {
    halt();
    // This stream's own: a stream replaced while it starts must not read into the view.
    const mine = new AbortController();
    controller = mine;
    endedWhilePaused = false;
    const params = {
      namespace,
      container: container.value,
      previous: previous.checked ? "true" : "",
      // Always: a line's time is what a stream opened again reads on from.
      timestamps: "true",
      // Opened again: every line since, none cut.
      tailLines: resume?.sinceTime ? "" : tail.value,
      sinceTime: resume?.sinceTime || "",
      follow: "true",
    };
    const paths = await served;
    let url;
    if (!merged) url = apiUrl(`/pods/${encodeURIComponent(name)}/logs`, params);
    else if (paths.has(`/${resource.name}/{name}/logs`)) url = apiUrl(`/${resource.name}/${encodeURIComponent(name)}/logs`, params);
    else url = apiUrl("/pods/logs", { ...params, labelSelector: selectorOf(object) });
    if (resume) say("reconnecting", "reconnecting", "note s-warn");
    else say("connecting", "connecting");
    const keep = (line) => {
      if (!resume || resume.isNew(line)) add(line);
    };
    let over = null;
    let trouble = null;
    try {
      if (mine.signal.aborted) return;
      const res = await fetch(url, { headers: headers("text/event-stream"), signal: mine.signal });
      connection.sawResponse(res);
      if (!res.ok) throw await failureOf(res);
      say("following", "following", "note s-ok");
      await readEvents(res.body, (type, data) => {
        if (mine.signal.aborted) return;
        if (!merged) {
          if (type === "ended") over = JSON.parse(data).reason;
          else keep(stampedLine(data));
          return;
        }
        const event = JSON.parse(data);
        if (type === "line") {
          pods.add(event.pod);
          keep({ pod: event.pod, container: event.container, ...stampedLine(event.line) });
        } else if (type === "joined") {
          pods.add(event.pod);
          showCount();
        } else if (type === "left") {
          say("following", `pod ${event.pod} left (${event.reason})`, "note s-ok");
        } else if (type === "cut" || type === "refused") {
          say("following", `pod ${event.pod} is not followed: ${event.reason || `${event.maxLogStreams} pods are already`}`, "note s-warn");
        } else if (type === "ended") {
          // The set of pods could not be followed any more: opened again, it may be.
          trouble = `the log ended: ${event.reason}`;
        }
      });
    } catch (err) {
      if (err.name === "AbortError" || mine.signal.aborted) return;
      // Asked again, a refusal would be refused again.
      if (err instanceof ApiFailure && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) {
        if (err.status === 401) signInNeeded(err);
        say("failed", err.message, "error");
        return;
      }
      trouble = err.message;
    }
    if (mine.signal.aborted || left) return;
    controller = null;
    // A stream the server ended cleanly (its lifetime) is opened again after the shortest pause.
    failures = trouble ? failures + 1 : 0;
    if (previous.checked) return say("ended", "the previous run's log, whole");
    if (over) return say("ended", `the log ended: ${over}`);
    if (!view.following) {
      endedWhilePaused = true;
      return say("paused", "paused: the stream ended; Follow reads on from the last line");
    }
    reopen(trouble);
  };
  // Lines not yet handed to the window count as kept.
  const resumeFromKept = () => new Resume([...view.lines, ...pending]);
  /** Opens the log again after a pause that grows with each failure in a row. */
  const reopen = (trouble) => {
    const pause = backoff(failures);
    say("reconnecting", `${trouble ? `${trouble}; ` : ""}reconnecting in ${Math.ceil(pause / 1000)} s`, "note s-warn");
    retry = setTimeout(() => {
      retry = 0;
      stream(resumeFromKept());
    }, pause);
  };
  // From the options chosen: the view starts again.
  const open = () => {
    cancelAnimationFrame(flush);
    flush = 0;
    pending = [];
    failures = 0;
    view.clear();
    pods.clear();
    showCount();
    stream(null);
  };
  view.onFollowChange = (following) => {
    follow.textContent = following ? "Pause" : "Follow";
    follow.setAttribute("aria-pressed", String(following));
    if (!following && retry) {
      // Paused while waiting to reopen: it waits for the person instead.
      clearTimeout(retry);
      retry = 0;
      endedWhilePaused = true;
      say("paused", "paused: the stream ended; Follow reads on from the last line");
    } else if (following && endedWhilePaused) {
      stream(resumeFromKept());
    }
  };
  for (const input of [container, previous, tail]) input.addEventListener("change", open);
  timestamps.addEventListener("change", () => view.setShowTime(timestamps.checked));
  open();
  return () => {
    left = true;
    halt();
    cancelAnimationFrame(flush);
  };
}

/**
 * A Delete… button: asks `question`, deletes `path` in `namespace`, then goes to the `back`
 * link; a failure is said in `error`. Disabled until the page has seen its object.
 */
function deleteButtonFor({ question, path, namespace, back, error }) {
  return h(
    "button",
    {
      type: "button",
      class: "danger",
      disabled: true,
      onclick: async () => {
        if (!(await confirmDialog(question))) return;
        try {
          await api(path, { namespace }, { method: "DELETE" });
          location.hash = back;
        } catch (err) {
          showFailure(error, err);
        }
      },
    },
    "Delete…",
  );
}

function deploymentView(route, resource) {
  const { namespace, name } = route;
  // A browser holds at most six connections to a server, and each live table holds one: the
  // overview's tables (pods, ReplicaSets, what routes to it) and a tab's events or log are
  // never open together.
  const details = objectDetails(route, resource, { overview: true });
  const overview = details.tab === "overview";
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "panel" }, "loading");
  const labels = h("div", { class: "panel" });
  const replicas = h("input", { type: "number", min: "0", max: "10000", required: true, name: "replicas", id: "replicas", disabled: true });
  const scaleNote = h("span", { class: "note", role: "status" });
  const scaleForm = h(
    "form",
    {
      class: "inline",
      onsubmit: async (e) => {
        e.preventDefault();
        scaleNote.textContent = "scaling";
        try {
          await api(`/deployments/${encodeURIComponent(name)}/replicas`, { namespace, replicas: replicas.value }, { method: "PUT" });
          scaleNote.textContent = `scaled to ${replicas.value}`;
          replicas.dataset.touched = "";
        } catch (err) {
          scaleNote.textContent = err.message;
        }
      },
    },
    h("label", { for: "replicas" }, "Replicas"),
    replicas,
    h("button", { type: "submit", disabled: true }, "Scale"),
    scaleNote,
  );
  replicas.addEventListener("input", () => (replicas.dataset.touched = "1"));
  const deleteButton = deleteButtonFor({
    question: `Delete the Deployment ${name} in ${namespace}? Its ReplicaSets and pods go with it.`,
    path: `/deployments/${encodeURIComponent(name)}`,
    namespace,
    back: link({ namespace, kind: "deployments" }),
    error,
  });
  // Nothing to scale or delete until the Deployment is seen, nor once it is gone.
  const actions = [...scaleForm.querySelectorAll("input, button"), deleteButton];
  const pods = new LiveTable({ columns: podColumns(false), label: "Pods of the Deployment", empty: "No pods." });
  const podCount = h("span", { class: "count", "aria-live": "polite" });
  const sets = new LiveTable({ columns: replicaSetColumns(false).filter((c) => c.title !== "Deployment"), label: "ReplicaSets of the Deployment", empty: "No ReplicaSets." });
  const related = overview
    ? [
        routedBy(route, "services", "Services that select its pods", serviceColumns(false)),
        routedBy(route, "ingresses", "Ingresses to those Services", ingressColumns(false)),
      ]
    : [];
  main.replaceChildren(
    h("p", {}, a(link({ namespace, kind: "deployments" }), `← Deployments in ${namespace}`)),
    h("h1", {}, `Deployment ${name}`),
    error,
    h("div", { class: "grid" }, summary, h("div", { class: "panel" }, h("h2", {}, "Scale"), scaleForm, h("h2", {}, "Delete"), deleteButton), labels),
    details.el,
    ...(overview ? [h("h2", {}, "Pods ", podCount), pods.el, h("h2", {}, "ReplicaSets it owns"), sets.el, ...related.map((r) => r.el)] : []),
  );
  const watches = [
    ...related,
    followOne(
      "/deployments",
      route,
      error,
      (d) => {
        summary.replaceChildren(
          facts([
            ["Namespace", d.namespace],
            ["Ready", d.ready],
            ["Up-to-date", d.upToDate],
            ["Available", d.available],
            ["Replicas", d.replicas],
            ["Images", (d.images || []).join(", ")],
            ["Selector", Object.entries(d.labelSelector || {}).map(([k, v]) => `${k}=${v}`).join(",")],
            ["Age", age(d.creationTimestamp)],
          ]),
        );
        if (!replicas.dataset.touched) replicas.value = d.replicas;
        labels.replaceChildren(h("h2", {}, "Labels"), labelList(d.labels));
        details.el.hidden = false;
        details.update(d);
        actions.forEach((c) => (c.disabled = false));
      },
      () => {
        gone(summary, labels, details);
        actions.forEach((c) => (c.disabled = true));
      },
    ),
  ];
  if (overview) {
    watches.push(
    new LiveSet(`/deployments/${encodeURIComponent(name)}/pods`, { namespace }, {
      onChange: (set) => {
        const rows = [...set.items.values()].sort(byNamespaceThenName);
        podCount.textContent = `${rows.length}`;
        podCount.dataset.count = rows.length;
        pods.setRows(rows);
      },
      onFailure: (failure) => pods.el.replaceChildren(h("p", { class: "error" }, failure.message)),
    }),
    new LiveSet("/replicasets", { namespace }, {
      onChange: (set) => sets.setRows([...set.items.values()].filter((r) => r.deployment === name).sort(byNamespaceThenName)),
      onFailure: (failure) => sets.el.replaceChildren(h("p", { class: "error" }, failure.message)),
    }),
    );
  }
  return () => {
    watches.forEach((w) => w.stop());
    details.stop();
  };
}

/**
 * What routes to a Deployment (its Services, or the Ingresses to them), where the server
 * serves that relation: read again whenever that kind changes in the namespace, so it is as
 * live as the tables. Shown once the server is known to serve it.
 */
function routedBy(route, kind, title, columns) {
  const { namespace, name } = route;
  const relation = `/deployments/{name}/${kind}`;
  const el = h("section", { hidden: true });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const table = new LiveTable({ columns, label: title, empty: `No ${kind}.` });
  el.append(h("h2", {}, title), error, table.el);
  const controller = new AbortController();
  let live = null;
  let stopped = false;
  const read = async () => {
    try {
      const rows = await api(`/deployments/${encodeURIComponent(name)}/${kind}`, { namespace }, { signal: controller.signal });
      error.hidden = true;
      table.setRows(rows.sort(byNamespaceThenName));
    } catch (err) {
      if (err.name !== "AbortError") showFailure(error, err);
    }
  };
  served.then((paths) => {
    if (stopped || !paths.has(relation)) return;
    el.hidden = false;
    live = new LiveSet(`/${kind}`, { namespace }, { onChange: read, onFailure: (failure) => showFailure(error, failure) });
  });
  return {
    el,
    stop() {
      stopped = true;
      controller.abort();
      live?.stop();
    },
  };
}

function podView(route, resource) {
  const { namespace, name } = route;
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "panel" }, "loading");
  const labels = h("div", { class: "panel" });
  const details = objectDetails(route, resource);
  const deleteButton = deleteButtonFor({
    question: `Delete the pod ${name} in ${namespace}? A controller that owns it makes another.`,
    path: `/pods/${encodeURIComponent(name)}`,
    namespace,
    back: link({ namespace, kind: "pods" }),
    error,
  });
  main.replaceChildren(
    h("p", {}, a(link({ namespace, kind: "pods" }), `← Pods in ${namespace}`)),
    h("h1", {}, `Pod ${name}`),
    error,
    h("div", { class: "grid" }, summary, h("div", { class: "panel" }, h("h2", {}, "Delete"), deleteButton), labels),
    details.el,
  );
  const live = followOne("/pods", route, error, (p) => {
    summary.replaceChildren(
      facts([
        ["Namespace", p.namespace],
        ["Status", h("span", { class: statusClass(p.statusText) }, p.statusText)],
        ["Ready", p.ready],
        ["Restarts", p.restarts],
        ["Node", p.nodeName || "none"],
        ["IP", p.podIp || "none"],
        ["Images", (p.images || []).join(", ")],
        ["Deployment", p.deployment ? a(link({ namespace, kind: "deployments", name: p.deployment }), p.deployment) : "none"],
        ["Age", age(p.creationTimestamp)],
      ]),
    );
    labels.replaceChildren(h("h2", {}, "Labels"), labelList(p.labels));
    details.el.hidden = false;
    details.update(p);
    deleteButton.disabled = false;
  }, () => {
    gone(summary, labels, details);
    deleteButton.disabled = true;
  });
  return () => {
    live.stop();
    details.stop();
  };
}

// ---------------------------------------------------------------------------------------------
// The namespace picker: from GET /namespaces where the server has it, else the namespaces of
// the Deployments and pods seen.

const namespaces = {
  known: new Set(),
  select: document.getElementById("namespace"),
  add(objects) {
    let grew = false;
    for (const o of objects) {
      if (!this.known.has(o.namespace)) {
        this.known.add(o.namespace);
        grew = true;
      }
    }
    if (grew) this.draw();
  },
  draw() {
    const current = parseRoute().namespace;
    if (current) this.known.add(current);
    const names = [...this.known].sort();
    this.select.replaceChildren(
      h("option", { value: "" }, "All namespaces"),
      ...names.map((n) => h("option", { value: n }, n)),
    );
    this.select.value = current;
  },
  async load() {
    try {
      if ((await served).has("/namespaces")) {
        const data = await api("/namespaces");
        this.add((data || []).map((n) => ({ namespace: typeof n === "string" ? n : n.name })));
        return;
      }
    } catch {
      // Not allowed to list them: the Deployments tell.
    }
    try {
      this.add(await api("/deployments"));
    } catch {
      // Shown where the lists are.
    }
  },
};

namespaces.select.addEventListener("change", () => {
  const route = parseRoute();
  location.hash = link({ namespace: namespaces.select.value, kind: route.name ? route.kind : route.kind });
});

// ---------------------------------------------------------------------------------------------
// Sign-in and confirmation dialogs

const tokenDialog = document.getElementById("token-dialog");
const tokenInput = document.getElementById("token-input");
const banner = document.getElementById("banner");

// The Token button is for a server that checks tokens: shown once one answers 401, or a
// token is kept.
const tokenButton = document.getElementById("token-button");
tokenButton.hidden = !token();

function signInNeeded(failure) {
  tokenButton.hidden = false;
  banner.replaceChildren(
    failure.message,
    " ",
    h("button", { type: "button", onclick: () => openTokenDialog() }, "Enter a token"),
  );
  banner.hidden = false;
}

function openTokenDialog() {
  tokenInput.value = "";
  tokenDialog.showModal();
  tokenInput.focus();
}

tokenButton.addEventListener("click", openTokenDialog);
document.getElementById("token-cancel").addEventListener("click", () => tokenDialog.close());
document.getElementById("token-forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  tokenDialog.close();
  restart();
});
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = tokenInput.value.trim();
  tokenInput.value = "";
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  tokenDialog.close();
  restart();
});

const confirmBox = document.getElementById("confirm-dialog");
function confirmDialog(text) {
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    const done = (answer) => {
      confirmBox.removeEventListener("close", onClose);
      resolve(answer);
    };
    const onClose = () => done(confirmBox.returnValue === "yes");
    confirmBox.returnValue = "";
    confirmBox.addEventListener("close", onClose);
    confirmBox.showModal();
  });
}
document.getElementById("confirm-form").addEventListener("submit", (e) => {
  e.preventDefault();
  confirmBox.close("yes");
});
document.getElementById("confirm-no").addEventListener("click", () => confirmBox.close("no"));

// ---------------------------------------------------------------------------------------------
// The router

let stopView = () => {};

async function show() {
  stopView();
  stopView = () => {};
  const asked = location.hash;
  const route = parseRoute();
  markCurrent();
  namespaces.draw();
  await registry.ready;
  // Asked for another view meanwhile: that one draws.
  if (location.hash !== asked) return;
  const resource = registry.byName.get(route.kind);
  const namespaced = resource?.namespaced;
  if (!resource) {
    main.replaceChildren(
      h("h1", {}, "Nothing here"),
      h("p", {}, `This server serves no resource named ${route.kind}. `, a("#/deployments", "Go to the Deployments")),
    );
  } else if (!route.name) stopView = listView(route, resource);
  else if (namespaced && !route.namespace) {
    main.replaceChildren(h("h1", {}, "Nothing here"), h("p", {}, `A ${resource.kind} is in a namespace: `, a(link({ kind: route.kind }), `choose it among the ${plural(resource.kind)}`)));
  } else if (route.kind === "deployments") stopView = deploymentView(route, resource);
  else if (route.kind === "pods") stopView = podView(route, resource);
  else stopView = objectView(route, resource);
  document.title = `${route.name || (resource ? plural(resource.kind) : "k8sailor")} · k8sailor`;
}

function restart() {
  banner.hidden = true;
  namespaces.load();
  show();
}

window.addEventListener("hashchange", () => {
  show();
  main.focus({ preventScroll: true });
});
restart();
