// The TrainJob view: every TrainJob the viewer may list on the manager, one TrainJob's story
// and logs, and the workers. It reads the manager's API through the local server (/k8s/...,
// /watch), lists then watches as client-go does, and draws with the DOM only (no library, no
// network beyond this server). Each view is a module; this one routes between them.

import { problem, session, statusMessage } from "./api.js";
import { clustersView } from "./clusters.js";
import { jobView } from "./job.js";
import { jobsView } from "./list.js";
import { trainJobs } from "./trainjobs.js";

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
  // ?namespaces=a,b in the page's address: the namespaces to show when the viewer may not
  // list every one (behind a proxy; locally, --namespaces says it)
  const response = await fetch("/session.json" + location.search);
  if (!response.ok) {
    problem("session", `Cannot start: ${await statusMessage(response)}`);
    return;
  }
  Object.assign(session, await response.json());
  document.getElementById("session").textContent =
    `${session.context} - ${session.allNamespaces ? "every namespace" : session.namespaces.join(", ")}`;
  trainJobs.start();
  window.addEventListener("hashchange", route);
  route();
}

start();
