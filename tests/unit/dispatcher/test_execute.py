"""The dispatcher's executor on each answer a worker can give a planned write
(dispatcher/controller/execute.py `_remote_write`): done, skipped (nothing to do now, not tried
again at once) or failed (the pass comes back and the write is sent again), and what it notes for
the check's message. The worker is a stand-in that answers as the API server would."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from dispatcher.controller import execute
from dispatcher.decisions.decide import GUARDED, Guard, RemoteAction
from kubecontrol.client import ApiException
from tests.support.builders import edit
from trainjob_api import constants as c
from trainjob_api.views import ObjectView

Dict = dict[str, Any]


def copy() -> Dict:
    return {
        "kind": "TrainJob",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "copy-uid",
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "multikueue"},
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "manager-uid"},
        },
        "spec": {"runtimeRef": {"name": "rt"}},
    }


class Worker:
    """A worker's API as the executor calls it: each verb answers `answer` (an ApiException
    or another exception to raise, or nothing), and a GET finds `found`."""

    def __init__(self, answer: Exception | None = None, found: Dict | None = None) -> None:
        self.answer, self.found = answer, found
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _call(self, verb: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((verb, args, kwargs))
        if self.answer is not None:
            raise self.answer

    def create(self, *args: Any) -> None:
        self._call("create", *args)

    def patch(self, *args: Any, **kwargs: Any) -> None:
        self._call("patch", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> None:
        self._call("delete", *args, **kwargs)

    def get_or_none(self, *_: Any) -> Dict | None:
        return self.found


class WorkerConnections:
    """What the executor reads of the worker connections, and what it notes there."""

    def __init__(self, worker: Worker | None, first_time: bool = True) -> None:
        self.worker, self.first = worker, first_time
        self.forgotten: list[tuple[str, ...]] = []
        self.taken: list[tuple[str, str, str, str | None]] = []
        self.namespace_problems: list[tuple[str, str, str | None]] = []

    def get(self, _name: str) -> Any:
        return None if self.worker is None else SimpleNamespace(cluster=self.worker)

    def first_time(self, _key: tuple[str, ...]) -> bool:
        return self.first

    def forget_write(self, key: tuple[str, ...]) -> None:
        self.forgotten.append(key)

    def note_taken(self, cluster: str, ns: str, name: str, why: str | None) -> None:
        self.taken.append((cluster, ns, name, why))

    def note_namespace_problem(self, cluster: str, ns: str, why: str | None) -> None:
        self.namespace_problems.append((cluster, ns, why))


def key(verb: str) -> tuple[str, ...]:
    return ("worker1", verb, "TrainJob", "ns", "tj")


def planned(verb: str, obj: Dict, **kwargs: Any) -> RemoteAction:
    """A write as the plan makes it: one to an object seen guarded by the UID seen."""
    guard = Guard(obj["metadata"]["uid"]) if verb in GUARDED else None
    return RemoteAction("worker1", verb, obj, guard=guard, **kwargs)  # type: ignore[arg-type]


def write(workers: WorkerConnections, verb: str) -> bool | None:
    return execute._remote_write(workers, planned(verb, copy()))  # type: ignore[arg-type]


@pytest.mark.parametrize("verb", ["create", "patch", "delete"])
def test_a_write_done_is_done_and_its_opposite_may_follow_at_once(verb: str) -> None:
    workers = WorkerConnections(Worker())
    assert write(workers, verb) is True
    ((called, args, _),) = workers.worker.calls  # type: ignore[union-attr]
    assert called == verb
    if verb == "create":  # (kind, the copy)
        assert args[1]["metadata"]["name"] == "tj"
    else:  # (kind, name, namespace, ...)
        assert args[1:3] == ("tj", "ns")
    opposite = {"create": "delete", "delete": "create"}.get(verb)
    assert workers.forgotten == ([key(opposite)] if opposite else [])
    if verb == "create":  # a create that went through clears what the check said of it
        assert workers.namespace_problems == [("worker1", "ns", None)]
        assert workers.taken == [("worker1", "ns", "tj", None)]


def test_a_delete_names_the_copy_it_saw_by_its_uid() -> None:
    workers = WorkerConnections(Worker())
    write(workers, "delete")
    ((_, args, kwargs),) = workers.worker.calls  # type: ignore[union-attr]
    assert args[1:] == ("tj", "ns") and kwargs == {"uid": "copy-uid"}


def test_the_executor_sends_the_plans_guard_not_what_the_object_says() -> None:
    """The guard is the plan's decision: the object's metadata may hold anything."""
    workers = WorkerConnections(Worker())
    seen = copy()
    edit(seen).resource_version("8").status({})
    for verb, guard in [
        ("patch", Guard("planned-uid", "5")),
        ("delete", Guard("planned-uid", "5")),
        ("open", Guard("planned-uid", "9")),
    ]:
        action = RemoteAction("worker1", verb, seen, guard=guard)  # type: ignore[arg-type]
        assert execute._remote_write(workers, action) is True  # type: ignore[arg-type]
    patch, delete, open_ = workers.worker.calls  # type: ignore[union-attr]
    assert patch[1][3]["metadata"] == {"uid": "planned-uid", "resourceVersion": "5"}
    assert delete[2] == {"uid": "planned-uid"}  # a delete's precondition names a UID only
    assert open_[1][3]["metadata"] == {"uid": "planned-uid", "resourceVersion": "9"}


def test_a_guard_takes_the_version_seen_only_for_a_write_made_from_the_object_as_seen() -> None:
    seen = {"metadata": {"uid": "u", "resourceVersion": "3"}}
    assert Guard.of(ObjectView(seen)) == Guard("u")
    assert Guard.of(ObjectView(seen), as_seen=True) == Guard("u", "3")
    assert Guard("u").preconditions() == {"uid": "u"}


@pytest.mark.parametrize("verb", sorted(GUARDED))
@pytest.mark.parametrize("guard", [None, Guard("")])
def test_a_write_to_an_object_seen_is_never_planned_without_its_guard(
    verb: str, guard: Guard | None, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ValueError, match=f"a {verb} of a worker's object needs a guard"):
        RemoteAction("worker1", verb, copy(), guard=guard)  # type: ignore[arg-type]
    action = planned(verb, copy())
    action.guard = guard  # set after the plan was made: still never sent
    workers = WorkerConnections(Worker())
    with caplog.at_level(logging.WARNING, logger=execute.__name__):
        assert execute._remote_write(workers, action) is None  # type: ignore[arg-type]
    assert workers.worker.calls == []  # type: ignore[union-attr]
    assert [getattr(r, "error", "") for r in caplog.records] == [
        f"{verb} of ns/tj on worker1: no guard"
    ]


@pytest.mark.parametrize(
    ("verb", "status"), [("patch", 409), ("patch", 404), ("delete", 409), ("delete", 404)]
)
def test_a_copy_changed_or_gone_since_is_skipped_not_sent_again_at_once(
    verb: str, status: int
) -> None:
    """The watch shows what changed; the next pass decides again from it. Sending it again at
    once would repeat a write the worker just refused."""
    workers = WorkerConnections(Worker(ApiException(status, "refused")))
    assert write(workers, verb) is False
    assert workers.forgotten == [] and workers.taken == []


@pytest.mark.parametrize(
    ("verb", "answer"),
    [
        ("create", ApiException(500, "boom")),
        ("patch", ApiException(422, "invalid")),
        ("delete", ApiException(403, "forbidden")),
        ("delete", ConnectionError("worker unreachable")),
    ],
)
def test_a_write_that_failed_is_sent_again_by_the_next_pass(verb: str, answer: Exception) -> None:
    workers = WorkerConnections(Worker(answer))
    assert write(workers, verb) is None
    assert workers.forgotten == [key(verb)]


def test_a_create_in_a_namespace_the_worker_lacks_says_so_in_the_check() -> None:
    workers = WorkerConnections(Worker(ApiException(404, "not found")))
    assert write(workers, "create") is False
    assert workers.namespace_problems == [("worker1", "ns", "namespace 'ns' not found")]
    assert workers.forgotten == []


def test_a_create_that_meets_our_own_copy_is_already_there() -> None:
    for found in (copy(), None):  # ours, or gone again since
        workers = WorkerConnections(Worker(ApiException(409, "exists"), found=found))
        assert write(workers, "create") is False
        assert workers.taken == [] and workers.forgotten == []


@pytest.mark.parametrize(
    "whose",
    [
        {"labels": {}, "annotations": {}},  # a tenant's own object of that name
        {  # another manager's copy (another origin)
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "elsewhere"},
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "manager-uid"},
        },
        {  # ours, for an earlier manager object of that name
            "labels": {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: "multikueue"},
            "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "earlier-uid"},
        },
    ],
)
def test_a_create_that_meets_anyone_elses_object_notes_the_name_taken_and_leaves_it(
    whose: Dict,
) -> None:
    found = copy()
    edit(found).labels(whose["labels"]).annotations(whose["annotations"])
    workers = WorkerConnections(Worker(ApiException(409, "exists"), found=found))
    assert write(workers, "create") is False
    ((cluster, ns, name, why),) = workers.taken
    assert (cluster, ns, name) == ("worker1", "ns", "tj")
    assert why is not None and "is not a copy from this manager" in why
    assert [call[0] for call in workers.worker.calls] == ["create"]  # type: ignore[union-attr]


def test_a_write_sent_moments_ago_or_to_a_worker_gone_is_not_sent() -> None:
    again = WorkerConnections(Worker(), first_time=False)
    assert write(again, "create") is False and again.worker.calls == []  # type: ignore[union-attr]
    assert write(WorkerConnections(None), "create") is False


def test_a_deleted_trainjobs_copy_delete_is_sent_even_if_sent_moments_ago() -> None:
    """Its pass does not come back (our finalizer goes with it): `once` sends it all the same."""
    again = WorkerConnections(Worker(), first_time=False)
    action = planned("delete", copy())
    assert execute._remote_write(again, action, once=True) is True  # type: ignore[arg-type]
    ((called, args, kwargs),) = again.worker.calls  # type: ignore[union-attr]
    assert called == "delete" and args[1:] == ("tj", "ns") and kwargs == {"uid": "copy-uid"}


class Captures:
    """The captures under way as the executor asks them: `over` answers `done`."""

    def __init__(self, done: bool) -> None:
        self.done = done
        self.asked: list[tuple[str, str]] = []

    def over(self, uid: str, namespace: str, _capture: Any) -> bool:
        self.asked.append((uid, namespace))
        return self.done


@pytest.mark.parametrize("over", [True, False])
def test_a_copy_whose_tails_are_read_goes_once_its_capture_in_its_namespace_is_over(
    over: bool,
) -> None:
    """The capture is asked for by the copy's UID in its own namespace (each namespace has its
    own share of captures); until it is over, the delete waits and is sent again."""
    workers = WorkerConnections(Worker())
    captures = Captures(over)
    settings = SimpleNamespace(log_tails_kept=10, log_tails_bytes=1, log_tails_per_namespace=1)
    workers.captures, workers.settings, workers.manager = captures, settings, None  # type: ignore[attr-defined]
    action = planned("delete", copy(), capture_tails=True)
    done = execute._remote_write(workers, action)  # type: ignore[arg-type]
    assert captures.asked == [("copy-uid", "ns")]
    calls = [call[0] for call in workers.worker.calls]  # type: ignore[union-attr]
    assert (done, calls) == ((True, ["delete"]) if over else (None, []))
    assert workers.forgotten == ([key("create")] if over else [key("delete")])


def test_an_open_writes_the_copys_status_guarded_by_the_version_it_saw() -> None:
    worker = Worker()
    gates = [{"name": "kueue.x-k8s.io/multikueue", "position": "Open", "lastTransitionTime": "t"}]
    seen = {
        "kind": "Workload",
        "apiVersion": c.KUEUE_API,
        "metadata": {"name": "wl", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "status": {"preemptionGates": gates},
    }
    action = RemoteAction("worker1", "open", seen, guard=Guard("u", "7"))
    assert execute._remote_write(WorkerConnections(worker), action) is True  # type: ignore[arg-type]
    ((verb, args, kwargs),) = worker.calls
    body = {"metadata": {"uid": "u", "resourceVersion": "7"}, "status": {"preemptionGates": gates}}
    assert (verb, args[1:], kwargs) == ("patch", ("wl", "ns", body), {"subresource": "status"})


@pytest.mark.parametrize(("answer", "done"), [(None, 2), (ApiException(409, "changed"), 0)])
def test_the_sweep_deletes_each_orphan_planned_even_one_deleted_moments_ago(
    answer: Exception | None, done: int
) -> None:
    """The garbage collector's plan (removal.orphans) carried out: each copy by the UID seen,
    sent though a delete of it was noted moments ago (the sweep comes back only a GC interval
    later), and counted once deleted; a copy changed since is left to the next sweep."""
    workers = WorkerConnections(Worker(answer), first_time=False)
    other = copy()
    edit(other).name("tj2").uid("uid2")
    deletes = [planned("delete", copy()), planned("delete", other)]
    assert execute.sweep(workers, deletes) == done  # type: ignore[arg-type]
    calls = [(verb, args[1:], kwargs) for verb, args, kwargs in workers.worker.calls]  # type: ignore[union-attr]
    assert calls == [
        ("delete", ("tj", "ns"), {"uid": "copy-uid"}),
        ("delete", ("tj2", "ns"), {"uid": "uid2"}),
    ]


def test_a_write_sent_once_never_asks_whether_it_was_sent_moments_ago() -> None:
    """Asking notes the write as sent: a sweep's delete would hide a pass's delete of a new
    copy of that name for a while (the key names no UID)."""
    asked = []
    workers = WorkerConnections(Worker())
    workers.first_time = lambda key: asked.append(key) or True  # type: ignore[method-assign]
    execute.sweep(workers, [planned("delete", copy())])  # type: ignore[arg-type]
    assert asked == []
