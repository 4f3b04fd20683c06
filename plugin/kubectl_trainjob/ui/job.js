// One TrainJob: its facts, conditions, runs, reported metrics, pods, live log and Events.

import { age, h, s, table, when } from "./dom.js";
import { Watch, getJSON, problem, session, statusMessage } from "./api.js";
import { conditions, history, podsInShort, progressCell, queueOf, remember, stateOf, trainerStatus, viewed } from "./trainjobs.js";

const $main = document.getElementById("main");

export function jobView(namespace, name) {
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
  let trainjob = null, stream = null, retry = null;
  /** @type {import("./story").TrainJobStory | null} */
  let storyBody = null;
  viewed.add(`${namespace}/${name}`);

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
        p.resumedFrom ? ` at step ${p.startStep ?? "?"} (resumed from ${p.resumedFrom})` : "",
        p.restarts ? `, restarted ${p.restarts}x` : "",
        p.ended ? ` to ${when(p.ended)}: ${p.reason || "ended"}` : " (running)",
        p.message ? h("span", { class: "muted" }, ` ${p.message}`) : null))
      : [h("li", { class: "muted" }, storyBody.queues.length
        ? "Waiting: " + storyBody.queues.map((q) => `${q.worker} (${q.copy || q.problem || "?"}${q.pendingInClusterQueue != null ? `, ${q.pendingInClusterQueue} pending in ${q.clusterQueue}` : ""})`).join("; ")
        : "Not placed on any worker yet.")]));
    if (storyBody.workerProblem) timeline.append(h("li", { class: "warn" }, storyBody.workerProblem));
    pods.replaceChildren(...podTable(storyBody));
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
    viewed.delete(`${namespace}/${name}`);
    problem("story", null);
  };
}

// The pods, with CPU and memory as the worker's metrics API last measured them (as
// `kubectl top pod` shows them) when it serves one; otherwise why not, under the table.
/** @param {import("./story").TrainJobStory} story */
function podTable(story) {
  if (!story.pods.length) return [h("p", { class: "muted" }, "No pods.")];
  const measured = story.pods.some((p) => p.usage);
  const head = ["Pod", "Worker", "Role", "Index", "Phase", "Ready", "Restarts", "Node"];
  const rows = story.pods.map((p) => [p.name + (p.kept ? " (ended; tail kept)" : ""), p.worker, p.replicatedJob, p.index,
    p.phase, p.ready ? "yes" : "no", p.restarts, p.node || "-",
    ...(measured ? p.usage ? [`${p.usage.cpuMillicores}m`, `${Math.ceil(p.usage.memoryBytes / 1048576)}Mi`] : ["-", "-"] : [])]);
  const out = [table(measured ? [...head, "CPU", "Memory"] : head, rows)];
  if (story.morePods) out.push(h("p", { class: "muted", id: "pods-more" }, `The first ${story.pods.length} pods; the worker has more.`));
  if (measured) {
    const window = story.pods.map((p) => p.usage && p.usage.window).find(Boolean);
    const seconds = Math.round(parseFloat(window));
    out.push(h("p", { class: "muted", id: "pods-usage" }, `CPU and memory as the worker's metrics API measured them${seconds ? `, over ${seconds} s` : ""}.`));
  } else if (story.usageProblem) {
    out.push(h("p", { class: "muted", id: "pods-usage" }, `No CPU and memory use: ${story.usageProblem}.`));
  }
  return out;
}

function conditionList(list) {
  if (!list.length) return h("p", { class: "muted" }, "No conditions yet.");
  return h("ul", { class: "conditions" }, list.map((c) => h("li", { class: c.status === "True" ? "true" : "false" },
    h("strong", {}, c.type), c.status === "True" ? "" : h("span", {}, ` (${c.status === "False" ? "not" : c.status})`),
    c.reason ? `: ${c.reason}` : "", c.message ? h("span", { class: "message" }, ` - ${c.message}`) : "",
    h("span", { class: "muted" }, ` since ${when(c.lastTransitionTime)}`))));
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
