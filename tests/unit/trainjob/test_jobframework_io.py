"""What the Kueue integration asks of the API server for a TrainJob's priority
(trainjob/jobframework_io.py), against the in-memory stand-in: a class, found or not, is read
once a CLASS_TTL on each cluster, however many passes ask."""

from __future__ import annotations

from typing import Any

import pytest
from tenacity import wait_none

from kubecontrol import cluster as cluster_module
from tests.support.builders import TrainJobBuilder, edit, make_runtime
from tests.support.memory_api import Fault, MemoryApi
from tests.support.whole_pass import MemoryCluster, fleet
from trainjob import jobframework_io
from trainjob.jobframework_io import extract_priority
from trainjob.workload import ClassMissing
from trainjob_api import constants as c

# What the API server's 404 for the label's class "missing" makes of the Workload: none yet.
MISSING = ClassMissing(
    "WorkloadPriorityClass", "missing", f"metadata.labels[{c.KUEUE_PRIORITY_CLASS_LABEL}]"
)


def a_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_a_priority_class_found_or_not_is_read_once_a_ttl_on_each_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TrainJob whose label names a class that does not exist is looked at on every pass
    until it is admitted: one GET (and one warning) a CLASS_TTL, not one a pass; a class made
    later is found once the TTL has run, and a cluster's classes are its own."""
    api = MemoryApi("manager", [a_class("low", 10)])
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)

    def asked() -> list[str]:  # served, and refused (404: not found)
        paths = [p for _, p in api.requests] + [p for _, p, _ in api.refused]
        return [p for p in paths if "/workloadpriorityclasses/" in p]

    for _ in range(5):
        assert extract_priority(cluster, "missing", []) == MISSING
        assert extract_priority(cluster, "low", [])
    assert len(asked()) == 2  # each name once
    api.put(a_class("missing", 7))
    assert extract_priority(cluster, "missing", []) == MISSING  # as read, within the TTL
    # a Workload about to be made waits for it as long (no Workload is made while missing)
    assert extract_priority(cluster, "missing", [], fresh=True) == MISSING
    assert extract_priority(cluster, "low", [], fresh=True).value == 10  # type: ignore[union-attr]
    assert len(asked()) == 2  # what the API server said is kept, fresh or not
    # what the API server did not say is not kept: a failed read, a name no class can have
    api.fail(Fault(500, plural="workloadpriorityclasses", times=None))
    assert extract_priority(cluster, "flaky", []) is None
    api.heal()
    api.put(a_class("flaky", 5))
    assert extract_priority(cluster, "flaky", []).value == 5  # type: ignore[union-attr]
    hostile = extract_priority(cluster, "x" * 100_000, [])  # cannot exist: missing
    assert isinstance(hostile, ClassMissing) and len(hostile.message("")) < 400
    assert len(jobframework_io._classes[cluster]) == 3  # low, missing, flaky
    other = MemoryCluster(MemoryApi("manager", [a_class("missing", 3)]), "w")  # its name too
    assert extract_priority(other, "missing", []).value == 3  # type: ignore[union-attr]
    monkeypatch.setattr(jobframework_io, "CLASS_TTL", 0.0)
    assert extract_priority(cluster, "missing", [], fresh=True).value == 7  # type: ignore[union-attr]
    api.put(a_class("low", 11))
    assert extract_priority(cluster, "low", []).value == 11  # type: ignore[union-attr]
    assert sum("/low" in p for p in asked()) == 2  # read again once the TTL has run


def test_a_workload_priority_class_and_a_priority_class_of_one_name_are_kept_apart() -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}}
    api = MemoryApi("manager", [a_class("p", 10), {**pc, "value": 20}])
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)
    assert extract_priority(cluster, "p", []).value == 10  # type: ignore[union-attr]
    named = extract_priority(cluster, "", [{"spec": {"priorityClassName": "p"}}])
    assert named is not None and (named.kind, named.value) == ("PriorityClass", 20)
    # a name that is no string (a runtime's CRD that does not say) names no class
    for odd in (5, ["p"], {"p": 1}):
        found = extract_priority(cluster, "", [{"spec": {"priorityClassName": odd}}])
        assert isinstance(found, jobframework_io.Priority) and found.kind != "PriorityClass"


def test_a_workload_about_to_be_made_reads_its_class_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher's pass that makes a TrainJob's Workload asks for its priority class
    afresh (`fresh`): a class found missing within the TTL is not taken as missing for good."""
    seen: list[bool] = []
    real = jobframework_io.extract_priority

    def spy(cluster: Any, wpc: str, templates: list[Any], fresh: bool = False) -> Any:
        seen.append(fresh)
        return real(cluster, wpc, templates, fresh)

    monkeypatch.setattr(jobframework_io, "extract_priority", spy)
    tj = TrainJobBuilder().queue("q").multikueue().obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world, _ = fleet([make_runtime(), tj], {"worker1": [make_runtime()]})
    try:
        world.settle(("ns", "tj"))
    finally:
        world.close()
    assert seen and seen[0] is True


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's retries of a failed read without their waits (a failure that lasts fails
    all five at once)."""
    monkeypatch.setattr(
        cluster_module, "_RETRYING", cluster_module._RETRYING.copy(wait=wait_none())
    )


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize("status", [500, 429, 401])
def test_a_class_the_api_server_failed_to_read_fails_the_pass_about_to_make_a_workload(
    status: int,
) -> None:
    """Kueue's reconcile is tried again when it cannot read a job's priority class; so is a
    pass about to make a Workload (`fresh`): the Workload keeps the priority it is made with,
    never 0 for a failed read. A later pass reads it; passes that make nothing go on without."""
    api = MemoryApi("manager", [a_class("gold", 100)])
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)
    api.fail(Fault(status, plural="workloadpriorityclasses", times=None))
    with pytest.raises(jobframework_io.ApiException):
        extract_priority(cluster, "gold", [], fresh=True)
    assert extract_priority(cluster, "gold", []) is None  # nothing made of it
    api.heal()
    assert extract_priority(cluster, "gold", [], fresh=True).value == 100  # type: ignore[union-attr]


