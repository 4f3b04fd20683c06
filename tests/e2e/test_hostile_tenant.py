"""A hostile tenant against the bed, as the review of main at 0ee8c83 attacked it: strings it
writes in a runtime (N1) and reviews it forges from a pod (N2). The bed's API servers audit
every request of the product's identities (clusters/audit.py): what the tenant chose must
never appear there, and the product's own requests in the same window must (the check is not
vacuous)."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters import audit, setup
from clusters.bed import Bed
from clusters.helpers.tenant import Tenant
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER, WORKER_CONTROLLER
from tests.support.builders import make_runtime, runtime_patch
from tests.support.multikueue import KUEUE, TRAINER, MultiKueue, manager_events, node_container
from trainjob import progress

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
# What the review's tenant wrote: any GET the dispatcher may make, the manager's Secrets here.
CLIMB = "../../../../api/v1/namespaces/kube-system/secrets?x="
WATCH_EVERY_POD = "x/../../../../../api/v1/pods?watch=true&"


def chosen(request: audit.Request) -> bool:
    """A request whose path the tenant chose, or that reached where its strings pointed: the
    manager's Secrets in kube-system, its query, a watch of every pod without the product's
    own label selector (the worker controller's pod informer has one)."""
    uri = request.uri
    every_pod = uri.startswith("/api/v1/pods?") and "labelSelector" not in uri
    return "kube-system/secrets" in uri or "?x=" in uri or "watch=true&/" in uri or every_pod


def product_requests(bed: Bed, cluster: str, since: dt.datetime) -> list[audit.Request]:
    return [
        r
        for r in audit.requests(bed.cluster_dir(cluster), since)
        if r.user.startswith("system:serviceaccount:trainjob-system:")
    ]


def test_a_runtimes_priority_class_name_never_chooses_a_request(
    bed: Bed, tmp_path: Path, controllers: list[setup.Controller]
) -> None:
    """N1: before, every pass of the leader sent `GET /api/v1/namespaces/kube-system/secrets`
    (25 times in 45 s) for a TrainJob on this runtime. Now the name is refused before any
    request, and the log says why; as a class that does not exist, it gets no Workload (Kueue
    makes none) and a Warning names the field (a Workload made without a priority would queue
    at 0, above a negative default's)."""
    mk = MultiKueue(bed)
    alice = Tenant(bed, mk.ns, "alice", "edit", tmp_path)
    as_alice = client.CustomObjectsApi(alice.api)
    runtime = make_runtime("climbing", kind="TrainingRuntime")
    pod_spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod_spec["template"]["spec"]["priorityClassName"] = CLIMB
    since = dt.datetime.now(dt.UTC)
    as_alice.create_namespaced_custom_object(*TRAINER, mk.ns, "trainingruntimes", runtime)
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "climber", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "runtimeRef": {"name": "climbing", "kind": "TrainingRuntime"},
            "trainer": {"resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }
    as_alice.create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", body)

    def warned() -> list[Any]:
        return [
            e
            for e in manager_events(mk, "climber")
            if e.reason == "ErrWorkloadCompose" and "priorityClassName" in (e.message or "")
        ]

    wait_for(warned, 60, what="a Warning naming the runtime's priorityClassName")
    time.sleep(5)  # more passes of the leader: the review saw one request every ~2 s
    assert mk.manager_workload("climber") is None
    seen = product_requests(bed, mk.manager, since)
    assert [r.uri for r in seen if chosen(r)] == []
    made = [r for r in seen if r.verb == "create" and r.resource == "events"]
    assert {r.namespace for r in made} == {mk.ns}, "the dispatcher's own Event is audited"
    # ... with its URI, the field `chosen` reads
    assert all(r.uri.startswith(f"/api/v1/namespaces/{mk.ns}/events") for r in made), [
        r.uri for r in made
    ]
    said = "".join(c.log.read_text() for c in controllers if c.name == DISPATCHER)
    named = f"kind=PriorityClass object={json.dumps(CLIMB)}"  # quoted: it holds an "="
    lines = [line for line in said.splitlines() if "cannot exist: not a valid name" in line]
    assert any(line.endswith(named) for line in lines), lines  # refused before a request


def post(port: int, path: str, review: Dict) -> tuple[int, Dict]:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {"text": exc.read().decode(errors="replace")}


def forged(namespace: str, spec: Dict, labels: Dict | None = None) -> Dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "operation": "CREATE",
            "resource": {
                "group": "trainer.kubeflow.org",
                "version": "v1alpha1",
                "resource": "trainjobs",
            },
            "namespace": namespace,
            "object": {"metadata": {"name": "forged", "labels": labels or {}}, "spec": spec},
        },
    }


