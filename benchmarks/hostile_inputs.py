"""Benchmark: what a hostile tenant's inputs cost admission and the pod reads, on loopback only,
with the product's code as it is (`after`) and as it was before its bounds (`before`, the old
settings put back in this process).

Three figures, each printed with what it measured:
- costly patterns: one validating review of a TrainJob (`runtime_refusal`, what both webhooks
  run) on three runtimes of 64 patterns such as `\\pL{40}a17` each, judged in rotation: the
  latency of each review, p50, p99 and max over `--reviews`;
- a forged review of `--patches` runtimePatches: the CPU to refuse it (`object_problem`, held
  to the product's CRD) and, before, to judge it;
- a page of tenant-sized pods: the peak RSS growth of one `copy_pods.read_some` (what the
  story, the logs and the tails capture call) of `--pods` pods of `--pod-kb` KB each, served
  by a loopback HTTP server in pages as the API server serves them; each variant in a process
  of its own (peak RSS only grows);
- as many Events about one object, each a message of that size (anyone who may create Events
  in the namespace writes them): a story's read of them, in pages each cut down as it comes
  (after) and whole in one answer of up to 500 (before), each in a process of its own;
- a namespace of as many TrainJobs of that size (no quota needed to make them, suspended):
  the dispatcher's TrainJob informer listing them, its peak RSS growth and what it still
  holds after, in pages of 500 (before) and of TENANT_SIZED_PAGE;
- a page of `--env-pods` pods of `--env-entries` short env entries each (a pod a tenant
  labels for its TrainJob; JSON that decodes to many times its bytes): the worker controller's
  pod informer listing them, the page decoded whole (before) and an object at a time
  (kubecontrol/lists.py, after);
- a TrainingRuntime of `--claims` volume claim templates (50 per policy, as the CRD allows),
  each mounted by every pod of its `--claim-pod-sets` replicatedJobs: one build of a
  TrainJob's RuntimeInfo on it, each PodSet's claims merged once (after) and once per template
  (before, the former loop put back).

    .venv/bin/python benchmarks/hostile_inputs.py [--reviews 30] [--patches 10000]
        [--pods 500] [--pod-kb 1000] [--env-pods 50] [--env-entries 45000]
        [--claims 2500] [--claim-pod-sets 8] [--claims-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters.helpers.waiting import http_server, loopback_client
from clusters.kube import load_manifests
from dispatcher.readapi import job_story
from dispatcher.workers import copy_pods
from kubebase.kinds import EVENT
from kubecontrol import lists
from kubecontrol.cluster import Cluster
from kubecontrol.informer import TENANT_SIZED_PAGE, Informer
from kubecontrol.schema_bounds import version_schema
from tests.support.builders import (
    container,
    edit,
    make_runtime,
    make_trainjob,
    replicated_job,
    runtime_patch,
)
from trainjob.admission import Admitted, object_problem, runtime_refusal
from trainjob.lru import LRU
from trainjob.models import parse_trainjob
from trainjob.runtime import failure, framework, resolve_runtime_info
from trainjob.runtime.info import RuntimeInfo
from trainjob.runtime.templates import ClaimPolicyView, merge_by_key
from trainjob_api import constants as c
from trainjob_api.story import about, event_of
from trainjob_api.views import RuntimeView
from worker_controller import digests

Dict = dict[str, Any]
PAGE_AFTER = copy_pods.PAGE
ROOT = Path(__file__).resolve().parent.parent


def before_patterns() -> None:
    """The pattern handling as it was: 1 MiB per compile, no verdicts kept."""
    failure.MAX_PATTERN_MEMORY = 1 << 20
    failure._VERDICTS = LRU(0)


def costly_runtimes() -> list[Dict]:
    runtimes = []
    for k in range(3):
        rt = make_runtime(f"rt-{k}", kind="TrainingRuntime")
        rt["metadata"].update(namespace="team-a", uid=f"uid-rt-{k}", resourceVersion="1")
        patterns = [rf"\pL{{40}}a{i}r{k}" for i in range(failure.MAX_PATTERNS)]
        rt["spec"]["template"]["spec"]["failurePolicy"] = {
            "rules": [{"action": "FailJobSet", "onJobFailureMessagePatterns": patterns}]
        }
        runtimes.append(rt)
    return runtimes


def review_of(tj: Dict) -> Admitted:
    return Admitted({"uid": "u", "namespace": "team-a", "object": tj})


def patterns_figure(reviews: int) -> list[float]:
    runtimes = costly_runtimes()
    taken = []
    for i in range(reviews):
        rt = runtimes[i % len(runtimes)]
        tj = make_trainjob(f"tj-{i}", "team-a")
        started = time.perf_counter()
        runtime_refusal(review_of(tj), RuntimeView(rt))
        taken.append(time.perf_counter() - started)
    return taken


def forged_figure(patches: int, judge: bool) -> tuple[float, str | None]:
    [crd] = load_manifests((ROOT / "crds" / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    schema = version_schema(crd, c.TRAINER_VERSION)
    tj = make_trainjob("forged", "team-a")
    tj["spec"]["runtimePatches"] = [
        runtime_patch(f"m{i}", "node", {"spec": {"containers": [{"name": "node", "env": env(i)}]}})
        for i in range(patches)
    ]
    rt = make_runtime("torch-distributed")
    rt["metadata"].update(uid="uid-rt", resourceVersion="1")
    started = time.process_time()
    why = (
        runtime_refusal(review_of(tj), RuntimeView(rt))
        if judge
        else object_problem(review_of(tj), schema)
    )
    return time.process_time() - started, why


def env(i: int) -> list[Dict]:
    return [{"name": f"E{i}", "value": "1"}]


def pods_page(count: int, size_kb: int, entries: int = 0) -> Any:
    """A loopback API server's handler serving `count` pods, each of one `size_kb` KB env
    value, or of `entries` short env entries."""
    filler = "x" * (size_kb * 1024)
    short = [{"name": f"E{j}", "value": "v"} for j in range(entries)]

    def pod(i: int) -> Dict:
        env = short or [{"name": "BIG", "value": filler}]
        return {
            "metadata": {"name": f"tj-node-0-{i}", "namespace": "team-a", "uid": f"p{i}"},
            "spec": {"containers": [{"name": "node", "env": env}]},
            "status": {"phase": "Running"},
        }

    def event(i: int) -> Dict:  # about the object of UID "uid", its message the filler
        return {
            "metadata": {"name": f"e{i}", "namespace": "team-a", "uid": f"e{i}"},
            "involvedObject": {"kind": "TrainJob", "name": "tj", "uid": "uid"},
            "type": "Warning",
            "reason": "Noted",
            "message": filler,
        }

    class Pods(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path.endswith(("/pods", "/trainjobs", "/events")):
                start = int((query.get("continue") or ["0"])[0])
                end = min(count, start + int((query.get("limit") or [str(count)])[0]))
                more = {"continue": str(end)} if end < count else {}
                made = event if parts.path.endswith("/events") else pod
                items = [made(i) for i in range(start, end)]
            else:
                items, more = [], {}
            body = json.dumps({"items": items, "metadata": {"resourceVersion": "1", **more}})
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    return Pods


def memory_kib(field: str) -> int:
    """This process's VmHWM (peak RSS) or VmRSS, in KiB. Not getrusage's ru_maxrss: Linux
    carries that across exec, so a child of the large server would start at its peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measured(run: Callable[[], object]) -> None:
    """Run `run` and print, as JSON, this process's peak RSS growth over it, what it still
    holds after, and the seconds it took."""
    base = memory_kib("VmHWM")
    started = time.perf_counter()
    run()
    took = time.perf_counter() - started
    peak, held = memory_kib("VmHWM"), memory_kib("VmRSS")
    print(json.dumps({"grew_mib": (peak - base) / 1024, "held_mib": (held - base) / 1024,
                      "seconds": took}))  # fmt: skip


