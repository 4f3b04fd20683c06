"""What the worker controller's caches keep of its pods and of FailedCreate Events
(worker_controller/digests.py, the informers' transforms)."""

from __future__ import annotations

from trainjob_api import constants as c
from worker_controller import digests


def test_a_pods_digest_keeps_its_names_its_phase_and_what_is_wrong_and_nothing_else() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "5",
            "uid": "u",
            "labels": {c.TRAINJOB_NAME_LABEL: "tj", c.REPLICATED_JOB_NAME_LABEL: "node", "x": "y"},
            "annotations": {"big": "z" * 1000},
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {
            "containerStatuses": [
                {"name": "c", "state": {"waiting": {"reason": "ErrImagePull", "message": "no"}}}
            ]
        },
    }
    assert digests.pod_digest(pod) == {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "5",
            "labels": {c.TRAINJOB_NAME_LABEL: "tj", c.REPLICATED_JOB_NAME_LABEL: "node"},
        },
        "status": {
            "phase": "Pending",
            "problem": {"stuck": True, "container": "c", "reason": "ErrImagePull", "message": "no"},
        },
    }
    assert digests.pod_owner(pod) == ("ns", "tj")


def test_an_events_last_time_falls_back_as_the_api_fills_them() -> None:
    base = {"metadata": {"name": "e", "namespace": "ns", "creationTimestamp": "t0"}}
    assert digests.event_digest(base)["last"] == "t0"
    assert digests.event_digest({**base, "eventTime": "t1"})["last"] == "t1"
    series = {**base, "eventTime": "t1", "series": {"lastObservedTime": "t2"}}
    assert digests.event_digest(series)["last"] == "t2"
    assert digests.event_digest({**series, "lastTimestamp": "t3"})["last"] == "t3"
    assert digests.event_job({**base, "job": {"name": "j"}}) == ("ns", "j")
