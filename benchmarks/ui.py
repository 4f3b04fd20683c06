"""Benchmark: the web view (`kubectl trainjob ui`) in headless Chromium against the kwok bed.

1. A status change on a worker, to the page: one TrainJob runs on a worker and its pod reports
   progress as a trainer pod does (benchmarks/progress_reports.py's Job), `--reports` times,
   one report per worker write interval. For each, from the moment a watch on the worker's
   API server sees the new status of the TrainJob there, to the moment the page's progress
   bar shows it (the page's clock and ours are this machine's).
2. Many TrainJobs: `--jobs` more TrainJobs held on the manager (their queue does not exist),
   then the list page loaded `--loads` times: from navigation to every row drawn, Chromium's
   JS heap and DOM node count, and the time from a filter keystroke and from a sort click to
   the next frame with the table redrawn.
3. The size of the served files, and every request the page made (all to the local server).

Needs a running bed (`python -m clusters up`).

    .venv/bin/python benchmarks/ui.py [--reports 10] [--jobs 1000] [--loads 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, watch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.multikueue import TRAINER, product, run_patch, trainjob_body
from benchmarks.progress_reports import Job, _running
from clusters.helpers.browser import browser, view_server
from kubectl_trainjob.ui import ASSETS

WATCH_ROWS = """(key) => {
  window.__shown = {};
  const note = () => {
    const bar = document.querySelector(`tr[data-key="${key}"] progress`);
    const v = bar && bar.getAttribute("value");
    if (v !== null && v !== undefined && !(v in window.__shown)) window.__shown[v] = Date.now();
  };
  new MutationObserver(note).observe(document.getElementById("trainjobs"),
    { subtree: true, childList: true, attributes: true });
  note();
}"""

NEXT_FRAME = """async (act) => {
  const t0 = performance.now();
  if (act === "filter") {
    const f = document.getElementById("filter");
    f.value = "held-99"; f.dispatchEvent(new Event("input"));
  } else if (act === "unfilter") {
    const f = document.getElementById("filter");
    f.value = ""; f.dispatchEvent(new Event("input"));
  } else {
    document.querySelector('th[data-col="name"] button').click();
  }
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r)));
  return performance.now() - t0;
}"""


def spread(values: list[float], unit: str = "ms") -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return (
        f"median {statistics.median(values):.0f} {unit}, p95 {p95:.0f}, "
        f"min {values[0]:.0f}, max {values[-1]:.0f} (n={len(values)})"
    )


def worker_seen(api: client.ApiClient, ns: str, name: str, seen: dict[int, float]) -> None:
    """When the worker's API server first shows each progress value of our copy there."""
    custom = client.CustomObjectsApi(api)
    for event in watch.Watch().stream(
        custom.list_namespaced_custom_object,
        *TRAINER,
        ns,
        "trainjobs",
        field_selector=f"metadata.name={name}",
        timeout_seconds=600,
    ):
        ts = (event["object"].get("status") or {}).get("trainerStatus") or {}
        percent = ts.get("progressPercentage")
        if percent is not None and percent not in seen:
            seen[int(percent)] = time.time()
        if -1 in seen:
            return


def status_to_page(bed: Any, ctrls: Any, ns: str, url: str, reports: int, every: float) -> None:
    manager = bed.config.managers[0].name
    custom = client.CustomObjectsApi(bed.api(manager))
    custom.create_namespaced_custom_object(
        *TRAINER, ns, "trainjobs", trainjob_body("watched", run_patch("3600s"))
    )
    worker = _running(custom, bed, ns, ["watched"])["watched"]
    job = Job(bed, ctrls, ns, "watched", worker)
    seen: dict[int, float] = {}
    threading.Thread(
        target=worker_seen, args=(bed.api(worker), ns, "watched", seen), daemon=True
    ).start()
    with browser() as b:
        page = b.new_page(viewport={"width": 1366, "height": 768})
        page.goto(url)
        page.wait_for_selector(f'tr[data-key="{ns}/watched"]', timeout=30_000)
        page.evaluate(WATCH_ROWS, f"{ns}/watched")
        delays = []
        for percent in range(1, reports + 1):
            time.sleep(every)
            assert job.report(percent) == 200
            deadline = time.monotonic() + 30
            shown = None
            while time.monotonic() < deadline:
                shown = page.evaluate("(v) => window.__shown[v]", str(percent))
                if shown and percent in seen:
                    break
                time.sleep(0.05)
            if not shown or percent not in seen:
                print(f"  report {percent}: not shown within 30 s", flush=True)
                continue
            delays.append(shown - seen[percent] * 1000)
            print(f"  report {percent}: worker -> page {delays[-1]:.0f} ms", flush=True)
    seen[-1] = 0.0
    print(f"(1) status change on {worker} -> page: {spread(delays)}", flush=True)


def many(bed: Any, ns: str, url: str, jobs: int, loads: int) -> None:
    manager = bed.config.managers[0].name
    custom = client.CustomObjectsApi(bed.api(manager))

    def make(i: int) -> None:
        body = trainjob_body(f"held-{i}")
        body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nowhere"
        custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", body)

    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(jobs)))
    print(f"  made {jobs} TrainJobs in {time.monotonic() - began:.0f} s", flush=True)
    time.sleep(10)  # their Workloads made, the dispatcher's writes settled
    total = len(custom.list_cluster_custom_object(*TRAINER, "trainjobs")["items"])
    renders, heaps, nodes, filters, sorts = [], [], [], [], []
    requests: set[str] = set()
    with browser() as b:
        for _ in range(loads):
            page = b.new_page(viewport={"width": 1366, "height": 768})
            page.on("request", lambda r: requests.add(r.url.split("?")[0].split("/k8s/")[0]))
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            page.goto(url)
            page.wait_for_function(
                "(n) => document.querySelectorAll('#trainjobs tr').length >= n",
                arg=total,
                polling="raf",
                timeout=60_000,
            )
            renders.append(page.evaluate("performance.now()"))
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            heaps.append(metrics["JSHeapUsedSize"] / 2**20)
            nodes.append(metrics["Nodes"])
            for _ in range(3):
                filters.append(page.evaluate(NEXT_FRAME, "filter"))
                filters.append(page.evaluate(NEXT_FRAME, "unfilter"))
                sorts.append(page.evaluate(NEXT_FRAME, "sort"))
            page.close()
    print(f"(2) {total} TrainJobs listed: first render {spread(renders)}", flush=True)
    print(f"    JS heap {spread(heaps, 'MiB')}; DOM nodes {spread(nodes, '')}", flush=True)
    print(f"    filter keystroke -> frame {spread(filters)}", flush=True)
    print(f"    sort click -> frame {spread(sorts)}", flush=True)
    print(f"    the page requested: {sorted(requests)}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--every", type=float, default=5.5, help="seconds between reports")
    args = parser.parse_args()
    size = sum(p.stat().st_size for p in ASSETS.iterdir() if p.is_file())
    files = ", ".join(f"{p.name} {p.stat().st_size / 1024:.1f}" for p in sorted(ASSETS.iterdir()))
    print(f"(3) served files: {size / 1024:.1f} KiB ({files}), nothing else", flush=True)
    with product("ui") as (bed, ns, ctrls):
        kubeconfig = bed.kubeconfig(bed.config.managers[0].name)
        with view_server(kubeconfig) as url:
            status_to_page(bed, ctrls, ns, url, args.reports, args.every)
            many(bed, ns, url, args.jobs, args.loads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
