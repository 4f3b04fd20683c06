"""Which pods a log request may read, which one it means, and what it asks the worker for."""

from __future__ import annotations

import json
import tracemalloc
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dispatcher.workers import copy_pods, log_tails
from dispatcher.workers.copy_pods import (
    Refusal,
    jobset_controller,
    log_pods,
    log_query,
    measured,
    ours,
    pick_pod,
)
from kubecontrol.client import JSON, METADATA_LIST, TransportError
from tests.support.builders import edit
from trainjob_api import constants as c
from trainjob_api import story


def controller(kind: str, name: str, uid: str | None) -> dict[str, Any]:
    """The ownerReference of an object's controller."""
    return {"kind": kind, "name": name, "uid": uid, "controller": True}


def owned(kind: str, name: str, uid: str, owner: str | None, **labels: str) -> dict[str, Any]:
    refs = [controller("X", "x", owner)] if owner else []
    return {
        "kind": kind,
        "metadata": {
            "name": name,
            "uid": uid,
            "ownerReferences": refs,
            "labels": labels,
            "creationTimestamp": f"2026-11-26T10:00:{len(name):02d}Z",  # longer: newer
        },
        "spec": {"containers": [{"name": "sidecar"}, {"name": c.NODE_CONTAINER}]},
    }


def node_pod(
    name: str, uid: str, job: str, index: int, role: str = "node", **labels: str
) -> dict[str, Any]:
    """A pod of the Job `job`, at `index` of its replicatedJob `role`; more `labels` after."""
    labels = {c.REPLICATED_JOB_NAME_LABEL: role, c.JOB_COMPLETION_INDEX: str(index), **labels}
    return owned("Pod", name, uid, job, **labels)


def test_only_the_pods_of_the_jobs_our_copy_controls() -> None:
    jobs = [owned("Job", "tj-node", "job-1", "copy"), owned("Job", "tj-fake", "job-2", "other")]
    pods = [
        node_pod("a", "p1", "job-1", 0),
        node_pod("b", "p2", "job-2", 0),
        node_pod("c", "p3", None, 0),
    ]
    kept_jobs, kept_pods = ours({"copy"}, jobs, pods)
    assert [j["metadata"]["name"] for j in kept_jobs] == ["tj-node"]
    assert [p["metadata"]["name"] for p in kept_pods] == ["a"]


def test_on_a_trainer_worker_the_jobs_of_the_jobset_our_copy_controls() -> None:
    """Trainer runs a TrainJob as a JobSet of its name: the Jobs are the JobSet's, and the
    JobSet is our copy's (read_some learns its UID from the worker)."""

    def of_jobset(name: str, uid: str, jobset_uid: str) -> dict[str, Any]:
        job = owned("Job", name, uid, jobset_uid)
        return edit(job).owners(controller("JobSet", "tj", jobset_uid)).obj()

    jobs = [of_jobset("tj-node-0", "job-1", "jobset-uid"), of_jobset("x", "job-2", "other")]
    pods = [node_pod("a", "p1", "job-1", 0), node_pod("b", "p2", "job-2", 0)]
    assert jobset_controller(jobs, "tj") and not jobset_controller(jobs, "another")
    assert not jobset_controller([owned("Job", "tj-node", "job-1", "copy")], "tj")
    by_another_kind = owned("Job", "tj-node", "job-1", "copy")
    edit(by_another_kind).owners(controller("TrainJob", "tj", "copy"))
    assert not jobset_controller([by_another_kind], "tj")  # a TrainJob of the name: not a JobSet
    kept_jobs, kept_pods = ours({"copy", "jobset-uid"}, jobs, pods)
    assert [j["metadata"]["name"] for j in kept_jobs] == ["tj-node-0"]
    assert [p["metadata"]["name"] for p in kept_pods] == ["a"]
    assert ours({"copy"}, jobs, pods) == ([], [])  # without the JobSet's UID: none is ours


def test_a_pod_by_name_must_be_the_trainjobs() -> None:
    pods = [node_pod("a", "p1", "job-1", 0)]
    assert pick_pod(pods, {"pod": "a"})["metadata"]["name"] == "a"
    with pytest.raises(Refusal) as refused:
        pick_pod(pods, {"pod": "someone-elses"})
    assert refused.value.code == 404


