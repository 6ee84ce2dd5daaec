// The log view: a pod's log, or a workload's pods merged, read as Server-Sent Events with fetch
// (so the Authorization header goes with it). Lines are kept in a bounded buffer (the last
// MAX_LINES) and only the rows in view are in the DOM, drawn at most once a frame: thousands
// of lines a minute cost a few row updates a frame, whatever the buffer holds.

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
      offsets[i + 1] = offsets[i] + Math.max(1, Math.ceil(this.shown[i].text.length / perRow)) * LINE_HEIGHT;
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

  /** Puts `line` into the row `el`, unless it is there already. */
  fill(el, line) {
    if (el.line === line && el.query === this.query) return;
    el.line = line;
    el.query = this.query;
    const parts = [];
    if (this.merged) {
      const tag = this.h("span", { class: "log-pod", title: `${line.pod}/${line.container}` }, `${line.pod}/${line.container}`);
      tag.style.setProperty("--hue", hueOf(line.pod));
      parts.push(tag);
    }
    const text = line.text;
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
    return this.lines.map((l) => (this.merged ? `[pod/${l.pod}/${l.container}] ${l.text}` : l.text)).join("\n") + "\n";
  }
}