def test_forged_reviews_from_a_pod_are_refused_naming_the_field_and_ask_nothing(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """N2: reviews POSTed straight to the webhook ports (any pod reaches them): a namespace
    that would have turned a LocalQueue look-up into a watch of every pod, a queue label that
    would have climbed to another path, and an object the CRD never checked (10,000
    runtimePatches, 7.9 s of judging before)."""
    mk = MultiKueue(bed)
    dispatcher = next(c for c in controllers if c.name == DISPATCHER)
    worker = next(c for c in controllers if c.name == WORKER_CONTROLLER)
    since = dt.datetime.now(dt.UTC)
    patches = [
        runtime_patch(f"m{i}", "node", {"metadata": {"labels": {"x": str(i)}}})
        for i in range(10_000)
    ]
    cases = [
        (dispatcher, "/suspend-and-route", forged(WATCH_EVERY_POD, {}), "request.namespace"),
        (worker, "/suspend-queued", forged(WATCH_EVERY_POD, {}), "request.namespace"),
        (
            dispatcher,
            "/suspend-and-route",
            forged(mk.ns, {}, {"kueue.x-k8s.io/queue-name": "../../../secrets"}),
            "labels",
        ),
        (
            dispatcher,
            "/queue-exists",
            forged(mk.ns, {"runtimeRef": {"name": "torch-distributed"}, "runtimePatches": patches}),
            "spec.runtimePatches: 10000 items, over the 16 the CRD allows",
        ),
        (
            worker,
            "/validate-trainjob",
            forged(mk.ns, {"runtimeRef": {"name": "torch-distributed"}, "runtimePatches": patches}),
            "spec.runtimePatches: 10000 items",
        ),
        (  # a limit only the installed CRD has (the fallback knows runtimePatches alone)
            dispatcher,
            "/queue-exists",
            forged(mk.ns, {"runtimeRef": {"name": "x" * 254}}),
            "spec.runtimeRef.name: 254 characters, over the 253 the CRD allows",
        ),
        (
            worker,
            "/validate-trainjob",
            forged(mk.ns, {"runtimeRef": {"name": "x" * 254}}),
            "spec.runtimeRef.name: 254 characters",
        ),
    ]
    for replica, path, review, named in cases:
        assert replica.webhook is not None
        code, answer = post(replica.webhook, path, review)
        assert code == 200, answer  # a review answered, refusing
        response = answer["response"]
        assert response["allowed"] is False, (path, response)
        assert named in response["status"]["message"], (path, response)
    time.sleep(2)
    for cluster in (mk.manager, *mk.workers):
        seen = product_requests(bed, cluster, since)
        assert seen, f"no request of the product's audited on {cluster} in the window"
        assert [r.uri for r in seen if chosen(r)] == [], cluster
    # A real create through the API server is still judged and let through.
    mk.submit("real-one")
    assert mk.get("real-one") is not None


def test_admission_is_not_on_the_port_pods_are_told_to_call(
    controllers: list[setup.Controller],
) -> None:
    """A worker controller takes progress reports on a port of its own, the one its pods are
    given: a review sent there is judged by no one (404). The admission port still takes
    reports, for pods given its address by an older version (no upgrade stops their jobs'
    reports)."""
    worker = next(c for c in controllers if c.name == WORKER_CONTROLLER)
    assert worker.progress is not None and worker.webhook is not None
    review = forged("team-a", {})
    code, _ = post(worker.progress, "/suspend-queued", review)
    assert code == 404
    code, answer = post(worker.webhook, "/suspend-queued", review)
    assert code == 200 and "response" in answer  # admission is where the API server calls
    report_path = progress.status_path("team-a", "tj")
    for port in (worker.progress, worker.webhook):
        code, _ = post(port, report_path, {})
        assert code == 401  # the progress server: a report without a token


def test_a_trainjob_whose_runtime_asks_for_more_runs_only_on_quota_taken_for_that(
    bed: Bed,
) -> None:
    """A tenant's own TrainingRuntime may change at any time (anyone with `edit` may): before,
    a Workload was compared with its TrainJob by PodSet counts alone, so a job whose runtime
    was changed to ask for 2 CPUs a node kept the 1 Kueue gave it, and Jobs made from the
    runtime then (a restart, a resume) ran on that. Now, on a worker's own Kueue, the running
    job is stopped, its Workload made again for 2 (no room: it waits), and once there is
    room its Jobs are made again asking for what Kueue took."""
    mk = MultiKueue(bed)
    worker = mk.workers[0]
    custom, batch = mk.custom(worker), client.BatchV1Api(bed.api(worker))
    mk.set_quota(worker, "3")
    runtime = mk.tenant_runtime("grows", cpu="1")
    custom.create_namespaced_custom_object(*TRAINER, mk.ns, "trainingruntimes", runtime)

    def workload() -> Dict | None:
        items = custom.list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")["items"]
        return next((w for w in items if owned_by(w, "grows")), None)

    def jobs() -> list[Any]:
        return [
            j
            for j in batch.list_namespaced_job(mk.ns).items
            if any(o.name == "grows" for o in j.metadata.owner_references or [])
        ]

    with mk.filled(worker, cpu="2"):  # 1 CPU left
        mk.submit(
            "grows",
            cluster=worker,
            cpu=None,
            run="600s",
            runtime="grows",
            runtime_kind="TrainingRuntime",
        )
        wait_for(lambda: any(not j.spec.suspend for j in jobs()), 90, what="grows running")
        first = workload()
        assert first is not None and asks(first) == "1"
        node_container(runtime)["resources"] = {"requests": {"cpu": "2"}}
        custom.patch_namespaced_custom_object(
            *TRAINER, mk.ns, "trainingruntimes", "grows", {"spec": runtime["spec"]}
        )
        again = wait_for(
            lambda: (
                (w := workload()) is not None
                and w["metadata"]["uid"] != first["metadata"]["uid"]
                and w
            ),
            60,
            what="the Workload made again",
        )
        assert asks(again) == "2"
        tj = mk.get("grows", worker)
        assert tj is not None and tj["spec"]["suspend"] is True
        wait_for(lambda: all(j.spec.suspend for j in jobs()), 60, what="no Job of grows running")
        # The old Workload's CPU goes from the ClusterQueue's status (Kueue writes it within
        # a second or so); the filler's 2 stay, none taken for the 2 the job asks now.
        wait_for(lambda: mk.reserved_cpu(worker) == "2", 30, what="the filler's 2 CPUs alone")
        assert not admitted(workload())
    wait_for(lambda: admitted(workload()), 120, what="grows admitted for 2 CPUs")
    running = wait_for(
        lambda: [j for j in jobs() if not j.spec.suspend], 90, what="grows running again"
    )
    for job in running:
        for ctr in job.spec.template.spec.containers:
            assert ctr.resources.requests["cpu"] == "2", job.metadata.name


def owned_by(obj: Dict, name: str) -> bool:
    return any(o["name"] == name for o in obj["metadata"].get("ownerReferences") or [])


def asks(wl: Dict) -> str:
    """What a pod of the Workload's first PodSet asks of CPU."""
    spec = wl["spec"]["podSets"][0]["template"]["spec"]
    return str(spec["containers"][0]["resources"]["requests"]["cpu"])


def admitted(wl: Dict | None) -> bool:
    conds = ((wl or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conds)
