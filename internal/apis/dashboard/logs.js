// The log view: a pod's log, or a workload's pods merged, read as Server-Sent Events with fetch
// (so the Authorization header goes with it). Lines are kept in a bounded buffer (the last
// MAX_LINES) and only the rows in view are in the DOM, drawn at most once a frame: thousands
// of lines a minute cost a few row updates a frame, whatever the buffer holds. Every line is
// asked for with its timestamp, shown or not: a followed log whose stream ends (the server
// ends each after a watch's lifetime) is opened again from the newest line's time (Resume).

/** The lines kept; older ones are dropped, a tenth at a time so that dropping is rare. */
export const MAX_LINES = 50_000;
const DROP_LINES = MAX_LINES / 10;
const LINE_HEIGHT = 18;
const OVERSCAN = 20;

/** A hue of its own for each pod, the same on every load. */
export function hueOf(text) {
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619);
  return (hash >>> 0) % 360;
}

/** An RFC 3339 time as [seconds since the epoch, nanoseconds]: ordered to the nanosecond. */
export function timeOf(stamp) {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(stamp);
  if (!m) return null;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(ms)) return null;
  return [ms / 1000, Number((m[2] || "").padEnd(9, "0"))];
}

const isBefore = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

/**
 * A line as `timestamps=true` sends it, split: `{stamp, time, text}`; a line without a
 * timestamp (a server that sends none) keeps its text whole, with no time.
 */
export function stampedLine(raw) {
  const space = raw.indexOf(" ");
  const time = space > 0 ? timeOf(raw.slice(0, space)) : null;
  return time ? { stamp: raw.slice(0, space), time, text: raw.slice(space + 1) } : { stamp: "", time: null, text: raw };
}

/**
 * How far before the newest line kept a log opened again is read: a merged log's containers
 * arrive interleaved, each a few lines behind the others, so a container's lines written just
 * before the end may not have reached the page although a newer line of another one did.
 */
export const RESUME_OVERLAP_SECONDS = 5;

const keyOf = (line) => `${line.pod ?? ""}\0${line.container ?? ""}\0${line.stamp}\0${line.text}`;

/**
 * Where a followed log opened again reads on: `sinceTime`, a whole second (the apiserver reads
 * from the start of one) RESUME_OVERLAP_SECONDS before the newest line in `lines`, and the
 * lines kept from then on, which the new stream sends again: `isNew` drops each once (same pod,
 * container, timestamp and text). No line with a time kept: no sinceTime, nothing dropped.
 */
export class Resume {
  constructor(lines) {
    let newest = null;
    for (const line of lines) if (line.time && (!newest || isBefore(newest, line.time))) newest = line.time;
    this.sinceTime = "";
    this.seen = new Map();
    if (!newest) return;
    const from = [Math.floor(newest[0]) - RESUME_OVERLAP_SECONDS, 0];
    this.sinceTime = new Date(from[0] * 1000).toISOString().replace(".000Z", "Z");
    for (const line of lines) {
      if (!line.time || isBefore(line.time, from)) continue;
      const key = keyOf(line);
      this.seen.set(key, (this.seen.get(key) || 0) + 1);
    }
  }

  /** Whether `line`, sent by the stream opened again, is not one kept already. */
  isNew(line) {
    if (!line.time) return true;
    const key = keyOf(line);
    const left = this.seen.get(key);
    if (!left) return true;
    if (left === 1) this.seen.delete(key);
    else this.seen.set(key, left - 1);
    return false;
  }
}

/**
 * Server-Sent Events from a fetch body: calls `onEvent(type, data)` for each, until the body
 * ends (resolves) or fails (rejects).
 */
export async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    const blocks = (rest + value).replace(/\r\n?/g, "\n").split("\n\n");
    rest = blocks.pop();
    for (const block of blocks) {
      let type = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") type = text;
        else if (field === "data") data.push(text);
      }
      if (data.length > 0) onEvent(type, data.join("\n"));
    }
  }
}

/**
 * A scrolling window over many lines: `lines` are `{pod, container, text}`; only those in
 * view (and OVERSCAN more each side) have elements. Without wrapping every line is one row
 * high; wrapped, a line's height is estimated from its length and the characters a row holds
 * (the font is monospaced), and offsets are summed once per change.
 */
export class LogWindow {
  constructor({ h, label, merged }) {
    this.h = h;
    this.merged = merged;
    // Whether each line's timestamp is shown (lines keep theirs either way).
    this.showTime = false;
    this.lines = [];
    // The lines shown: all of them, or those the search matches.
    this.shown = this.lines;
    this.query = "";
    this.wrap = false;
    this.following = true;
    this.offsets = null;
    this.frame = 0;
    this.unseen = 0;
    this.onFollowChange = () => {};
    this.rows = h("div", { class: "log-rows" });
    this.sizer = h("div", { class: "log-sizer" }, this.rows);
    this.el = h("div", { class: "log-window", tabindex: "0", role: "log", "aria-label": label }, this.sizer);
    this.lastTop = 0;
    this.el.addEventListener("scroll", () => {
      // A person scrolling up stops following; back at the end, it follows again.
      const atEnd = this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - LINE_HEIGHT;
      if (this.el.scrollTop < this.lastTop - 2 && !atEnd && this.following) this.setFollowing(false);
      this.lastTop = this.el.scrollTop;
      this.schedule();
    }, { passive: true });
    new ResizeObserver(() => {
      this.offsets = null;
      this.schedule();
    }).observe(this.el);
  }

