"""A TrainJob's story and logs read on the manager through the dispatcher's aggregated API
(view.trainjob.dev), as a tenant the platform team gave the built-in `edit` role in one
namespace: no worker credential, no Secret, RBAC on the manager decides. On kwok nodes the
pods run no containers, so a log request gets the worker's refusal in words; the log lines
themselves are read on real nodes (tests/real/test_real_nodes.py)."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters import builds, setup
from clusters.bed import Bed
from clusters.helpers.tenant import API, Tenant, story_path
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER
from dispatcher.workers import log_tails
from tests.support.builders import make_trainjob
from tests.support.multikueue import MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]


@pytest.fixture
def tenant(bed: Bed, tmp_path: Path) -> Callable[..., Tenant]:
    def make(ns: str, name: str, role: str | None = "edit") -> Tenant:
        return Tenant(bed, ns, name, role, tmp_path)

    return make


def test_a_tenant_with_edit_submits_and_reads_the_story_of_its_trainjob(
    bed: Bed, tenant: Callable[..., Tenant]
) -> None:
    mk = MultiKueue(bed)
    alice = tenant(mk.ns, "alice")
    # `edit` on the namespace is enough to submit (the chart's roles aggregate into it)
    tj = make_trainjob("told", namespace=mk.ns)
    tj["metadata"] = {"name": "told", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
    created = client.CustomObjectsApi(alice.api).create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", mk.ns, "trainjobs", tj
    )
    assert created["metadata"]["name"] == "told"
    mk.submit("followed", nodes=2, run="120s")
    worker = mk.started_on("followed")

    def two_running_pods() -> dict[str, Any] | None:
        code, story = alice.get(story_path(mk.ns, "followed"))
        assert code == 200, story
        running = [p for p in story["pods"] if p["phase"] == "Running"]
        return story if len(running) == 2 else None

    story = wait_for(two_running_pods, 60, what="two running pods in the story")
    assert story["kind"] == "TrainJobStory" and story["worker"] == worker
    assert story["workerProblem"] is None
    assert {p["worker"] for p in story["pods"]} == {worker}
    assert sorted(p["index"] for p in story["pods"]) == ["0", "1"]
    # a kwok worker serves no metrics API: the pods carry no CPU and memory, and it says why
    assert [p["usage"] for p in story["pods"]] == [None, None]
    assert "serves no metrics API" in story["usageProblem"], story["usageProblem"]
    reasons = {(e["source"], e["reason"]) for e in story["events"]}
    assert ("manager", "Started") in reasons, reasons  # dispatched to the worker
    assert (worker, "Scheduled") in reasons, reasons  # its pods' Events there

    # kwok pods run no container: the worker's API server has no log to give, and the answer
    # says which worker said what, without hanging.
    code, said = alice.get(story_path(mk.ns, "followed", "log"), node="1", tailLines="5")
    assert code in (400, 404, 502, 503), (code, said)
    assert f"worker {worker}" in said, said

    code, said = alice.get(story_path(mk.ns, "followed", "log"), node="9")
    assert code == 404 and "index 9" in said
    code, said = alice.get(story_path(mk.ns, "followed", "log"), pod="kube-apiserver")
    assert code == 404 and "not one of this TrainJob's pods" in said
    code, said = alice.get(story_path(mk.ns, "followed", "log"), tailLines="lots")
    assert code == 400 and "tailLines" in said
    code, said = alice.get(story_path(mk.ns, "nothing"))
    assert code == 404 and 'nothing\\" not found' in said


def test_without_the_rbac_or_in_another_namespace_the_api_server_refuses(
    bed: Bed, tenant: Callable[..., Tenant]
) -> None:
    mk = MultiKueue(bed)
    mk.submit("private", run="120s")
    mk.started_on("private")
    nobody = tenant(mk.ns, "nobody", role=None)
    for sub in ("story", "log"):
        code, said = nobody.get(story_path(mk.ns, "private", sub))
        assert code == 403 and f"trainjobs/{sub}" in said, said

    other_ns = MultiKueue(bed).ns
    elsewhere = tenant(other_ns, "bob")  # `edit`, but in another namespace
    code, said = elsewhere.get(story_path(mk.ns, "private"))
    assert code == 403, said
    viewer = tenant(mk.ns, "viewer", role="view")  # `view` reads the story too
    assert viewer.get(story_path(mk.ns, "private"))[0] == 200
    by_name = f"{API}/namespaces/{mk.ns}/trainjobstories/private"
    assert viewer.get(by_name)[0] == 200
    code, said = nobody.get(by_name)
    assert code == 403 and "trainjobstories" in said, said


def test_kubectl_explains_the_story_and_gets_it_by_name(
    bed: Bed, tenant: Callable[..., Tenant], tmp_path: Path
) -> None:
    """The API server serves the dispatcher's OpenAPI documents with its own: `kubectl
    explain` describes the story's fields from them, and `kubectl get` reads the story."""
    mk = MultiKueue(bed)
    mk.submit("named", run="120s")
    worker = mk.started_on("named")
    viewer = tenant(mk.ns, "viewer", role="view")
    kubectl = [str(builds.binary("kubectl")), "--kubeconfig", str(viewer.kubeconfig)]
    kubectl += ["--cache-dir", str(tmp_path / "cache"), "-n", mk.ns]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*kubectl, *args], capture_output=True, text=True, timeout=60, check=False
        )

    def explained() -> str | None:
        # The aggregator reads the documents when the APIService becomes available, then
        # every minute; kubectl reads them afresh (its cache is keyed by their hash).
        done = run("explain", "trainjobstories.pods.usage")
        return done.stdout if done.returncode == 0 else None

    said = wait_for(explained, 150, what="kubectl explain trainjobstories.pods.usage")
    assert "KIND:       TrainJobStory" in said and "GROUP:      view.trainjob.dev" in said
    assert "cpuMillicores\t<integer> -required-" in said, said
    assert "CPU and memory use" in said
    workers = run("explain", "workers.clusterQueues.flavors.resources")
    assert workers.returncode == 0 and "nominalQuota" in workers.stdout, workers.stderr
    got = run("get", "trainjobstory", "named", "-o", "json")
    assert got.returncode == 0, got.stderr
    story = json.loads(got.stdout)
    assert (story["kind"], story["worker"], story["metadata"]["name"]) == (
        "TrainJobStory",
        worker,
        "named",
    )


def test_once_the_pods_are_gone_the_story_and_the_log_give_what_was_kept(
    bed: Bed, tenant: Callable[..., Tenant]
) -> None:
    """The copy leaves the worker as soon as the job ended (retention 0), its pods with it; the
    dispatcher kept their tails first. kwok pods have no log, so what was kept says why."""
    mk = MultiKueue(bed)
    alice = tenant(mk.ns, "alice")
    # each pod runs to its end: with backoffLimit 0 the first to fail has the Job controller
    # delete the other, sometimes before its tail could be kept
    mk.submit("ended", nodes=2, run="2s", exit_code=3, runtime=mk.fail_fast_runtime(per_index=True))
    worker = mk.started_on("ended")
    mk.wait_until("ended", "Failed", timeout=120)
    wait_for(lambda: mk.get("ended", worker) is None, 60, what="the copy to leave the worker")

    def story_without_copy() -> dict[str, Any] | None:
        # the dispatcher's cache of the worker sees the deletion a moment after the API server
        code, story = alice.get(story_path(mk.ns, "ended"))
        assert code == 200, story
        return story if story["copy"] is None else None

    story = wait_for(story_without_copy, 30, what="the story to see the copy gone")
    kept = sorted(story["pods"], key=lambda p: p["index"])
    assert [(p["index"], p["kept"], p["worker"]) for p in kept] == [
        ("0", True, worker),
        ("1", True, worker),
    ], story
    assert {p["phase"] for p in kept} == {"Failed"}, kept

    code, said = alice.get(story_path(mk.ns, "ended", "log"), node="1")
    assert code == 200 and said.startswith("(not kept: "), said  # kwok: the worker's refusal
    code, said = alice.get(story_path(mk.ns, "ended", "log"), node="5")
    assert code == 404 and "index 5" in said

    # deleted with its TrainJob (the resync's sweep)
    admin = client.CoreV1Api(bed.api(mk.manager))
    uid = story["metadata"]["uid"]
    assert admin.read_namespaced_config_map(f"log-tail-{uid}", "trainjob-system").immutable
    mk.custom().delete_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", mk.ns, "trainjobs", "ended"
    )

    def swept() -> bool:
        try:
            admin.read_namespaced_config_map(f"log-tail-{uid}", "trainjob-system")
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(swept, 90, what="the kept tails to go with their TrainJob")


def test_a_call_that_skips_the_api_server_is_refused_whatever_its_headers_say(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Straight to a dispatcher replica's port, naming an admin in the front proxy's headers
    but with no front-proxy certificate: 401, nothing read."""
    mk = MultiKueue(bed)
    mk.submit("guarded", run="120s")
    mk.started_on("guarded")
    (replica, *_) = [c for c in controllers if c.name == DISPATCHER]
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{replica.webhook}{story_path(mk.ns, 'guarded')}",
        headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=context, timeout=10)
    assert refused.value.code == 401
    assert "front proxy" in refused.value.read().decode()


def test_a_job_that_opts_out_keeps_no_tails_and_a_kept_record_says_its_size(bed: Bed) -> None:
    mk = MultiKueue(bed)
    off = {"annotations": {log_tails.OPT_OUT_ANNOTATION: "off"}}
    admin = client.CoreV1Api(bed.api(mk.manager))
    uids = {}
    for name, metadata in (("kept", None), ("private", off)):  # one after the other
        mk.submit(name, run="3s", exit_code=1, runtime=mk.fail_fast_runtime(), metadata=metadata)
        worker = mk.started_on(name)
        mk.wait_until(name, "Failed", timeout=120)
        wait_for(lambda n=name, w=worker: mk.get(n, w) is None, 60, what=f"{name}'s copy to go")
        uids[name] = (mk.get(name) or {})["metadata"]["uid"]
    record = admin.read_namespaced_config_map(log_tails.name_of(uids["kept"]), "trainjob-system")
    said = int(record.metadata.annotations[log_tails.BYTES_ANNOTATION])
    assert said == sum(len(k) + len(v.encode()) for k, v in record.data.items())
    assert record.metadata.annotations[log_tails.TRAINJOB_ANNOTATION] == f"{mk.ns}/kept"
    with pytest.raises(client.ApiException) as refused:
        admin.read_namespaced_config_map(log_tails.name_of(uids["private"]), "trainjob-system")
    assert refused.value.status == 404


def test_a_namespace_keeps_the_tails_of_its_newest_trainjobs_only(bed: Bed) -> None:
    """The resync's sweep on the real manager: 22 records of live TrainJobs of one namespace
    (never admitted: no such queue), one of another's; the namespace's 2 oldest go, the other
    namespace's stays (the bound is 20 per namespace)."""
    mk, other = MultiKueue(bed), MultiKueue(bed)
    admin = client.CoreV1Api(bed.api(mk.manager))
    made = []
    for i, (ns, owner) in enumerate([*[(mk.ns, mk)] * 22, (other.ns, other)]):
        tj = owner.submit(f"waits-{i}", queue="no-such-queue")
        uid = tj["metadata"]["uid"]
        record = admin.create_namespaced_config_map(
            "trainjob-system",
            {
                "metadata": {
                    "name": log_tails.name_of(uid),
                    "labels": {log_tails.LABEL: uid},
                    "annotations": {
                        log_tails.TRAINJOB_ANNOTATION: f"{ns}/waits-{i}",
                        log_tails.BYTES_ANNOTATION: "100",
                    },
                },
                "data": {"x": "y"},
            },
        )
        made.append(uid)
        # creationTimestamp has seconds: the next record is made in a later second than this
        # one (the API server's clock is this machine's), so that none ties with it however
        # long a create waits on a loaded machine (a fixed pause did not ensure it)
        later = record.metadata.creation_timestamp + dt.timedelta(seconds=1)
        while dt.datetime.now(dt.UTC) < later:
            time.sleep(0.05)

    def left() -> set[str] | None:
        kept = admin.list_namespaced_config_map("trainjob-system", label_selector=log_tails.LABEL)
        found = {i.metadata.labels[log_tails.LABEL] for i in kept.items} & set(made)
        return found if len(found) == 21 else None

    found = wait_for(left, 60, what="the sweep to trim the namespace to its newest 20")
    assert found == set(made[2:])
