// The workers: their connection, the TrainJobs placed there, their ClusterQueues' quota and
// use; and the manager's queues.

import { h, table, when } from "./dom.js";
import { Watch, getJSON, problem, session } from "./api.js";
import { conditions, stateOf, trainJobs } from "./trainjobs.js";

const $main = document.getElementById("main");

export function clustersView() {
  const kueue = `/apis/${session.kueueApi}`;
  const workersBox = h("div", { id: "workers" });
  const queuesBox = h("div", { id: "manager-queues" });
  $main.replaceChildren(h("section", { "aria-labelledby": "clusters-title" },
    h("h2", { id: "clusters-title" }, "Workers"), workersBox,
    h("h2", {}, "Waiting on the manager, by ClusterQueue"), queuesBox));
  /** @type {import("./story").Worker[] | null} */
  let workers = null;
  let workersProblem = null;

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

  /** @param {import("./story").Worker} worker */
  function queuesOf(worker) {
    if (worker.clusterQueues === null) return h("p", { class: "muted" }, "Its ClusterQueues are not known (unreachable, or not readable).");
    const stale = worker.connection !== "Connected" ? h("p", { class: "muted" }, "As last seen before it became unreachable.") : null;
    const rows = worker.clusterQueues.flatMap((cq) => {
      const lines = cq.flavors.flatMap((f) => f.resources.map((r) => ({ f, r })));
      return lines.map(({ f, r }, i) => h("tr", {},
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