def test_a_class_the_identity_may_not_read_never_fails_a_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An identity without the read (an install older than the priority support) makes its
    Workloads without a priority, as before, and says so."""
    monkeypatch.setattr(jobframework_io, "_default_priority", {})  # none kept by another test
    api = MemoryApi("manager", [a_class("gold", 100)])
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)
    api.fail(Fault(403, plural="workloadpriorityclasses", times=None))
    assert extract_priority(cluster, "gold", [], fresh=True) is None
    api.fail(Fault(403, plural="priorityclasses", times=None))
    assert extract_priority(cluster, "", [], fresh=True) == jobframework_io.Priority(
        None, None, None, 0
    )


@pytest.mark.usefixtures("no_backoff")
def test_a_default_class_list_the_api_server_failed_is_not_kept(
    with_default: tuple[MemoryApi, MemoryCluster],
) -> None:
    """The cluster's default PriorityClass: a list the API server failed fails a pass about to
    make a Workload, leaves a Workload following its label as it is (it was patched to 0 for
    good), and is not kept, so the next pass finds the default at once (kept for
    DEFAULT_PRIORITY_TTL, it made 30 s of Workloads at priority 0)."""
    api, cluster = with_default
    api.fail(Fault(500, plural="priorityclasses", times=None))
    with pytest.raises(jobframework_io.ApiException):
        extract_priority(cluster, "", [], fresh=True)
    assert extract_priority(cluster, "", []) is None  # no answer: a Workload's left as it is
    api.heal()
    made = extract_priority(cluster, "", [], fresh=True)
    assert made is not None and (made.name, made.value) == ("normal", 50)


@pytest.mark.usefixtures("no_backoff")
def test_a_pass_that_cannot_read_the_class_makes_no_workload_until_it_can() -> None:
    """The dispatcher's pass for a TrainJob of a priority class the API server fails to read
    makes no Workload (the work queue tries it again); once read, the Workload has its
    priority."""
    tj = TrainJobBuilder().queue("q").multikueue().obj()
    edit(tj).label(c.KUEUE_PRIORITY_CLASS_LABEL, "gold")
    world, _ = fleet([make_runtime(), tj, a_class("gold", 100)], {"worker1": [make_runtime()]})
    try:
        world.apis["manager"].fail(Fault(503, plural="workloadpriorityclasses", times=None))
        with pytest.raises(jobframework_io.ApiException):
            world.run(("ns", "tj"))
        assert world.apis["manager"].objects(c.WORKLOAD, "ns") == []
        world.apis["manager"].heal()
        world.settle(("ns", "tj"))
        (made,) = world.apis["manager"].objects(c.WORKLOAD, "ns")
        assert made["spec"]["priority"] == 100
        assert made["spec"]["priorityClassRef"]["name"] == "gold"
    finally:
        world.close()


def _default_class() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "normal"},
        "value": 50,
        "globalDefault": True,
    }


@pytest.fixture
def with_default(monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryApi, MemoryCluster]:
    """A manager whose default PriorityClass is "normal" (50), and no default kept by
    another test."""
    monkeypatch.setattr(jobframework_io, "_default_priority", {})
    api = MemoryApi("manager", [_default_class()])
    return api, MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)


@pytest.mark.usefixtures("no_backoff")
def test_a_pod_templates_class_the_api_server_failed_to_read_fails_the_pass() -> None:
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "p"},
        "value": 20,
    }
    api = MemoryApi("manager", [pc])
    cluster = MemoryCluster(api, c.DISPATCHER_FIELD_MANAGER)
    templates = [{"spec": {"priorityClassName": "p"}}]
    api.fail(Fault(503, plural="priorityclasses", times=None))
    with pytest.raises(jobframework_io.ApiException):
        extract_priority(cluster, "", templates, fresh=True)
    api.heal()
    made = extract_priority(cluster, "", templates, fresh=True)
    assert made is not None and (made.kind, made.name, made.value) == ("PriorityClass", "p", 20)


def test_a_default_class_list_that_got_no_answer_fails_the_pass_and_is_not_kept(
    with_default: tuple[MemoryApi, MemoryCluster],
) -> None:
    api, cluster = with_default
    api.unreachable()
    with pytest.raises(OSError):
        extract_priority(cluster, "", [], fresh=True)
    assert extract_priority(cluster, "", []) is None  # following a label: left as it is
    api.unreachable(False)
    made = extract_priority(cluster, "", [], fresh=True)
    assert made is not None and (made.name, made.value) == ("normal", 50)


def test_a_default_class_list_the_identity_may_not_make_counts_as_none_for_the_ttl(
    with_default: tuple[MemoryApi, MemoryCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, cluster = with_default
    none = jobframework_io.Priority(None, None, None, 0)
    api.fail(Fault(403, "GET", "priorityclasses"))  # once
    assert extract_priority(cluster, "", [], fresh=True) == none
    assert extract_priority(cluster, "", [], fresh=True) == none  # kept, not listed again
    monkeypatch.setattr(jobframework_io, "DEFAULT_PRIORITY_TTL", 0.0)
    made = extract_priority(cluster, "", [], fresh=True)
    assert made is not None and (made.name, made.value) == ("normal", 50)
