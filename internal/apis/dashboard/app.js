// k8sailor's built-in dashboard: hand-written, no framework, no build step. Every table follows
// a `watch=true` stream read with fetch (so the Authorization header goes with it), applies each
// event in place, and when the stream ends resumes it from the last resourceVersion it saw (on
// any replica: only what it missed), or, told that is too old (410), starts again from a fresh
// list+watch. Big tables
// render only the rows in view. Views are hash routes, so each is a link and the server needs
// no route per view; every URL is relative, so the page works under an ingress sub-path.

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

/** One call; resolves to the envelope's `data`, or the text when `text` is set. */
async function api(path, params = {}, { method = "GET", text = false, signal } = {}) {
  let res;
  try {
    res = await fetch(apiUrl(path, params), {
      method,
      headers: headers(text ? "*/*" : "application/json"),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiFailure(0, err.message);
  }
  connection.sawResponse(res);
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

const keyOf = (o) => `${o.namespace}/${o.name}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
      const pause = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** failures) * (0.75 + Math.random() / 2);
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
    return h("tr", { "data-key": key }, this.columns.map((c) => h("td", { class: c.class?.(o) }, c.cell(o))));
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
  };
}

function link({ namespace = "", kind, name = "", tab = "", labelSelector = "" }) {
  let path = namespace ? `#/ns/${encodeURIComponent(namespace)}/${kind}` : `#/${kind}`;
  if (name) path += `/${encodeURIComponent(name)}`;
  if (tab) path += `/${tab}`;
  if (labelSelector) path += `?${new URLSearchParams({ labelSelector })}`;
  return path;
}

const a = (href, text) => h("a", { href }, text);

// ---------------------------------------------------------------------------------------------
// Columns

const namespaceColumn = { title: "Namespace", cell: (o) => a(link({ namespace: o.namespace, kind: "deployments" }), o.namespace) };

const deploymentColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn] : []),
  { title: "Name", cell: (d) => a(link({ namespace: d.namespace, kind: "deployments", name: d.name }), d.name) },
  { title: "Ready", cell: (d) => d.ready, class: (d) => (d.available >= d.replicas ? "s-ok" : "s-warn") },
  { title: "Up-to-date", cell: (d) => d.upToDate },
  { title: "Available", cell: (d) => d.available },
  { title: "Age", cell: (d) => age(d.creationTimestamp) },
  { title: "Images", cell: (d) => (d.images || []).join(", ") },
];

const podColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn] : []),
  { title: "Name", cell: (p) => a(link({ namespace: p.namespace, kind: "pods", name: p.name }), p.name) },
  { title: "Ready", cell: (p) => p.ready },
  { title: "Status", cell: (p) => p.statusText, class: (p) => statusClass(p.statusText) },
  { title: "Restarts", cell: (p) => p.restarts },
  { title: "Age", cell: (p) => age(p.creationTimestamp) },
  { title: "Node", cell: (p) => p.nodeName },
  { title: "IP", cell: (p) => p.podIp },
];

const replicaSetColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn] : []),
  { title: "Name", cell: (r) => r.name },
  { title: "Desired", cell: (r) => r.desired },
  { title: "Current", cell: (r) => r.current },
  { title: "Ready", cell: (r) => r.ready },
  { title: "Age", cell: (r) => age(r.creationTimestamp) },
  { title: "Deployment", cell: (r) => (r.deployment ? a(link({ namespace: r.namespace, kind: "deployments", name: r.deployment }), r.deployment) : "") },
  { title: "Images", cell: (r) => (r.images || []).join(", ") },
];

const selectorText = (labels) => Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(",");

const serviceColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn] : []),
  { title: "Name", cell: (s) => s.name },
  { title: "Type", cell: (s) => s.type },
  { title: "Cluster-IP", cell: (s) => s.clusterIp },
  { title: "External-IP", cell: (s) => s.externalIp },
  { title: "Port(s)", cell: (s) => s.ports },
  { title: "Age", cell: (s) => age(s.creationTimestamp) },
  { title: "Selector", cell: (s) => selectorText(s.selector) || "<none>" },
];