def one_read(port: int, page: int) -> None:
    """In a process of its own (the server is the parent's): the peak RSS growth of one read,
    printed as JSON. The read's own deadline is lifted: its memory is what is measured."""
    copy_pods.PAGE, copy_pods.READ_SECONDS = page, 600.0
    if page != PAGE_AFTER:  # before: whole pods kept, as they came
        copy_pods.pod_seen = lambda pod: pod
    remote = SimpleNamespace(name="w", cluster=Cluster("w", loopback_client(port), "bench"))
    remote.cluster.timeout = 600.0
    measured(lambda: copy_pods.read_some(remote, "team-a", "tj", "uid"))  # type: ignore[arg-type]


def one_list(port: int, page: int) -> None:
    """In a process of its own: the dispatcher's TrainJob informer's first list."""
    informer = Informer(loopback_client(port), c.TRAINJOB, namespace="team-a", page=page)
    measured(informer._list)


def one_pod_list(port: int, whole: int) -> None:
    """In a process of its own: the worker controller's pod informer's first list, each page
    decoded whole (`whole`: as before kubecontrol/lists.py) or an object at a time."""
    if whole:
        lists.WHOLE_BYTES = 1 << 62
    informer = Informer(
        loopback_client(port),
        c.POD,
        namespace="team-a",
        page=TENANT_SIZED_PAGE,
        transform=digests.pod_digest,
    )
    measured(informer._list)


