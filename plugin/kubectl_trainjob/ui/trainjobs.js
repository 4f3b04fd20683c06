// What a TrainJob says, in words and figures, and the TrainJobs the viewer may list, watched
// once for every view.

import { duration, h } from "./dom.js";
import { Watch, key, session } from "./api.js";

export function conditions(o) {
  return (o.status && o.status.conditions) || [];
}

export function isTrue(o, type) {
  return conditions(o).some((c) => c.type === type && c.status === "True");
}

export function stateOf(tj) {
  if (isTrue(tj, "Complete")) return "Complete";
  const failed = conditions(tj).find((c) => c.type === "Failed" && c.status === "True");
  if (failed) return `Failed (${failed.reason || ""})`;
  if (tj.spec && tj.spec.suspend) return "Queued";
  const st = tj.status || {};
  if (st.clusterName || st.jobsStatus) return "Running";
  return "Created";
}

export const PHASES = ["pending", "running", "succeeded", "failed", "unknown"];
export function podCounts(tj) {
  const counts = (tj.status && tj.status.podsStatus) || [];
  const totals = Object.fromEntries(PHASES.map((p) => [p, 0]));
  for (const set of counts) for (const p of PHASES) totals[p] += Number(set[p] || 0);
  return totals;
}

export function podsInShort(tj) {
  if (!((tj.status && tj.status.podsStatus) || []).length) return "-";
  const totals = podCounts(tj);
  return PHASES.filter((p) => totals[p]).map((p) => `${totals[p]} ${p}`).join(", ") || "0";
}

export function trainerStatus(tj) {
  return (tj.status && tj.status.trainerStatus) || null;
}

export function progressCell(tj) {
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

export function queueOf(tj) {
  return (tj.metadata.labels || {})[session.queueLabel] || "-";
}

// Reported metrics over time, kept while the page is open (the API keeps the latest only).
// The TrainJob a view shows, whose reports are kept even when no list watches its namespace.
export const viewed = new Set();
export const history = new Map();
export function remember(tj) {
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

export const trainJobs = {
  watches: [],
  listeners: new Set(),
  start() {
    const api = `/apis/${session.trainerApi}`;
    const notify = () => {
      const alive = new Set();
      for (const tj of this.all()) { remember(tj); alive.add(key(tj)); }
      for (const gone of history.keys()) {
        if (!alive.has(gone) && !viewed.has(gone)) history.delete(gone);
      }
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
