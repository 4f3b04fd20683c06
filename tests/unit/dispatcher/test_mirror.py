"""Which worker Events show on the manager TrainJob (dispatcher/decisions/mirror.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from dispatcher.controller import watches
from dispatcher.decisions.mirror import Mirrored
from dispatcher.decisions.mirror import mirror as mirror_of
from dispatcher.workers.remote import _event_seen
from kubebase.kinds import EVENT
from tests.support.builders import TrainJobBuilder, edit, make_runtime
from tests.support.whole_pass import fleet, reserve
from trainjob.naming import owning_trainjob
from trainjob_api import constants as c
from trainjob_api.views import EventView

Dict = dict[str, Any]


def mirror(event: Dict, cluster: str, trainjobs: list[str], warnings_only: bool) -> Mirrored | None:
    """`mirror` of an Event as its worker's watch keeps it."""
    return mirror_of(EventView(event), cluster, trainjobs, warnings_only)


def event(kind: str, name: str, etype: str = "Warning", count: int = 1) -> Dict:
    return {
        "metadata": {"name": f"{name}.abc", "namespace": "ns", "uid": "u-1"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "ns"},
        "type": etype,
        "reason": "FailedJobs",
        "message": "node failed",
        "count": count,
    }


def test_a_pod_belongs_to_the_longest_trainjob_name_that_prefixes_it() -> None:
    names = ["train", "train-big", "other"]
    assert owning_trainjob("train-big-node-0-0-x7k2p", names) == "train-big"
    assert owning_trainjob("train-node-0-0-x7k2p", names) == "train"
    assert owning_trainjob("trainer-node-0-0-x7k2p", names) is None


def test_a_trainjob_warning_is_recorded_with_the_worker_in_front_once_per_count() -> None:
    got = mirror(event("TrainJob", "train"), "worker1", ["train"], warnings_only=True)
    assert isinstance(got, Mirrored)
    assert (got.trainjob, got.type, got.reason, got.message) == (
        "train",
        "Warning",
        "FailedJobs",
        "worker1: node failed",
    )
    again = mirror(event("TrainJob", "train"), "worker1", ["train"], warnings_only=True)
    assert again is not None and again.name == got.name  # the same Event: recorded once
    counted = mirror(event("TrainJob", "train", count=2), "worker1", ["train"], True)
    assert counted is not None and counted.name != got.name
    assert got.name.startswith("train.worker1.")


def test_pod_warnings_name_the_pod_and_normal_events_follow_the_setting() -> None:
    pod = mirror(event("Pod", "train-node-0-0-abcde"), "w2", ["train"], warnings_only=True)
    assert pod is not None and pod.message == "w2: pod train-node-0-0-abcde: node failed"
    normal = event("TrainJob", "train", etype="Normal")
    assert mirror(normal, "w2", ["train"], warnings_only=True) is None
    assert mirror(normal, "w2", ["train"], warnings_only=False) is not None
    assert mirror(event("Pod", "x", etype="Normal"), "w2", ["train"], False) is None


def test_events_of_objects_not_ours_are_left_alone() -> None:
    assert mirror(event("TrainJob", "theirs"), "w1", ["train"], True) is None
    assert mirror(event("Pod", "unrelated-pod"), "w1", ["train"], True) is None
    assert mirror(event("Job", "train-node-0"), "w1", ["train"], True) is None


def test_the_cache_keeps_of_a_worker_event_what_mirroring_reads_and_a_short_message() -> None:
    whole = {
        **event("Pod", "train-node-0-0-x7k2p"),
        "message": "x" * 100_000,
        "source": {"component": "kubelet", "host": "node-1"},
        "metadata": {
            "name": "e.abc",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "9",
            "managedFields": [{"manager": "kubelet"}] * 10,
        },
    }
    kept = _event_seen(whole)
    assert set(kept) == {"metadata", "involvedObject", "type", "reason", "message", "count"}
    assert kept["metadata"] == {
        "name": "e.abc",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "9",
    }
    assert len(kept["message"]) == 1024
    assert mirror(kept, "w1", ["train"], True) == mirror(
        {**whole, "message": "x" * 1024}, "w1", ["train"], True
    )


def test_an_event_of_another_shape_is_mirrored_by_what_it_holds_or_not_at_all() -> None:
    """A worker Event is anyone's on that worker who may create Events: an involvedObject
    that is no object is about nothing; a null message says nothing after the worker."""
    odd = {**event("TrainJob", "train"), "involvedObject": ["TrainJob", "train"]}
    assert mirror(odd, "w1", ["train"], True) is None
    silent = mirror({**event("TrainJob", "train"), "message": None}, "w1", ["train"], True)
    assert silent is not None and silent.message == "w1: "
    named = mirror(event("TrainJob", "train"), "w1", ["train"], True)
    assert named is not None
    # the name is made of the worker, the Event's UID and its count, as before
    assert named.name == f"train.w1.{hashlib.sha1(b'w1/u-1/1').hexdigest()[:12]}"


def test_a_pods_warning_on_the_worker_that_runs_its_trainjob_is_said_on_the_manager() -> None:
    """Whole pass: the TrainJob a worker pod's Event is about is found by looking up the names
    its pod's name could be of (never a scan of every TrainJob on that worker); a pod of no
    TrainJob there, or one of a longer name's, is said on that one or not at all."""
    runtime = make_runtime()
    world, ctx = fleet(
        [runtime, TrainJobBuilder("my-tj").queue("q").multikueue().obj()], {"worker1": [runtime]}
    )
    try:
        world.settle(("ns", "my-tj"))
        reserve(world, "manager", "my-tj")
        world.settle(("ns", "my-tj"))
        reserve(world, "worker1", "my-tj", admitted=True)
        world.settle(("ns", "my-tj"))
        assert world.get("worker1", c.TRAINJOB, "my-tj") is not None
        manager = world.apis["manager"]
        before = {e["metadata"]["name"] for e in manager.objects(EVENT)}
        for pod in ("my-tj-node-0-0-abcde", "my-tjx-node-0-0-abcde", "other"):
            warning = event("Pod", pod)
            edit(warning).uid(f"uid-{pod}")
            watches.on_remote_event(ctx, "worker1", warning)
        elsewhere = event("Pod", "my-tj-node-0-0-fghij")  # another namespace's pod of the name
        edit(elsewhere).uid("uid-elsewhere").namespace("other")
        watches.on_remote_event(ctx, "worker1", elsewhere)
        said = [
            (e["involvedObject"]["name"], e["message"])
            for e in manager.objects(EVENT)
            if e["metadata"]["name"] not in before
        ]
        assert said == [("my-tj", "worker1: pod my-tj-node-0-0-abcde: node failed")]
    finally:
        world.close()


def test_the_cache_keeps_an_events_involved_name_no_longer_than_an_objects() -> None:
    """An Event's involvedObject is anyone's to write; no pod's name is longer than 253."""
    kept = _event_seen(event("Pod", "-" * 1_000_000))
    assert kept["involvedObject"] == {"kind": "Pod", "name": "-" * 253}