def one_event_read(port: int, paged: int) -> None:
    """In a process of its own: a story's read of one object's Events, in pages each cut
    down as it comes (`paged`), or as before: one answer of up to 500, whole."""
    api = loopback_client(port)
    if paged:
        events = job_story._Events("team-a", time.monotonic() + 600.0)

        def paged_read() -> list[Any]:
            events.read(api, "uid", "w")
            return events.told

        measured(paged_read)
        return
    path = EVENT.path("team-a", None)
    query = {"fieldSelector": "involvedObject.uid=uid", "limit": 500}

    def whole() -> list[Any]:
        found = api.get_json(path, query=query, timeout=600.0) or {}
        return [event_of(e, "w") for e in about(found.get("items") or [], {"uid"})]

    measured(whole)


def said(variant: str, what: str, got: Dict) -> None:
    """One figure's line: what was measured, then its peak RSS growth, what it still held and
    its time."""
    print(
        f"[{variant}] {what}: peak RSS +{got['grew_mib']:.0f} MiB, held after "
        f"+{got['held_mib']:.0f} MiB, {got['seconds']:.1f} s"
    )


def in_a_process(flag: str, port: int, page: int) -> Dict:
    """One figure (`--one-read`, `--one-list`) measured in a process of its own."""
    out = subprocess.run(
        [sys.executable, __file__, flag, str(port), str(page)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found: Dict = json.loads(out)
    return found


def claims_runtime(templates: int, pod_sets: int) -> Dict:
    """A runtime of `templates` claim templates, 50 to a policy, each mounted by every
    replicatedJob's container (about 0.9 MB at 2,500 and 8)."""
    names = [f"c{i}" for i in range(templates)]
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in names]
    rjs = [
        replicated_job(f"r{j}", "trainer" if j == 0 else None, [container(volumeMounts=mounts)])
        for j in range(pod_sets)
    ]
    policies = [
        {"templates": [{"metadata": {"name": n}, "spec": {}} for n in names[k : k + 50]]}
        for k in range(0, templates, 50)
    ]
    return edit(make_runtime(replicated_jobs=rjs)).template_spec(volumeClaimPolicies=policies).obj()


def before_claims(info: RuntimeInfo, policies: list[ClaimPolicyView]) -> None:
    """The former `_claim_volumes`' volumes: each template's volume merged into every PodSet
    that mounts it, one template at a time (the claims themselves left out)."""
    for policy in policies:
        for template in policy.templates:
            name = template.name
            volume = {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-x"}}
            for ps in info.pod_sets:
                pod_spec = ps.pod_template.setdefault("spec", {})
                mounts = [
                    m
                    for field in ("containers", "initContainers")
                    for ctr in pod_spec.get(field) or []
                    for m in ctr.get("volumeMounts") or []
                ]
                if any(m.get("name") == name for m in mounts):
                    pod_spec["volumes"] = merge_by_key(pod_spec.get("volumes") or [], [volume])


def claims_figure(templates: int, pod_sets: int, before: bool) -> float:
    """Seconds of one build of a RuntimeInfo on `claims_runtime`, the median of three."""
    runtime = RuntimeView(claims_runtime(templates, pod_sets))
    trainjob = parse_trainjob(make_trainjob())
    if before:
        framework._claim_volumes = before_claims
    taken = []
    for _ in range(3):
        start = time.perf_counter()
        info, problem = resolve_runtime_info(trainjob, runtime)
        taken.append(time.perf_counter() - start)
        assert info is not None, problem
    return statistics.median(taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reviews", type=int, default=30)
    parser.add_argument("--patches", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--pod-kb", type=int, default=1000)
    parser.add_argument("--before", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-read", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--env-pods", type=int, default=50)
    parser.add_argument("--env-entries", type=int, default=45_000)
    parser.add_argument("--one-list", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one-pod-list", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--one-event-read", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--claims", type=int, default=2500)
    parser.add_argument("--claim-pod-sets", type=int, default=8)
    parser.add_argument("--claims-only", action="store_true", help="the claims figure alone")
    args = parser.parse_args()
    if args.claims_only:
        for before in (False, True):
            took = claims_figure(args.claims, args.claim_pod_sets, before=before)
            print(
                f"[{'before' if before else 'after'}] one RuntimeInfo on a runtime of "
                f"{args.claims} claim templates mounted by {args.claim_pod_sets} PodSets: "
                f"{took:.2f} s (median of 3)"
            )
        return 0
    if args.one_pod_list:
        one_pod_list(*args.one_pod_list)
        return 0
    if args.one_event_read:
        one_event_read(*args.one_event_read)
        return 0
    if args.one_read:
        one_read(*args.one_read)
        return 0
    if args.one_list:
        one_list(*args.one_list)
        return 0
    if args.before:
        before_patterns()
    label = "before" if args.before else "after"
    taken = sorted(patterns_figure(args.reviews))
    p99 = taken[min(len(taken) - 1, round(0.99 * (len(taken) - 1)))]
    print(
        f"[{label}] costly patterns, {args.reviews} reviews over 3 runtimes x 64: "
        f"p50 {statistics.median(taken) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {taken[-1] * 1000:.1f} ms, total {sum(taken):.2f} s"
    )
    cpu, why = forged_figure(args.patches, judge=args.before)
    print(
        f"[{label}] forged review of {args.patches} runtimePatches: {cpu:.2f} s of CPU "
        f"({(why or 'accepted')[:90]})"
    )
    took = claims_figure(args.claims, args.claim_pod_sets, before=args.before)
    print(
        f"[{label}] one RuntimeInfo on a runtime of {args.claims} claim templates mounted by "
        f"{args.claim_pod_sets} PodSets: {took:.2f} s (median of 3)"
    )
    if args.before:
        return 0
    with http_server(pods_page(args.pods, args.pod_kb)) as port:
        for page, variant in ((500, "before"), (copy_pods.PAGE, "after")):
            got = in_a_process("--one-read", port, page)
            said(
                variant, f"one read of {args.pods} pods x {args.pod_kb} KB in pages of {page}", got
            )
        for paged, variant in ((0, "before"), (1, "after")):
            got = in_a_process("--one-event-read", port, paged)
            how = "in pages, each cut" if paged else "whole, at once"
            events = min(args.pods, 500)
            said(
                variant,
                f"a story's read of one object's {events} Events x {args.pod_kb} KB, {how}",
                got,
            )
        for page, variant in ((500, "before"), (TENANT_SIZED_PAGE, "after")):
            got = in_a_process("--one-list", port, page)
            what = f"the TrainJob informer's list of {args.pods} TrainJobs x {args.pod_kb} KB"
            said(variant, f"{what} in pages of {page}", got)
    with http_server(pods_page(args.env_pods, 0, args.env_entries)) as port:
        for whole, variant in ((1, "before"), (0, "after")):
            got = in_a_process("--one-pod-list", port, whole)
            what = f"the worker controller's pod list of {args.env_pods} pods x "
            what += f"{args.env_entries} env entries"
            how = "whole" if whole else "an object at a time"
            said(variant, f"{what}, pages decoded {how}", got)
    subprocess.run([sys.executable, __file__, "--before", "--reviews", str(args.reviews),
                    "--patches", str(args.patches), "--claims", str(args.claims),
                    "--claim-pod-sets", str(args.claim_pod_sets)], check=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
