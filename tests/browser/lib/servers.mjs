// The processes a browser test talks to, all on 127.0.0.1: a static file server for the page
// under test and a real `k8sailor httpserver` against the control plane in
// K8SAILOR_TEST_KUBECONFIG.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdir, readFile, stat } from "node:fs/promises";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { kubeconfig } from "./cluster.mjs";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

const CONTENT_TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
};
const TEXT = new Set([".html", ".js", ".mjs", ".css", ".json"]);

/** Starts `server` on a free port of 127.0.0.1; resolves to its origin. */
async function listenOnLoopback(server) {
  await new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return `http://127.0.0.1:${server.address().port}`;
}

/**
 * Serves `root` on 127.0.0.1 as a single-page app does: an unknown path without a file
 * extension answers `index.html`, so the client's history-mode routes load on reload.
 * `rewrites` ([from, to] string pairs) are applied to every text file served: how a test points
 * a prebuilt client at the k8sailor it started, without rebuilding it. `files` maps extra URL
 * paths to files on disk.
 */
export async function serveStatic({ root, rewrites = [], files = {} }) {
  const rootDir = path.resolve(root);
  const server = http.createServer(async (req, res) => {
    try {
      const urlPath = decodeURIComponent(new URL(req.url, "http://x").pathname);
      let file = files[urlPath] ?? path.join(rootDir, urlPath);
      if (!files[urlPath] && !file.startsWith(rootDir + path.sep) && file !== rootDir) {
        res.writeHead(403).end();
        return;
      }
      let info = await stat(file).catch(() => null);
      if (info?.isDirectory()) {
        file = path.join(file, "index.html");
        info = await stat(file).catch(() => null);
      }
      if (!info && path.extname(urlPath) === "") {
        file = path.join(rootDir, "index.html");
        info = await stat(file).catch(() => null);
      }
      if (!info) {
        res.writeHead(404, { "content-type": "text/plain" }).end("not found");
        return;
      }
      const ext = path.extname(file);
      let body = await readFile(file);
      if (TEXT.has(ext) && rewrites.length > 0) {
        let text = body.toString("utf8");
        for (const [from, to] of rewrites) text = text.split(from).join(to);
        body = Buffer.from(text, "utf8");
      }
      res.writeHead(200, {
        "content-type": CONTENT_TYPES[ext] ?? "application/octet-stream",
        "cache-control": "no-store",
      });
      res.end(body);
    } catch (err) {
      res.writeHead(500, { "content-type": "text/plain" }).end(String(err));
    }
  });
  const origin = await listenOnLoopback(server);
  return {
    origin,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Starts `k8sailor httpserver` (K8SAILOR_BIN, else target/debug/k8sailor) on a port of
 * 127.0.0.1 the kernel picks (it prints it: no port is guessed, none reused after a stop)
 * against K8SAILOR_TEST_KUBECONFIG and waits until /readyz answers 200. Its log goes to
 * `logFile`.
 */
export async function startK8sailor({ logFile, args = [] }) {
  const bin = process.env.K8SAILOR_BIN || path.join(repoRoot, "target", "debug", "k8sailor");
  await mkdir(path.dirname(logFile), { recursive: true });
  const log = createWriteStream(logFile);
  const child = spawn(
    bin,
    ["httpserver", "--kubeconfig", kubeconfig(), "--listen", "127.0.0.1:0", ...args],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } },
  );
  let origin = null;
  let printed = "";
  child.stdout.on("data", (chunk) => {
    if (origin) return;
    printed += chunk;
    origin = printed.match(/^k8sailor listening on (http:\/\/127\.0\.0\.1:\d+)\//m)?.[1] ?? null;
  });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  let exited = null;
  child.on("exit", (code, signal) => {
    exited = `exited (${code ?? signal})`;
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited) throw new Error(`k8sailor ${exited} before it was ready; see ${logFile}`);
    const ok = origin !== null && (await fetch(`${origin}/readyz`).then((r) => r.ok, () => false));
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(`k8sailor was not ready within 90 s; see ${logFile}`);
    }
    await sleep(200);
  }
  return {
    origin,
    api: `${origin}/k8sailor/v0`,
    async stop() {
      if (exited) return;
      const done = new Promise((resolve) => child.on("exit", resolve));
      child.kill("SIGTERM");
      await done;
    },
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns a truthy value, or throws `what` after `timeoutMs`. */
export async function eventually(what, probe, { timeoutMs = 30_000, everyMs = 250 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    }
    await sleep(everyMs);
  }
}

/**
 * Sends `req` to `upstream` (an origin) at `path` and streams the answer back, so watches stay
 * live; either side closing closes the other.
 */
function forward(req, res, upstream, path) {
  const upstreamReq = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstreamReq.on("error", () => res.destroy());
  res.on("close", () => upstreamReq.destroy());
  req.pipe(upstreamReq);
}

/**
 * A reverse proxy on 127.0.0.1 that serves `target` (an origin) under the path `mount`
 * (`/team/`) and strips it on the way, as an ingress with a rewrite does; answers are streamed
 * through, so watches stay live. Anything outside `mount` is a 404.
 */
export async function proxyUnderPath({ target, mount }) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith(mount)) {
      res.writeHead(404, { "content-type": "text/plain" }).end("outside the mount");
      return;
    }
    forward(req, res, upstream, `/${req.url.slice(mount.length)}`);
  });
  const origin = await listenOnLoopback(server);
  return {
    origin,
    url: `${origin}${mount}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/**
 * A Service in front of replicas: forwards every request to the replica `use(i)` picked. `use`
 * of another replica (or of none, `use(null)`: every connection refused) cuts every open
 * connection, as a replica going away does, so clients reconnect to whichever serves next.
 */
export async function replicaBalancer({ targets }) {
  let current = 0;
  const open = new Set();
  const server = http.createServer((req, res) => {
    if (current === null) {
      req.socket.destroy();
      return;
    }
    forward(req, res, new URL(targets[current]), req.url);
  });
  server.on("connection", (socket) => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
  });
  const origin = await listenOnLoopback(server);
  return {
    origin,
    use(index) {
      current = index;
      for (const socket of open) socket.destroy();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