const ingressColumns = (allNamespaces) => [
  ...(allNamespaces ? [namespaceColumn] : []),
  { title: "Name", cell: (i) => i.name },
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

const KINDS = {
  deployments: { title: "Deployments", path: "/deployments", columns: deploymentColumns, noun: "Deployment" },
  pods: { title: "Pods", path: "/pods", columns: podColumns, noun: "pod" },
  replicasets: { title: "ReplicaSets", path: "/replicasets", columns: replicaSetColumns, noun: "ReplicaSet" },
  // Shown once the server serves them.
  services: { title: "Services", path: "/services", columns: serviceColumns, noun: "Service", optional: true },
  ingresses: { title: "Ingresses", path: "/ingresses", columns: ingressColumns, noun: "Ingress", optional: true },
};

served.then((paths) => {
  const nav = document.querySelector(".top nav");
  for (const [id, kind] of Object.entries(KINDS)) {
    if (kind.optional && paths.has(kind.path)) {
      nav.append(h("a", { id: `nav-${id}`, href: link({ namespace: parseRoute().namespace, kind: id }) }, kind.title));
    }
  }
});

// ---------------------------------------------------------------------------------------------
// Views: each returns a function that stops what it started.

const main = document.getElementById("main");

/** A live table of `kind` in the route's namespace, filtered by the server with the selector. */
function listView(route) {
  const kind = KINDS[route.kind];
  const all = !route.namespace;
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const count = h("span", { class: "count", "aria-live": "polite" }, "loading");
  const note = h("p", { class: "note", hidden: true });
  const table = new LiveTable({ columns: kind.columns(all), label: kind.title, empty: `No ${kind.title} here.` });
  const input = h("input", {
    name: "labelSelector",
    value: route.labelSelector,
    placeholder: "app=web,tier in (backend,cache),!canary",
    "aria-describedby": "selector-help",
    spellcheck: "false",
    autocomplete: "off",
  });
  const form = h(
    "form",
    {
      class: "toolbar",
      role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        location.hash = link({ ...route, name: "", labelSelector: input.value.trim() });
      },
    },
    h("label", {}, "Label selector", input),
    h("button", { type: "submit" }, "Filter"),
    route.labelSelector ? a(link({ ...route, labelSelector: "" }), "Clear") : null,
    count,
  );
  main.replaceChildren(
    h("h1", {}, kind.title, " ", h("span", { class: "count" }, all ? "in all namespaces" : `in ${route.namespace}`)),
    form,
    h("p", { id: "selector-help", class: "note" }, "kubectl's syntax, evaluated by the server: a=b, a!=b, a in (x,y), a notin (x), a, !a."),
    error,
    note,
    table.el,
  );
  const live = new LiveSet(
    kind.path,
    { namespace: route.namespace, labelSelector: route.labelSelector },
    {
      onChange: (set) => {
        error.hidden = true;
        const rows = [...set.items.values()].sort(byNamespaceThenName);
        count.textContent = `${rows.length} ${rows.length === 1 ? kind.noun : kind.title.replace(/^./, (c) => c.toLowerCase())}`;
        count.dataset.count = rows.length;
        note.hidden = !set.accessFiltered;
        note.textContent = "Only the namespaces your token may read are shown.";
        table.setRows(rows);
        if (kind === KINDS.deployments || kind === KINDS.pods) namespaces.add(rows);
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

/** One object, followed live through a watch of its name; what goes wrong is said in `error`. */
function followOne(path, route, error, render) {
  return new LiveSet(
    path,
    { namespace: route.namespace, fieldSelector: `metadata.name=${route.name}` },
    {
      onChange: (set) => {
        const o = set.items.get(`${route.namespace}/${route.name}`);
        if (!o) {
          showFailure(error, new ApiFailure(404, `${route.name} is not in ${route.namespace} (any more).`));
          return;
        }
        error.hidden = true;
        render(o);
      },
      onFailure: (failure) => showFailure(error, failure),
    },
  );
}

function deploymentView(route) {
  const { namespace, name } = route;
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "panel" }, "loading");
  const labels = h("div", { class: "panel" });
  const replicas = h("input", { type: "number", min: "0", max: "10000", required: true, name: "replicas", id: "replicas" });
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
    h("button", { type: "submit" }, "Scale"),
    scaleNote,
  );
  replicas.addEventListener("input", () => (replicas.dataset.touched = "1"));
  const deleteButton = h(
    "button",
    {
      type: "button",
      class: "danger",
      onclick: async () => {
        if (!(await confirmDialog(`Delete the Deployment ${name} in ${namespace}? Its ReplicaSets and pods go with it.`))) return;
        try {
          await api(`/deployments/${encodeURIComponent(name)}`, { namespace }, { method: "DELETE" });
          location.hash = link({ namespace, kind: "deployments" });
        } catch (err) {
          showFailure(error, err);
        }
      },
    },
    "Delete…",
  );
  const pods = new LiveTable({ columns: podColumns(false), label: "Pods of the Deployment", empty: "No pods." });
  const podCount = h("span", { class: "count", "aria-live": "polite" });
  const sets = new LiveTable({ columns: replicaSetColumns(false).filter((c) => c.title !== "Deployment"), label: "ReplicaSets of the Deployment", empty: "No ReplicaSets." });
  const related = [
    routedBy(route, "services", "Services that select its pods", serviceColumns(false)),
    routedBy(route, "ingresses", "Ingresses to those Services", ingressColumns(false)),
  ];
  main.replaceChildren(
    h("p", {}, a(link({ namespace, kind: "deployments" }), `← Deployments in ${namespace}`)),
    h("h1", {}, `Deployment ${name}`),
    error,
    h("div", { class: "grid" }, summary, h("div", { class: "panel" }, h("h2", {}, "Scale"), scaleForm, h("h2", {}, "Delete"), deleteButton), labels),
    h("h2", {}, "Pods ", podCount),
    pods.el,
    h("h2", {}, "ReplicaSets"),
    sets.el,
    ...related.map((r) => r.el),
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
      },
    ),
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
  ];
  return () => watches.forEach((w) => w.stop());
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

