// The TrainJob view: every TrainJob the viewer may list on the manager, one TrainJob's story
// and logs, and the workers. It reads the manager's API through the local server (/k8s/...),
// lists then watches as client-go does, and draws with the DOM only (no library, no network
// beyond this server).

const $main = document.getElementById("main");
const $problems = document.getElementById("problems");
let session = null;

// ---- small helpers --------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60);
  const secs = seconds % 60;
  if (hours) return `${hours}h${String(minutes).padStart(2, "0")}m`;
  return minutes ? `${minutes}m${String(secs).padStart(2, "0")}s` : `${secs}s`;
}

function age(timestamp) {
  if (!timestamp) return "-";
  const seconds = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${Math.floor(seconds)}s`;
}

function when(timestamp) {
  return timestamp ? new Date(timestamp).toLocaleString() : "-";
}

const problems = new Map(); // what cannot be read now, by what it is about
function problem(key, message) {
  if ((problems.get(key) || null) === (message || null)) return;
  if (message) problems.set(key, message);
  else problems.delete(key);
  $problems.replaceChildren(...[...problems.values()].map((m) => h("p", {}, m)));
}

async function statusMessage(response) {
  try {
    const body = await response.json();
    return `${response.status}: ${body.message || response.statusText}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

async function getJSON(path, query) {
  const response = await fetch(`/k8s${path}${query ? "?" + new URLSearchParams(query) : ""}`);
  if (!response.ok) throw new Error(await statusMessage(response));
  return response.json();
}

// ---- list, then watch from the list's resourceVersion; relist only on 410 -------------------

// One Watch keeps the objects of one or more paths (a list each, then their watches merged on
// one connection by the server's /watch: a browser opens at most six to a server).
class Watch {
  constructor(paths, onChange, what, query = {}) {
    this.parts = paths.map((path, i) => ({
      path, what: Array.isArray(what) ? what[i] : what, rv: null, items: new Map(),
      listed: false, forbidden: false, retryAt: 0,
    }));
    Object.assign(this, { onChange, query });
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

function key(o) {
  return `${o.metadata.namespace || ""}/${o.metadata.name}`;
}

// ---- what a TrainJob says ---------------------------------------------------------------------

function conditions(o) {
  return (o.status && o.status.conditions) || [];
}

function isTrue(o, type) {
  return conditions(o).some((c) => c.type === type && c.status === "True");
}

function stateOf(tj) {
  if (isTrue(tj, "Complete")) return "Complete";
  const failed = conditions(tj).find((c) => c.type === "Failed" && c.status === "True");
  if (failed) return `Failed (${failed.reason || ""})`;
  if (tj.spec && tj.spec.suspend) return "Queued";
  const st = tj.status || {};
  if (st.clusterName || st.jobsStatus) return "Running";
  return "Created";
}

const PHASES = ["pending", "running", "succeeded", "failed", "unknown"];
function podCounts(tj) {
  const counts = (tj.status && tj.status.podsStatus) || [];
  const totals = Object.fromEntries(PHASES.map((p) => [p, 0]));
  for (const set of counts) for (const p of PHASES) totals[p] += Number(set[p] || 0);
  return totals;
}

function podsInShort(tj) {
  if (!((tj.status && tj.status.podsStatus) || []).length) return "-";
  const totals = podCounts(tj);
  return PHASES.filter((p) => totals[p]).map((p) => `${totals[p]} ${p}`).join(", ") || "0";
}

function trainerStatus(tj) {
  return (tj.status && tj.status.trainerStatus) || null;
}

function progressCell(tj) {
  const ts = trainerStatus(tj);
  if (!ts || ts.progressPercentage === undefined || ts.progressPercentage === null) {
    return h("span", { class: "muted" }, ts ? "reported, no percentage" : "-");
  }
  const percent = Math.min(100, Math.max(0, Number(ts.progressPercentage)));
  const left = ts.estimatedRemainingSeconds;
  return h("span", { class: "progress" },
    h("progress", { max: "100", value: String(percent), "aria-label": `${tj.metadata.name} progress` }),
    h("span", { class: "percent" }, `${percent}%`),
    left !== undefined && left !== null ? h("span", { class: "left" }, `${duration(left)} left`) : null);
}

function queueOf(tj) {
  return (tj.metadata.labels || {})[session.queueLabel] || "-";
}

// Reported metrics over time, kept while the page is open (the API keeps the latest only).
const history = new Map();
function remember(tj) {
  const ts = trainerStatus(tj);
  if (!ts || !ts.lastUpdatedTime) return;
  const points = history.get(key(tj)) || [];
  if (points.length && points[points.length - 1].t === ts.lastUpdatedTime) return;
  const values = {};
  if (ts.progressPercentage !== undefined) values.progress = Number(ts.progressPercentage);
  for (const m of ts.metrics || []) {
    const v = Number(m.value);
    if (Number.isFinite(v)) values[m.name] = v;
  }
  points.push({ t: ts.lastUpdatedTime, values });
  if (points.length > 500) points.shift();
  history.set(key(tj), points);
}

// ---- the TrainJobs, watched once for every view -------------------------------------------------

const trainJobs = {
  watches: [],
  listeners: new Set(),
  start() {
    const api = `/apis/${session.trainerApi}`;
    const notify = () => {
      for (const tj of this.all()) remember(tj);
      for (const fn of this.listeners) fn();
    };
    const paths = session.allNamespaces
      ? [`${api}/trainjobs`]
      : session.namespaces.map((ns) => `${api}/namespaces/${ns}/trainjobs`);
    const what = session.allNamespaces
      ? "TrainJobs in every namespace" : session.namespaces.map((ns) => `TrainJobs in ${ns}`);
    this.watches = [new Watch(paths, notify, what).start()];
  },
  all() {
    return this.watches.flatMap((w) => [...w.items.values()]);
  },
  listed() {
    return this.watches.every((w) => w.listed);
  },
};

// ---- view: the list -----------------------------------------------------------------------------

const COLUMNS = [
  ["namespace", "Namespace", (tj) => tj.metadata.namespace],
  ["name", "Name", (tj) => tj.metadata.name],
  ["state", "State", stateOf],
  ["queue", "Queue", queueOf],
  ["worker", "Worker", (tj) => (tj.status && tj.status.clusterName) || "-"],
  ["progress", "Progress", (tj) => Number((trainerStatus(tj) || {}).progressPercentage ?? -1)],
  ["pods", "Pods", podsInShort],
  ["age", "Age", (tj) => -Date.parse(tj.metadata.creationTimestamp || 0)],
];

const listState = { sort: "age", descending: false, filter: "" };

// What the list filters and sorts by, worked out once per version of each TrainJob (a watch
// hands a new object for every change).
const derivedOf = new WeakMap();
function derived(tj) {
  let d = derivedOf.get(tj);
  if (!d) {
    const values = COLUMNS.map((c) => c[2](tj));
    const text = [tj.metadata.namespace, tj.metadata.name, values[2], values[3], values[4]]
      .join(" ").toLowerCase();
    d = { tj, key: key(tj), values, text };
    derivedOf.set(tj, d);
  }
  return d;
}

function jobsView() {
  const filter = h("input", {
    type: "search", id: "filter", placeholder: "name, namespace, state, queue or worker",
    value: listState.filter, "aria-label": "Filter TrainJobs",
    oninput: (e) => { listState.filter = e.target.value; draw(); },
  });
  const count = h("p", { id: "count", "aria-live": "polite" });
  const head = h("tr", {}, COLUMNS.map(([id, title]) => h("th", { scope: "col", "data-col": id },
    h("button", { type: "button", onclick: () => sortBy(id) }, title))));
  const tbody = h("tbody", { id: "trainjobs" });
  const rows = new Map();
  $main.replaceChildren(h("section", { "aria-labelledby": "jobs-title" },
    h("h2", { id: "jobs-title" }, "Jobs"),
    h("div", { class: "tools" }, h("label", { for: "filter" }, "Filter "), filter, count),
    h("table", { class: "jobs" }, h("thead", {}, head), tbody)));

  function sortBy(id) {
    listState.descending = listState.sort === id ? !listState.descending : false;
    listState.sort = id;
    draw();
  }

  function draw() {
    const words = listState.filter.toLowerCase().split(/\s+/).filter(Boolean);
    const index = COLUMNS.findIndex((c) => c[0] === listState.sort);
    const shown = trainJobs.all().map(derived).filter((d) => words.every((w) => d.text.includes(w)));
    shown.sort((a, b) => {
      const x = a.values[index], y = b.values[index];
      const order = x < y ? -1 : x > y ? 1 : a.key < b.key ? -1 : 1;
      return listState.descending ? -order : order;
    }).forEach((d, i) => { shown[i] = d.tj; });
    for (const th of head.children) {
      th.setAttribute("aria-sort", th.dataset.col === listState.sort
        ? (listState.descending ? "descending" : "ascending") : "none");
    }
    // Rows are kept while their TrainJob exists (filtered out or not) and made again only
    // when it changed; the table is put in order in one step when its order changed.
    const wanted = shown.map((tj) => {
      const signature = `${tj.metadata.resourceVersion}|${age(tj.metadata.creationTimestamp)}`;
      let row = rows.get(tj.metadata.uid);
      if (!row || row.signature !== signature) {
        const fresh = jobRow(tj);
        fresh.signature = signature;
        if (row && row.parentNode) row.replaceWith(fresh);
        row = fresh;
        rows.set(tj.metadata.uid, row);
      }
      return row;
    });
    const now = tbody.children;
    if (now.length !== wanted.length || wanted.some((row, i) => now[i] !== row)) {
      tbody.replaceChildren(...wanted);
    }
    const alive = new Set(trainJobs.all().map((tj) => tj.metadata.uid));
    for (const id of rows.keys()) if (!alive.has(id)) rows.delete(id);
    const all = trainJobs.all().length;
    count.textContent = trainJobs.listed()
      ? `${shown.length} of ${all} TrainJob${all === 1 ? "" : "s"}` : "Listing...";
  }

  trainJobs.listeners.add(draw);
  const ticker = setInterval(draw, 5000); // ages and times left move on
  draw();
  return () => { trainJobs.listeners.delete(draw); clearInterval(ticker); };
}

function jobRow(tj) {
  const { namespace, name } = tj.metadata;
  const state = stateOf(tj);
  return h("tr", { "data-key": `${namespace}/${name}`, "data-state": state.split(" ")[0] },
    h("td", {}, namespace),
    h("th", { scope: "row" }, h("a", { href: `#/trainjobs/${namespace}/${name}` }, name)),
    h("td", { class: "state" }, h("span", { class: `badge ${state.split(" ")[0]}` }, state)),
    h("td", {}, queueOf(tj)),
    h("td", { class: "worker" }, (tj.status && tj.status.clusterName) || "-"),
    h("td", {}, progressCell(tj)),
    h("td", { class: "pods" }, podsInShort(tj)),
    h("td", {}, age(tj.metadata.creationTimestamp)));
}

// ---- view: one TrainJob ---------------------------------------------------------------------------

function jobView(namespace, name) {
  const api = `/apis/${session.trainerApi}/namespaces/${namespace}/trainjobs`;
  const story = `/apis/${session.viewApi}/namespaces/${namespace}/trainjobs/${name}`;
  const summary = h("div", { id: "summary" });
  const conds = h("div", { id: "conditions" });
  const timeline = h("ol", { id: "timeline", class: "timeline" });
  const pods = h("div", { id: "pods" });
  const events = h("div", { id: "events" });
  const chart = h("div", { id: "chart" });
  const log = h("pre", { id: "log", role: "log", tabindex: "0", "aria-label": "Log", "aria-live": "off" });
  const podSelect = h("select", { id: "log-pod", "aria-label": "Pod" });
  const containerSelect = h("select", { id: "log-container", "aria-label": "Container" });
  const logState = h("span", { id: "log-state", class: "muted", "aria-live": "polite" });
  let trainjob = null, storyBody = null, stream = null, retry = null;

  $main.replaceChildren(h("article", { "aria-labelledby": "job-title" },
    h("p", {}, h("a", { href: "#/" }, "All jobs")),
    h("h2", { id: "job-title" }, `${namespace}/${name}`),
    summary,
    h("section", {}, h("h3", {}, "Conditions"), conds),
    h("section", {}, h("h3", {}, "Where it ran"), timeline),
    h("section", {}, h("h3", {}, "Reported metrics"), chart),
    h("section", {}, h("h3", {}, "Pods"), pods),
    h("section", {}, h("h3", {}, "Logs"),
      h("div", { class: "tools" },
        h("label", { for: "log-pod" }, "Pod "), podSelect,
        h("label", { for: "log-container" }, " Container "), containerSelect, " ", logState),
      log),
    h("section", {}, h("h3", {}, "Events"), events)));

  function drawJob() {
    if (!trainjob) {
      summary.replaceChildren(h("p", { class: "muted" }, watch.listed ? "No such TrainJob (or it was deleted)." : "Reading..."));
      return;
    }
    remember(trainjob);
    const ts = trainerStatus(trainjob);
    summary.replaceChildren(h("dl", { class: "facts" },
      h("dt", {}, "State"), h("dd", { id: "state" }, stateOf(trainjob)),
      h("dt", {}, "Worker"), h("dd", { id: "worker" }, (trainjob.status && trainjob.status.clusterName) || "-"),
      h("dt", {}, "Queue"), h("dd", {}, queueOf(trainjob)),
      h("dt", {}, "Runtime"), h("dd", {}, ((trainjob.spec || {}).runtimeRef || {}).name || "-"),
      h("dt", {}, "Progress"), h("dd", {}, progressCell(trainjob),
        ts && ts.lastUpdatedTime ? h("span", { class: "muted" }, ` reported ${age(ts.lastUpdatedTime)} ago`) : null),
      h("dt", {}, "Pods"), h("dd", {}, podsInShort(trainjob)),
      h("dt", {}, "Created"), h("dd", {}, when(trainjob.metadata.creationTimestamp))));
    conds.replaceChildren(conditionList(conditions(trainjob)));
    drawChart(chart, history.get(`${namespace}/${name}`) || [], ts);
  }

  function drawStory() {
    if (!storyBody) return;
    timeline.replaceChildren(...(storyBody.placements.length ? storyBody.placements.map((p) =>
      h("li", { class: p.current ? "current" : "" },
        h("strong", {}, p.worker || "-"), ` from ${when(p.started)}`,
        p.ended ? ` to ${when(p.ended)}: ${p.reason || "ended"}` : " (running)",
        p.message ? h("span", { class: "muted" }, ` ${p.message}`) : null))
      : [h("li", { class: "muted" }, storyBody.queues.length
        ? "Waiting: " + storyBody.queues.map((q) => `${q.worker} (${q.copy || q.problem || "?"}${q.pendingInClusterQueue !== undefined ? `, ${q.pendingInClusterQueue} pending in ${q.clusterQueue}` : ""})`).join("; ")
        : "Not placed on any worker yet.")]));
    if (storyBody.workerProblem) timeline.append(h("li", { class: "warn" }, storyBody.workerProblem));
    pods.replaceChildren(storyBody.pods.length ? table(["Pod", "Worker", "Role", "Index", "Phase", "Ready", "Restarts", "Node"],
      storyBody.pods.map((p) => [p.name + (p.kept ? " (ended; tail kept)" : ""), p.worker, p.replicatedJob, p.index, p.phase, p.ready ? "yes" : "no", p.restarts, p.node || "-"]))
      : h("p", { class: "muted" }, "No pods."));
    events.replaceChildren(storyBody.events.length ? table(["Last seen", "Where", "Type", "Reason", "Object", "Message"],
      storyBody.events.slice().reverse().map((e) => [age(e.lastTimestamp) + " ago", e.source, e.type, e.reason, e.object, e.message]))
      : h("p", { class: "muted" }, "No events."));
    const choices = storyBody.pods.map((p) => p.name);
    if (choices.join() !== [...podSelect.options].map((o) => o.value).join()) {
      const keep = podSelect.value;
      podSelect.replaceChildren(...choices.map((n) => h("option", { value: n }, n)));
      if (choices.includes(keep)) podSelect.value = keep;
      containersFor();
      if (!choices.includes(keep)) follow();
    }
  }

  function containersFor() {
    const pod = storyBody.pods.find((p) => p.name === podSelect.value);
    const names = (pod && pod.containers) || [];
    containerSelect.replaceChildren(...names.map((n) => h("option", { value: n }, n)));
    if (names.includes("node")) containerSelect.value = "node";
  }

  async function follow() {
    if (stream) stream.abort();
    clearTimeout(retry);
    const mine = stream = new AbortController();
    log.textContent = "";
    if (!podSelect.value) { logState.textContent = "no pod"; return; }
    const query = new URLSearchParams({ pod: podSelect.value, follow: "true", tailLines: "1000" });
    if (containerSelect.value) query.set("container", containerSelect.value);
    logState.textContent = "connecting";
    try {
      const response = await fetch(`/k8s${story}/log?${query}`, { signal: mine.signal });
      if (!response.ok) {
        // not started yet, or its worker unreachable: said, and asked again soon
        logState.textContent = `${await statusMessage(response)} (trying again)`;
        retry = setTimeout(() => { if (stream === mine) follow(); }, 3000);
        return;
      }
      logState.textContent = "following";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.append(value);
        if (log.textContent.length > 400000) log.textContent = log.textContent.slice(-300000);
        if (atEnd) log.scrollTop = log.scrollHeight;
      }
      logState.textContent = "ended";
    } catch (err) {
      if (err.name !== "AbortError") logState.textContent = `stopped: ${err.message}`;
    }
  }

  podSelect.addEventListener("change", () => { containersFor(); follow(); });
  containerSelect.addEventListener("change", follow);

  const watch = new Watch([api], (w) => { trainjob = w.items.get(`${namespace}/${name}`) || null; drawJob(); },
    `TrainJob ${namespace}/${name}`, { fieldSelector: `metadata.name=${name}` }).start();
  let reading = false;
  async function readStory() {
    if (reading) return;
    reading = true;
    try {
      storyBody = await getJSON(`${story}/story`);
      problem("story", null);
      drawStory();
    } catch (err) {
      problem("story", `Cannot read the story of ${namespace}/${name}: ${err.message}`);
    } finally {
      reading = false;
    }
  }
  readStory();
  const ticker = setInterval(() => { readStory(); drawJob(); }, 4000);
  drawJob();
  return () => {
    watch.stop(); clearInterval(ticker); clearTimeout(retry); if (stream) stream.abort(); stream = null;
    problem("story", null);
  };
}

function conditionList(list) {
  if (!list.length) return h("p", { class: "muted" }, "No conditions yet.");
  return h("ul", { class: "conditions" }, list.map((c) => h("li", { class: c.status === "True" ? "true" : "false" },
    h("strong", {}, c.type), c.status === "True" ? "" : h("span", {}, ` (${c.status === "False" ? "not" : c.status})`),
    c.reason ? `: ${c.reason}` : "", c.message ? h("span", { class: "message" }, ` - ${c.message}`) : "",
    h("span", { class: "muted" }, ` since ${when(c.lastTransitionTime)}`))));
}

function table(header, rows) {
  return h("table", {}, h("thead", {}, h("tr", {}, header.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((cell) => h("td", {}, cell ?? "-"))))));
}

function drawChart(into, points, ts) {
  const names = [...new Set(points.flatMap((p) => Object.keys(p.values)))];
  if (!names.length) {
    into.replaceChildren(h("p", { class: "muted" }, ts ? "Reported, with no numbers." : "Nothing reported yet."));
    return;
  }
  const latest = (ts && ts.metrics) || [];
  const figures = h("p", {}, latest.map((m) => h("span", { class: "metric" }, `${m.name} = ${m.value}`)));
  const width = 640, height = 180, pad = 30;
  const times = points.map((p) => Date.parse(p.t));
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1);
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart" });
  const title = s("title", {});
  title.textContent = `Reported values over time since this page opened: ${names.join(", ")}`;
  svg.append(title, s("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, class: "axis" }));
  const legend = h("ul", { class: "legend" });
  names.forEach((name, i) => {
    const series = points.filter((p) => name in p.values);
    const vs = series.map((p) => p.values[name]);
    const lo = Math.min(...vs), hi = Math.max(...vs);
    const xy = series.map((p) => [
      pad + ((Date.parse(p.t) - t0) / (t1 - t0)) * (width - 2 * pad),
      height - pad - ((p.values[name] - lo) / (hi - lo || 1)) * (height - 2 * pad)]);
    svg.append(s("polyline", { points: xy.map((p) => p.join(",")).join(" "), class: `series s${i % 6}` }));
    for (const [x, y] of xy) svg.append(s("circle", { cx: x, cy: y, r: 2.5, class: `series s${i % 6}` }));
    legend.append(h("li", { class: `s${i % 6}` }, lo === hi ? `${name}: ${lo}` : `${name}: ${lo} to ${hi}`));
  });
  into.replaceChildren(figures, svg, legend,
    h("p", { class: "muted" }, `${points.length} report${points.length === 1 ? "" : "s"} seen since this page opened; each series is scaled to its own range.`));
}

// ---- view: the clusters ------------------------------------------------------------------------

function clustersView() {
  const kueue = `/apis/${session.kueueApi}`;
  const workersBox = h("div", { id: "workers" });
  const queuesBox = h("div", { id: "manager-queues" });
  $main.replaceChildren(h("section", { "aria-labelledby": "clusters-title" },
    h("h2", { id: "clusters-title" }, "Workers"), workersBox,
    h("h2", {}, "Waiting on the manager, by ClusterQueue"), queuesBox));
  let workers = null, workersProblem = null;

  function draw() {
    const mkcs = mkcWatch.items;
    const names = new Set([...[...mkcs.values()].map((m) => m.metadata.name), ...((workers || []).map((w) => w.metadata.name))]);
    const jobs = trainJobs.all();
    const cards = [...names].sort().map((name) => {
      const mkc = mkcs.get(`/${name}`);
      const active = mkc ? conditions(mkc).find((c) => c.type === "Active") : null;
      const seen = (workers || []).find((w) => w.metadata.name === name);
      const up = active ? active.status === "True" : seen ? seen.connection === "Connected" : null;
      const here = jobs.filter((tj) => tj.status && tj.status.clusterName === name);
      const byState = {};
      for (const tj of here) { const st = stateOf(tj).split(" ")[0]; byState[st] = (byState[st] || 0) + 1; }
      return h("section", { class: `worker ${up === false ? "down" : up ? "up" : ""}`, "data-worker": name, "aria-labelledby": `w-${name}` },
        h("h3", { id: `w-${name}` }, name, " ",
          h("span", { class: `badge ${up === false ? "Failed" : up ? "Complete" : ""}`, "data-connection": up === false ? "down" : up ? "up" : "unknown" },
            up === false ? "Unreachable" : up ? "Connected" : "Unknown")),
        active && active.status !== "True" ? h("p", { class: "warn" }, `${active.reason}: ${active.message} (since ${when(active.lastTransitionTime)})`) : null,
        seen && seen.problem && up !== false ? h("p", { class: "warn" }, seen.problem) : null,
        h("p", {}, `${here.length} TrainJob${here.length === 1 ? "" : "s"} placed here`,
          Object.keys(byState).length ? ": " + Object.entries(byState).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(", ") : ""),
        seen ? queuesOf(seen) : h("p", { class: "muted" }, workersProblem || "Quota not known yet."));
    });
    workersBox.replaceChildren(...(cards.length ? cards : [h("p", { class: "muted" }, mkcWatch.forbidden ? "You may not list MultiKueueClusters." : "No workers.")]));
    const cqs = [...cqWatch.items.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    queuesBox.replaceChildren(cqs.length ? table(["ClusterQueue", "Pending", "Reserving", "Admitted"],
      cqs.map((cq) => [cq.metadata.name, (cq.status || {}).pendingWorkloads ?? 0, (cq.status || {}).reservingWorkloads ?? 0, (cq.status || {}).admittedWorkloads ?? 0]))
      : h("p", { class: "muted" }, cqWatch.forbidden ? "You may not list ClusterQueues." : "No ClusterQueues."));
  }

  function queuesOf(worker) {
    if (worker.clusterQueues === null) return h("p", { class: "muted" }, "Its ClusterQueues are not known (unreachable, or not readable).");
    const stale = worker.connection !== "Connected" ? h("p", { class: "muted" }, "As last seen before it became unreachable.") : null;
    const rows = worker.clusterQueues.flatMap((cq) => {
      const lines = cq.flavors.flatMap((f) => f.resources.map((r) => [f, r]));
      return lines.map(([f, r], i) => h("tr", {},
        i === 0 ? h("th", { scope: "row", rowspan: String(lines.length) }, cq.name) : null,
        i === 0 ? h("td", { rowspan: String(lines.length) }, `${cq.pendingWorkloads} pending, ${cq.admittedWorkloads} admitted`) : null,
        h("td", {}, `${f.name} ${r.name}`),
        h("td", {}, h("progress", { max: "1", value: String(r.share), "aria-label": `${cq.name} ${f.name} ${r.name} reserved` })),
        h("td", {}, `${r.reserved} of ${r.nominalQuota} reserved, ${r.used} in use`)));
    });
    return h("div", {}, stale, h("table", { class: "cq" },
      h("thead", {}, h("tr", {}, ["ClusterQueue", "Workloads", "Flavour and resource", "Reserved", "Quota and use"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)));
  }

  async function poll() {
    try {
      workers = (await getJSON(`/apis/${session.viewApi}/workers`)).items;
      workersProblem = null;
    } catch (err) {
      workersProblem = `The workers' quota cannot be read: ${err.message}`;
    }
    draw();
  }

  const mkcWatch = new Watch([`${kueue}/multikueueclusters`], draw, "MultiKueueClusters").start();
  const cqWatch = new Watch([`${kueue}/clusterqueues`], draw, "ClusterQueues").start();
  trainJobs.listeners.add(draw);
  poll();
  const ticker = setInterval(poll, 3000);
  return () => {
    mkcWatch.stop(); cqWatch.stop(); clearInterval(ticker); trainJobs.listeners.delete(draw);
    problem("MultiKueueClusters", null); problem("ClusterQueues", null);
  };
}

// ---- routes -------------------------------------------------------------------------------------

let leave = () => {};
function route() {
  leave();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  document.getElementById("nav-jobs").removeAttribute("aria-current");
  document.getElementById("nav-clusters").removeAttribute("aria-current");
  if (parts[0] === "trainjobs" && parts.length === 3) {
    leave = jobView(parts[1], parts[2]);
    document.title = `${parts[2]} - TrainJobs`;
  } else if (parts[0] === "clusters") {
    leave = clustersView();
    document.getElementById("nav-clusters").setAttribute("aria-current", "page");
    document.title = "Clusters - TrainJobs";
  } else {
    leave = jobsView();
    document.getElementById("nav-jobs").setAttribute("aria-current", "page");
    document.title = "TrainJobs";
  }
}

async function start() {
  session = await (await fetch("/session.json")).json();
  document.getElementById("session").textContent =
    `${session.context} - ${session.allNamespaces ? "every namespace" : session.namespaces.join(", ")}`;
  trainJobs.start();
  window.addEventListener("hashchange", route);
  route();
}

start();