def test_by_role_and_index_the_newest() -> None:
    pods = [
        node_pod("n0", "p1", "j", 0),
        node_pod("n1", "p2", "j", 1),
        node_pod("n1-retried", "p3", "j", 1),
        node_pod("l0", "p4", "j", 0, role="launcher"),
    ]
    assert pick_pod(pods, {})["metadata"]["name"] == "n0"
    assert pick_pod(pods, {"node": "1"})["metadata"]["name"] == "n1-retried"
    assert pick_pod(pods, {"replicatedJob": "launcher"})["metadata"]["name"] == "l0"
    with pytest.raises(Refusal, match="index 7"):
        pick_pod(pods, {"node": "7"})


def test_the_log_query_defaults_to_the_trainer_container_and_checks_the_rest() -> None:
    pod = node_pod("a", "p1", "j", 0)
    asked = log_query(pod, {"follow": "true", "tailLines": "10"})
    assert asked["container"] == c.NODE_CONTAINER
    assert asked["follow"] == "true" and asked["tailLines"] == 10
    assert log_query(pod, {"container": "sidecar"})["container"] == "sidecar"
    with pytest.raises(ValueError, match="container='nope'"):
        log_query(pod, {"container": "nope"})
    with pytest.raises(ValueError, match="sinceSeconds"):
        log_query(pod, {"sinceSeconds": "0"})


def test_only_the_named_pods_usage_is_kept_and_odd_items_are_left_out() -> None:
    used = {"containers": [{"name": "node", "usage": {"cpu": "1", "memory": "1Ki"}}]}
    items = [
        {"metadata": {"name": "ours"}, **used},
        {"metadata": {"name": "someone-elses"}, **used},
        {"metadata": "not a mapping", **used},
        "not an item",
        {"metadata": {"name": "ours-too"}},  # no containers: not measured
    ]
    found = measured(items, {"ours", "ours-too"})
    assert list(found) == ["ours"] and found["ours"].cpu_millicores == 1000


