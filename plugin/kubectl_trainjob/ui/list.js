// The list of TrainJobs: filter, sort, and rows made again only when their TrainJob changed.

import { age, h } from "./dom.js";
import { key } from "./api.js";
import { podsInShort, progressCell, queueOf, stateOf, trainJobs, trainerStatus } from "./trainjobs.js";

const $main = document.getElementById("main");

/** @type {[string, string, (tj: any) => any][]} */
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

export function jobsView() {
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
