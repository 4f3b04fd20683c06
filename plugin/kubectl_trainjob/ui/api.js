// Reading the manager's API through the local server: its errors, what cannot be read now
// (the banner at the top), and lists kept up to date by watches.

import { h } from "./dom.js";

// Filled from /session.json at start: the viewer's context, scope and the APIs' names.
export const session = {};

const $problems = document.getElementById("problems");

const problems = new Map(); // what cannot be read now, by what it is about
export function problem(key, message) {
  if ((problems.get(key) || null) === (message || null)) return;
  if (message) problems.set(key, message);
  else problems.delete(key);
  $problems.replaceChildren(...[...problems.values()].map((m) => h("p", {}, m)));
}

export async function statusMessage(response) {
  try {
    const body = await response.json();
    return `${response.status}: ${body.message || response.statusText}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

export async function getJSON(path, query) {
  const response = await fetch(`/k8s${path}${query ? "?" + new URLSearchParams(query) : ""}`);
  if (!response.ok) throw new Error(await statusMessage(response));
  return response.json();
}

// ---- list, then watch from the list's resourceVersion; relist only on 410 -------------------

// One Watch keeps the objects of one or more paths (a list each, then their watches merged on
// one connection by the server's /watch: a browser opens at most six to a server).
export class Watch {
  constructor(paths, onChange, what, query = {}) {
    this.parts = paths.map((path, i) => ({
      path, what: Array.isArray(what) ? what[i] : what, rv: null, items: new Map(),
      listed: false, forbidden: false, retryAt: 0,
    }));
    this.onChange = onChange;
    this.query = query;
    this.stopped = false;
    this.controller = null;
  }

  start() {
    this.loop();
    return this;
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  get items() {
    if (this.parts.length === 1) return this.parts[0].items;
    return new Map(this.parts.flatMap((p) => [...p.items]));
  }

  get listed() {
    return this.parts.every((p) => p.listed || p.forbidden);
  }

  get forbidden() {
    return this.parts.every((p) => p.forbidden);
  }

  changed() {
    if (!this.pending) {
      this.pending = true;
      setTimeout(() => { this.pending = false; if (!this.stopped) this.onChange(this); }, 50);
    }
  }

  async list(part) {
    try {
      const body = await getJSON(part.path, this.query);
      part.items = new Map(body.items.map((o) => [key(o), o]));
      part.rv = body.metadata.resourceVersion;
      part.listed = true;
      part.forbidden = false;
      problem(part.what, null);
    } catch (err) {
      part.forbidden = /^403/.test(err.message);
      part.retryAt = Date.now() + (part.forbidden ? 30000 : 3000);
      problem(part.what, `Cannot read ${part.what}: ${err.message}`);
    }
    this.changed();
  }

  async loop() {
    let wait = 500;
    while (!this.stopped) {
      for (const part of this.parts) {
        if (part.rv === null && Date.now() >= part.retryAt) await this.list(part);
      }
      const live = this.parts.filter((p) => p.rv !== null);
      try {
        if (!live.length) throw new Error("nothing to watch");
        await this.follow(live);
        wait = 500;
      } catch (err) {
        if (this.stopped) return;
        if (live.length) problem(live[0].what, `Watching ${live[0].what}: ${err.message} (trying again)`);
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 10000);
      }
    }
  }

  async follow(live) {
    this.controller = new AbortController();
    const query = new URLSearchParams();
    for (const part of live) {
      const watch = new URLSearchParams({
        ...this.query, watch: "1", resourceVersion: part.rv, allowWatchBookmarks: "true",
        timeoutSeconds: "240",
      });
      query.append("p", `${part.path}?${watch}`);
    }
    const response = await fetch(`/watch?${query}`, { signal: this.controller.signal });
    if (!response.ok) throw new Error(await statusMessage(response));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.trim()) continue;
        const said = JSON.parse(line);
        const part = live[said.i];
        if (said.end !== undefined) {
          if (said.end === 200) { problem(part.what, null); return; } // ended: watch again
          if (said.end === 410) { part.rv = null; return; } // too old: list again
          part.rv = null;
          part.retryAt = Date.now() + 3000;
          throw new Error(`${said.end}: ${said.message}`);
        }
        const event = said.event;
        if (event.type === "ERROR") {
          part.rv = null; // 410 (too old) or another refusal: list again
          if (event.object.code === 410) return;
          throw new Error(`${event.object.code}: ${event.object.message}`);
        }
        part.rv = event.object.metadata.resourceVersion;
        problem(part.what, null);
        if (event.type === "BOOKMARK") continue;
        if (event.type === "DELETED") part.items.delete(key(event.object));
        else part.items.set(key(event.object), event.object);
        this.changed();
      }
    }
  }
}

export function key(o) {
  return `${o.metadata.namespace || ""}/${o.metadata.name}`;
}
