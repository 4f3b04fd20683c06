"""What `kubectl trainjob` prints (plugin/kubectl_trainjob/view.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kubectl_trainjob.view import WorkerView, age, describe, list_table, printable, state_of
from trainjob_api.story import Copy, Pod, PodUsage
from trainjob_api.views import TrainJobView

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
Dict = dict[str, Any]


def tj(conditions: list[tuple[str, str, str]] = (), **fields: Any) -> TrainJobView:  # type: ignore[assignment]
    spec = {"runtimeRef": {"name": "torch-distributed"}, **fields.pop("spec", {})}
    return TrainJobView(
        {
            "metadata": {
                "name": fields.pop("name", "a"),
                "namespace": "ns",
                "creationTimestamp": "2026-11-23T11:57:00Z",
                "labels": {"kueue.x-k8s.io/queue-name": "q"},
            },
            "spec": spec,
            "status": {
                "conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions],
                **fields,
            },
        }
    )


@pytest.mark.parametrize(
    ("job", "state"),
    [
        (tj([("Complete", "True", "AllJobsCompleted")]), "Complete"),
        (tj([("Failed", "True", "NoClusterFits")]), "Failed (NoClusterFits)"),
        (tj(spec={"suspend": True}), "Queued"),
        (tj(clusterName="worker1"), "Running"),
        (tj(), "Created"),
    ],
)
def test_state_in_a_word(job: TrainJobView, state: str) -> None:
    assert state_of(job) == state


def test_age_as_kubectl_says_it() -> None:
    assert [age(t, NOW) for t in ("2026-11-23T11:59:15Z", "2026-11-23T11:30:00Z", None)] == [
        "45s",
        "30m",
        "-",
    ]
    assert age("2026-11-20T12:00:00Z", NOW) == "3d"


def test_the_list_table() -> None:
    pods = [
        {"name": "launcher", "pending": 0, "running": 1, "succeeded": 0, "failed": 0},
        {"name": "node", "pending": 1, "running": 2, "succeeded": 0, "failed": 0},
    ]
    reported = {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 270,
        "metrics": [{"name": "loss", "value": "0.25"}, {"name": "acc", "value": "0.9"}],
        "lastUpdatedTime": "2026-11-23T11:59:48Z",
    }
    jobs = [
        tj(name="b", clusterName="worker2", podsStatus=pods, trainerStatus=reported),
        tj(name="a", spec={"suspend": True}),
    ]
    assert list_table(jobs, NOW, all_namespaces=True).splitlines() == [
        "NAMESPACE   NAME   STATE     WORKER    PODS                   PROGRESS         QUEUE"
        "   AGE",
        "ns          a      Queued    -         -                      -                q       3m",
        "ns          b      Running   worker2   1 pending, 3 running   45% 4m30s left   q       3m",
    ]
    assert (
        "Progress:    [##############----------------]  45%  about 4m30s left  (reported 12s ago)"
        "\nMetrics:     loss=0.25  acc=0.9\n"
    ) in describe(jobs[0], None, [], None, NOW)
    assert "Progress:    none reported" in describe(jobs[1], None, [], None, NOW)
    text = describe(jobs[0], None, [], None, NOW)
    assert (
        "\n".join(
            [
                "Pods by phase:",
                "  PODSET     PENDING   RUNNING   SUCCEEDED   FAILED   UNKNOWN",
                "  launcher   0         1         0           0        0",
                "  node       1         2         0           0        0",
            ]
        )
        in text
    )
    assert "Pods by phase: none" in describe(jobs[1], None, [], None, NOW)


def test_describe_names_the_worker_and_says_when_it_cannot_be_reached() -> None:
    job = tj(clusterName="worker1")
    text = describe(job, None, [], WorkerView("worker1", error="unreachable: refused"), NOW)
    assert "Worker:      worker1" in text
    assert "Workload:    none" in text
    assert text.endswith("On worker worker1: unreachable: refused")


def test_describe_shows_the_pods_cpu_and_memory_where_the_worker_measured_them() -> None:
    def pod(name: str, usage: PodUsage | None) -> Pod:
        made = "2026-11-23T11:58:00Z"
        return Pod(name=name, worker="w", phase="Running", creation_timestamp=made, usage=usage)

    copy = Copy()
    measured = PodUsage(cpu_millicores=250, memory_bytes=300 * 2**20 + 1)
    shown = WorkerView("worker1", copy, [pod("a", measured), pod("b", None)]).render(NOW)
    header = next(line for line in shown.splitlines() if "PHASE" in line)
    assert header.split() == ["NAME", "PHASE", "NODE", "AGE", "CPU", "MEMORY"]
    rows = {
        line.split()[0]: line.split()
        for line in shown.splitlines()
        if line.split()[:1] in (["a"], ["b"])
    }
    assert rows["a"][-2:] == ["250m", "301Mi"]  # rounded up, as kubectl top does
    assert rows["b"][-2:] == ["-", "-"]
    unmeasured = WorkerView("worker1", copy, [pod("a", None)]).render(NOW)
    assert "CPU" not in unmeasured


def test_what_a_tenant_wrote_cannot_drive_the_viewers_terminal() -> None:
    """Before: a metric named with an OSC 52 sequence wrote the viewer's clipboard, and a
    value `ESC[2J` cleared the screen, when `progress` or `describe` printed them."""
    metric = "\x1b]52;c;ZXZpbA==\x07"
    value = "\x1b[2J\x1b[HComplete\r\x9b31m"
    shown = printable(f"loss {metric}={value}\nnext\tline")
    assert shown == "loss ^[]52;c;ZXZpbA==\\x07=^[[2J^[[HComplete\\r\\x9b31m\nnext\tline"
    assert not any(ord(ch) < 0x20 and ch not in "\n\t" for ch in shown)