class Pages:
    """A worker's list of `count` pods, served in pages as the API server serves them (our
    own stand-in for `remote.cluster.api`): what each request asked is kept."""

    def __init__(self, count: int) -> None:
        self.count, self.asked = count, []
        self.cluster = self
        self.api = self

    def get_json(self, path: str, query: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.asked.append(dict(query))
        start = int(query.get("continue") or 0)
        end = min(self.count, start + int(query["limit"]))
        items = [{"metadata": {"name": f"p{i}"}} for i in range(start, end)]
        return {"items": items, "metadata": {"continue": str(end) if end < self.count else ""}}

    def request(
        self, method: str, path: str, query: dict[str, Any], timeout: float, accept: str = JSON
    ) -> bytes:
        """The page as the API server sends it: JSON."""
        assert method == "GET"
        return orjson.dumps(self.get_json(path, query, timeout))


def test_a_list_is_read_in_pages_and_stops_at_its_bound() -> None:
    """Before: every story, log and tails read listed the TrainJob's whole pod list at once
    (5,000 pods: ~40 MB of JSON)."""
    worker = Pages(5000)
    items, more = copy_pods.list_some(worker, "/pods", 120, labelSelector="x=y")  # type: ignore[arg-type]
    assert (len(items), more) == (120, True)
    # Pages of 50: a pod is as large as its tenant makes it (up to ~1 MB), and a page is held
    # whole (bytes and decoded) at once.
    assert [q["limit"] for q in worker.asked] == [50, 50, 20]
    assert [q["continue"] for q in worker.asked] == [None, "50", "100"]
    assert all(q["labelSelector"] == "x=y" for q in worker.asked)
    items, more = copy_pods.list_some(Pages(30), "/pods", 1200)  # type: ignore[arg-type]
    assert (len(items), more) == (30, False)


class SlowPages(Pages):
    """Pages a slow worker takes `seconds` each to send (a clock moved, not slept)."""

    def __init__(self, count: int, seconds: float, clock: list[float]) -> None:
        super().__init__(count)
        self.seconds, self.clock, self.timeouts = seconds, clock, []

    def request(
        self, method: str, path: str, query: dict[str, Any], timeout: float, accept: str = JSON
    ) -> bytes:
        self.timeouts.append(timeout)
        self.clock[0] += self.seconds
        return super().request(method, path, query, timeout, accept)


class AllAtOnce(Pages):
    """A server that ignores `limit` (metrics-server's PodMetrics): every item in one answer."""

    def get_json(self, path: str, query: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.asked.append(dict(query))
        return {"items": [{"metadata": {"name": f"p{i}"}} for i in range(self.count)]}


def test_a_list_a_server_sends_all_at_once_is_kept_to_its_bound() -> None:
    items, more = copy_pods.list_some(AllAtOnce(700), "/pods", 500)  # type: ignore[arg-type]
    assert (len(items), more) == (500, True)
    items, more = copy_pods.list_some(AllAtOnce(30), "/pods", 500)  # type: ignore[arg-type]
    assert (len(items), more) == (30, False)


def test_a_list_read_by_a_deadline_asks_no_page_past_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tails capture's lists end by its deadline: each page asks at most what is left, and
    none is asked once it passed (before: 30 pages of 10 s each on a slow worker)."""
    clock = [1000.0]
    monkeypatch.setattr(copy_pods.time, "monotonic", lambda: clock[0])
    worker = SlowPages(5000, 4.0, clock)
    with pytest.raises(TransportError, match="no time left"):
        copy_pods.list_some(worker, "/pods", 500, until=1015.0)  # type: ignore[arg-type]
    assert worker.timeouts == [10.0, 10.0, 7.0, 3.0]  # READ_SECONDS, then what was left
    assert copy_pods.list_some(SlowPages(20, 4.0, clock), "/pods", 500, until=clock[0] + 5)[0]  # type: ignore[arg-type]


def test_a_log_request_lists_only_the_pods_it_can_mean() -> None:
    assert log_pods({"pod": "tj-node-0-3-abcde"}) == {"metadata.name": "tj-node-0-3-abcde"}
    assert log_pods({"node": "3"}) == {
        c.REPLICATED_JOB_NAME_LABEL: c.NODE_REPLICATED_JOB,
        c.JOB_COMPLETION_INDEX: "3",
    }
    assert log_pods({"replicatedJob": "launcher"})[c.REPLICATED_JOB_NAME_LABEL] == "launcher"
    for query in ({"pod": "a,metadata.namespace!=x"}, {"replicatedJob": "node,x!=y"}):
        with pytest.raises(Refusal) as refused:
            log_pods(query)  # nothing a tenant writes is spliced into a selector
        assert refused.value.code == 400


def big_pod(i: int) -> dict[str, Any]:
    """A pod as a hostile tenant sizes it (a 200 KB env value; labels, annotations, a
    command, mounts and an image of its own, which the kubelet repeats in a waiting
    container's message), with everything the story, the logs and the tails read of a pod."""
    labels = {c.JOBSET_NAME_LABEL: "tj", **{f"x{k}": "y" * 60 for k in range(50)}}
    pod = node_pod(f"tj-node-0-{i}", f"p{i}", "job-uid", i, **labels)
    node = {
        "name": c.NODE_CONTAINER,
        "env": [{"name": "BIG", "value": "v" * 200_000}],
        "command": ["python", "-c", "c" * 20_000],
        "volumeMounts": [{"name": f"v{k}", "mountPath": f"/m/{'p' * 200}{k}"} for k in range(50)],
    }
    image = "registry.example/" + "i" * 10_000
    waiting = {"reason": "ImagePullBackOff", "message": f"{image} " * 10}
    status = {
        "phase": "Running",
        "startTime": "2026-11-26T10:01:00Z",
        "conditions": [{"type": "Ready", "message": "m" * 20_000}],
        "containerStatuses": [
            {"name": "sidecar", "ready": True, "restartCount": 0, "image": image},
            {
                "name": c.NODE_CONTAINER,
                "ready": False,
                "restartCount": 3,
                "image": image,
                "state": {"waiting": waiting},
            },
        ],
    }
    init = {"name": "init", "env": [{"name": "E", "value": "b" * 1000}]}
    edit(pod).namespace("team-a").annotations({"big": "a" * 100_000})
    edit(pod).spec(nodeName="node-1", initContainers=[init], containers=[{"name": "sidecar"}, node])
    edit(pod).status(status)
    return pod


class BigPages(Pages):
    """Pages of `big_pod`s; what the reader still holds of the earlier pages is measured
    (tracemalloc) each time it asks for the next."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.held: list[int] = []

    def get_json(self, path: str, query: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.held.append(tracemalloc.get_traced_memory()[0])
        page = super().get_json(path, query, timeout)
        if path.endswith("/pods"):
            page["items"] = [big_pod(int(p["metadata"]["name"][1:])) for p in page["items"]]
            return page
        # the copy's Job, controlling the pods
        return {
            "items": [owned("Job", "tj-node-0", "job-uid", "copy-uid")],
            "metadata": {"continue": ""},
        }


def test_a_read_keeps_of_each_pod_only_what_its_readers_read() -> None:
    """The review's N3: a read of 500 pods of ~1 MB held every whole pod at once (+1.4 GiB
    measured); now a page of 50 at a time, each pod cut down as its page comes."""
    worker = BigPages(120)
    remote = SimpleNamespace(name="w", cluster=worker)
    tracemalloc.start()
    try:
        _, pods, more = copy_pods.read_some(remote, "team-a", "tj", "copy-uid")  # type: ignore[arg-type]
    finally:
        tracemalloc.stop()
    assert (len(pods), more) == (120, False)
    # Each page is ~11 MB whole; what is held when the next is asked for is the cut pods
    # (a few KB each), never the pages before.
    first = worker.held[1]  # the pods' first page asked for (after the Jobs)
    assert max(worker.held[2:]) - first < 2_000_000, [h - first for h in worker.held]
    assert max(len(json.dumps(p)) for p in pods) < 4_000
    whole = [big_pod(i) for i in range(120)]
    assert [story.pod_of(p, "w") for p in pods] == [story.pod_of(p, "w") for p in whole]
    assert log_tails.choose(pods) == [
        (copy_pods.pod_seen(p), cs) for p, cs in log_tails.choose(whole)
    ]
    assert [log_tails._entry(p, "w") for p in pods] == [log_tails._entry(p, "w") for p in whole]
    job = owned("Job", "tj-node-0", "job-uid", "copy-uid")
    assert ours({"copy-uid"}, [job], pods)[1] == [copy_pods.pod_seen(p) for p in whole]
    for query in ({"pod": "tj-node-0-7"}, {"node": "7"}):
        assert pick_pod(pods, query) == copy_pods.pod_seen(pick_pod(whole, query))
    waiting = pods[0]["status"]["containerStatuses"][1]["state"]["waiting"]
    assert waiting["reason"] == "ImagePullBackOff" and len(waiting["message"]) == 1024


def test_a_read_keeps_of_each_job_its_names_and_controller_only() -> None:
    """Anyone who may create Jobs in the namespace may label them as the TrainJob's, with a
    pod template as large as etcd stores: a read keeps of each Job its names, UID and
    controller (before: each whole, up to MAX_JOBS of them), and judges ownership the same."""
    env = [{"name": f"V{i}", "value": "x" * 100} for i in range(2_000)]
    template = {"spec": {"containers": [{"name": "n", "env": env}]}}
    ours_job = owned("Job", "tj-node-0", "job-uid", "copy-uid")
    edit(ours_job).owners(
        controller("X", "x", "copy-uid"), {"kind": "Y", "uid": "other", "name": "y"}
    )
    jobs = [ours_job, owned("Job", "decoy", "decoy-uid", "someone")]
    for job in jobs:
        edit(job).whole_spec({"template": template})

    class JobPages(Pages):
        def get_json(self, path: str, query: dict[str, Any], timeout: float) -> dict[str, Any]:
            if path.endswith("/jobs"):
                return {"items": jobs, "metadata": {"continue": ""}}
            return {"items": [owned("Pod", "tj-node-0-0-a", "pod-uid", "job-uid")]}

    remote = SimpleNamespace(name="w", cluster=JobPages(0))
    kept, pods, _ = copy_pods.read_some(remote, "team-a", "tj", "copy-uid")  # type: ignore[arg-type]
    assert [j["metadata"]["name"] for j in kept] == ["tj-node-0"]
    assert kept[0] == {
        "metadata": {
            "name": "tj-node-0",
            "uid": "job-uid",
            "ownerReferences": [
                {
                    "apiVersion": None,
                    "kind": "X",
                    "name": "x",
                    "uid": "copy-uid",
                    "controller": True,
                }
            ],
        }
    }
    assert [p["metadata"]["name"] for p in pods] == ["tj-node-0-0-a"]
    assert copy_pods.ours({"copy-uid"}, [copy_pods.job_seen(j) for j in jobs], [])[0] == kept


class JobSetWorker:
    """A worker whose copy's one Job a JobSet controls: each read's path, timeout and the
    form it asked for kept."""

    def __init__(self) -> None:
        self.cluster = self.api = self
        self.timeouts: list[tuple[str, float]] = []
        self.accepts: list[tuple[str, str]] = []

    def request(
        self, method: str, path: str, query: dict[str, Any], timeout: float, accept: str = JSON
    ) -> bytes:
        self.timeouts.append((path, timeout))
        self.accepts.append((path.rsplit("/", 1)[-1], accept))
        ref = {"kind": "JobSet", "name": "tj", "uid": "js", "controller": True}
        job = {"metadata": {"name": "tj-node-0", "uid": "j1", "ownerReferences": [ref]}}
        return orjson.dumps({"items": [job] if path.endswith("/jobs") else []})

    def get_json(self, path: str, timeout: float, **_: Any) -> dict[str, Any]:
        self.timeouts.append((path, timeout))
        return {"metadata": {"uid": "js", "ownerReferences": [{"uid": "copy", "controller": True}]}}


def test_every_read_of_a_copy_ends_by_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Jobs, the pods and the JobSet are each read within what is left of `until`."""
    monkeypatch.setattr(copy_pods.time, "monotonic", lambda: 1000.0)
    worker = JobSetWorker()
    copy_pods.read(worker, "ns", "tj", "copy", until=1003.0)  # type: ignore[arg-type]
    assert [p.rsplit("/", 1)[-1] for p, _ in worker.timeouts] == ["jobs", "pods", "tj"]
    assert {t for _, t in worker.timeouts} == {3.0}, worker.timeouts


def test_a_copys_jobs_are_listed_as_their_metadata_alone() -> None:
    """A Job's pod template is its tenant's to size (an env value up to the 1.5 MiB etcd
    stores), and every story, log and tails read lists up to 1,000 of them: only their
    metadata is asked for; the pods whole (their status is read)."""
    worker = JobSetWorker()
    copy_pods.read(worker, "ns", "tj", "copy")  # type: ignore[arg-type]
    assert worker.accepts == [("jobs", METADATA_LIST), ("pods", JSON)]


def test_no_page_is_asked_for_with_no_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(copy_pods.time, "monotonic", lambda: clock[0])
    worker = SlowPages(5000, 5.0, clock)
    with pytest.raises(TransportError, match="no time left"):
        copy_pods.list_some(worker, "/pods", 500, until=1015.0)  # type: ignore[arg-type]
    assert worker.timeouts == [10.0, 10.0, 5.0]  # at 1015 exactly, none


def test_a_pod_is_kept_with_its_controller_and_at_most_64_containers() -> None:
    """A pod the tenant labels for its TrainJob may carry thousands of owner references and
    containers (1.3 MiB of references kept 6.2 MiB a pod): a read keeps its controller
    reference and its first 64 containers and their statuses."""
    refs = [{"kind": "X", "name": f"x{i}", "uid": f"u{i}"} for i in range(5_000)]
    refs.insert(7, {"kind": "Job", "name": "tj-node-0", "uid": "job-uid", "controller": True})
    names = [f"c{i}" for i in range(3_000)]
    pod = {
        "metadata": {"name": "p", "uid": "pod-uid", "ownerReferences": refs},
        "spec": {"containers": [{"name": n, "image": "i"} for n in names]},
        "status": {"containerStatuses": [{"name": n, "ready": False} for n in names]},
    }
    seen = copy_pods.pod_seen(pod)
    assert seen["metadata"]["ownerReferences"] == [
        {
            "apiVersion": None,
            "kind": "Job",
            "name": "tj-node-0",
            "uid": "job-uid",
            "controller": True,
        }
    ]
    assert [x["name"] for x in seen["spec"]["containers"]] == names[:64]
    assert len(seen["status"]["containerStatuses"]) == 64
    assert ours({"copy-uid"}, [owned("Job", "tj-node-0", "job-uid", "copy-uid")], [seen])[1]