function podView(route) {
  const { namespace, name } = route;
  const tab = route.tab === "yaml" ? "yaml" : "events";
  const error = h("div", { class: "error", role: "alert", hidden: true });
  const summary = h("div", { class: "panel" }, "loading");
  const labels = h("div", { class: "panel" });
  const body = h("section", { "aria-live": "polite" }, "loading");
  const tabLink = (id, text) => h("a", { href: link({ ...route, tab: id }), "aria-current": tab === id ? "page" : null }, text);
  const back = h("p", {}, a(link({ namespace, kind: "pods" }), `← Pods in ${namespace}`));
  main.replaceChildren(
    back,
    h("h1", {}, `Pod ${name}`),
    error,
    h("div", { class: "grid" }, summary, labels),
    h("nav", { class: "tabs", "aria-label": "Pod details" }, tabLink("events", "Events"), tabLink("yaml", "YAML")),
    body,
  );
  const controller = new AbortController();
  const path = `/pods/${encodeURIComponent(name)}`;
  const load = async () => {
    try {
      if (tab === "yaml") {
        const yaml = await api(`${path}/output`, { namespace, outputFormat: "yaml" }, { text: true, signal: controller.signal });
        body.replaceChildren(h("pre", { class: "yaml", tabindex: "0", "aria-label": "The pod as YAML" }, yaml));
      } else {
        const events = await api(`${path}/events`, { namespace }, { signal: controller.signal });
        const table = new LiveTable({
          label: "Events, newest first",
          empty: "No events for this pod.",
          columns: [
            { title: "Last seen", cell: (e) => age(e.lastTimestamp || e.firstTimestamp) },
            { title: "Type", cell: (e) => e.type, class: (e) => (e.type === "Warning" ? "s-warn" : "") },
            { title: "Reason", cell: (e) => e.reason },
            { title: "From", cell: (e) => e.source },
            { title: "Count", cell: (e) => e.count },
            { title: "Message", cell: (e) => e.message },
          ],
        });
        table.setRows(events.map((e, i) => ({ ...e, name: `${i}`, namespace })));
        body.replaceChildren(h("div", { class: "toolbar" }, h("button", { type: "button", class: "secondary", onclick: load }, "Refresh events")), table.el);
      }
    } catch (err) {
      if (err.name !== "AbortError") body.replaceChildren(h("p", { class: "error", role: "alert" }, err.message));
    }
  };
  load();
  const live = followOne(
    "/pods",
    route,
    error,
    (p) => {
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
    },
  );
  return () => {
    controller.abort();
    live.stop();
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
  const kind = KINDS[route.kind] ? route.kind : "deployments";
  location.hash = link({ namespace: namespaces.select.value, kind });
});

// ---------------------------------------------------------------------------------------------
// Sign-in and confirmation dialogs

const tokenDialog = document.getElementById("token-dialog");
const tokenInput = document.getElementById("token-input");
const banner = document.getElementById("banner");

function signInNeeded(failure) {
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

document.getElementById("token-button").addEventListener("click", openTokenDialog);
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

function show() {
  stopView();
  const route = parseRoute();
  for (const kind of Object.keys(KINDS)) {
    const nav = document.getElementById(`nav-${kind}`);
    if (!nav) continue;
    nav.href = link({ namespace: route.namespace, kind });
    if (route.kind === kind && !route.name) nav.setAttribute("aria-current", "page");
    else nav.removeAttribute("aria-current");
  }
  namespaces.draw();
  if (route.kind === "deployments" && route.name && route.namespace) stopView = deploymentView(route);
  else if (route.kind === "pods" && route.name && route.namespace) stopView = podView(route);
  else if (KINDS[route.kind] && !route.name) stopView = listView(route);
  else {
    main.replaceChildren(h("h1", {}, "Nothing here"), h("p", {}, a("#/deployments", "Go to the Deployments")));
    stopView = () => {};
  }
  document.title = `${route.name || KINDS[route.kind]?.title || "k8sailor"} · k8sailor`;
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