  setFollowing(following) {
    this.following = following;
    if (following) this.unseen = 0;
    this.onFollowChange(following);
    this.schedule();
  }

  clear() {
    this.lines = [];
    this.shown = this.lines;
    this.unseen = 0;
    this.setQuery(this.query);
  }

  matches(line) {
    return !this.query || line.text.toLowerCase().includes(this.query) || (this.merged && line.pod.toLowerCase().includes(this.query));
  }

  append(batch) {
    for (const line of batch) {
      this.lines.push(line);
      if (this.shown !== this.lines && this.matches(line)) this.shown.push(line);
    }
    if (!this.following) this.unseen += batch.length;
    if (this.lines.length > MAX_LINES + DROP_LINES) {
      const before = this.shown.length;
      this.lines = this.lines.slice(this.lines.length - MAX_LINES);
      this.refilter();
      // Keep what a paused reader looks at where it is.
      if (!this.following) this.el.scrollTop -= (before - this.shown.length) * LINE_HEIGHT;
    }
    this.offsets = null;
    this.schedule();
  }

  refilter() {
    this.shown = this.query ? this.lines.filter((l) => this.matches(l)) : this.lines;
    this.offsets = null;
  }

  setQuery(query) {
    this.query = query.toLowerCase();
    this.refilter();
    this.schedule();
  }

  setShowTime(show) {
    this.showTime = show;
    this.offsets = null;
    this.schedule();
  }

  setWrap(wrap) {
    this.wrap = wrap;
    this.el.classList.toggle("wrap", wrap);
    this.offsets = null;
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  /** Where each shown line starts, wrapped; null without wrapping (every line is one row). */
  layout() {
    if (!this.wrap) return null;
    if (this.offsets) return this.offsets;
    const prefix = this.merged ? 24 : 0;
    const perRow = Math.max(20, Math.floor((this.el.clientWidth - 24) / this.charWidth()) - prefix);
    const offsets = new Float64Array(this.shown.length + 1);
    for (let i = 0; i < this.shown.length; i++) {
      offsets[i + 1] = offsets[i] + Math.max(1, Math.ceil(this.textOf(this.shown[i]).length / perRow)) * LINE_HEIGHT;
    }
    this.offsets = offsets;
    return offsets;
  }

  charWidth() {
    if (!this.measured) {
      const probe = this.h("span", { class: "log-probe" }, "0".repeat(100));
      this.el.append(probe);
      this.measured = probe.getBoundingClientRect().width / 100 || 7.2;
      probe.remove();
    }
    return this.measured;
  }

  draw() {
    const n = this.shown.length;
    const offsets = this.layout();
    const top = (i) => (offsets ? offsets[i] : i * LINE_HEIGHT);
    const height = top(n);
    this.sizer.style.height = `${height}px`;
    if (this.following) this.el.scrollTop = height;
    const viewTop = this.el.scrollTop;
    const viewBottom = viewTop + (this.el.clientHeight || 600);
    // The first line whose end is below the view's top.
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (top(mid + 1) <= viewTop) lo = mid + 1;
      else hi = mid;
    }
    const first = Math.max(0, lo - OVERSCAN);
    let last = lo;
    while (last < n && top(last) < viewBottom) last++;
    last = Math.min(n, last + OVERSCAN);
    this.rows.style.transform = `translateY(${top(first)}px)`;
    const wanted = last - first;
    while (this.rows.childElementCount > wanted) this.rows.lastChild.remove();
    while (this.rows.childElementCount < wanted) this.rows.append(this.h("div", { class: "log-line" }));
    let el = this.rows.firstChild;
    for (let i = first; i < last; i++, el = el.nextSibling) this.fill(el, this.shown[i]);
    this.lastTop = this.el.scrollTop;
  }

  /** The line's text as shown: with its timestamp first when those are shown. */
  textOf(line) {
    return this.showTime && line.stamp ? `${line.stamp} ${line.text}` : line.text;
  }

  /** Puts `line` into the row `el`, unless it is there already. */
  fill(el, line) {
    if (el.line === line && el.query === this.query && el.showTime === this.showTime) return;
    el.line = line;
    el.query = this.query;
    el.showTime = this.showTime;
    const parts = [];
    if (this.merged) {
      const tag = this.h("span", { class: "log-pod", title: `${line.pod}/${line.container}` }, `${line.pod}/${line.container}`);
      tag.style.setProperty("--hue", hueOf(line.pod));
      parts.push(tag);
    }
    const text = this.textOf(line);
    if (this.query) {
      const lower = text.toLowerCase();
      let at = 0;
      for (let found = lower.indexOf(this.query); found >= 0; found = lower.indexOf(this.query, at)) {
        parts.push(text.slice(at, found), this.h("mark", {}, text.slice(found, found + this.query.length)));
        at = found + this.query.length;
      }
      parts.push(text.slice(at));
    } else {
      parts.push(text);
    }
    el.replaceChildren(...parts);
  }

  /** The buffered lines as text, as `kubectl logs --prefix` writes a merged log. */
  text() {
    return this.lines.map((l) => (this.merged ? `[pod/${l.pod}/${l.container}] ${this.textOf(l)}` : this.textOf(l))).join("\n") + "\n";
  }
}
