"""The TrainJob <-> Kueue integration on a real worker with real Kueue (external framework)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.kube import TrainJobs
from clusters.helpers.waiting import stays_false, wait_for
from tests.support.builders import make_trainjob, torch_runtime
from tests.support.worker import worker_controller_with

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("worker_controllers")]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
Dict = dict[str, Any]


class Queue:
    """A ResourceFlavor + ClusterQueue + LocalQueue `q` in the test namespace."""

    def __init__(
        self,
        tjs: TrainJobs,
        cpu: str,
        *,
        node_labels: dict[str, str] | None = None,
        preemption: Dict | None = None,
    ) -> None:
        self.custom, self.ns = tjs.custom, tjs.ns
        suffix = uuid.uuid4().hex[:6]
        self.flavor, self.cq = f"rf-{suffix}", f"cq-{suffix}"
        flavor: Dict = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": self.flavor},
            "spec": {},
        }
        if node_labels:
            flavor["spec"]["nodeLabels"] = node_labels
        self.custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
        spec: Dict = {"namespaceSelector": {}, "resourceGroups": [self._group(cpu)]}
        if preemption:
            spec["preemption"] = preemption
        self.custom.create_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": self.cq},
                "spec": spec,
            },
        )
        self.custom.create_namespaced_custom_object(
            *KUEUE,
            self.ns,
            "localqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "q", "namespace": self.ns},
                "spec": {"clusterQueue": self.cq},
            },
        )

    def _group(self, cpu: str) -> Dict:
        return {
            "coveredResources": ["cpu"],
            "flavors": [{"name": self.flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
        }

    def set_quota(self, cpu: str) -> None:
        self.custom.patch_cluster_custom_object(
            *KUEUE, "clusterqueues", self.cq, {"spec": {"resourceGroups": [self._group(cpu)]}}
        )

    def workloads(self) -> list[Dict]:
        items: list[Dict] = self.custom.list_namespaced_custom_object(*KUEUE, self.ns, "workloads")[
            "items"
        ]
        return items

    def workload_of(self, trainjob_uid: str) -> Dict | None:
        for wl in self.workloads():
            if any(r["uid"] == trainjob_uid for r in wl["metadata"].get("ownerReferences", [])):
                return wl
        return None


def wl_condition(wl: Dict | None, ctype: str) -> bool:
    return bool(wl) and any(
        c["type"] == ctype and c["status"] == "True"
        for c in (wl or {}).get("status", {}).get("conditions", [])
    )


def queued(
    name: str, *, cpu: str = "1", nodes: int = 1, priority: str | None = None, **spec: Any
) -> Dict:
    body = make_trainjob(
        name,
        runtimeRef={"name": "torch", "kind": "TrainingRuntime"},
        trainer={"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu}}},
        **spec,
    )
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    if priority:
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
    return body


def test_queued_trainjob_waits_for_quota_then_runs_and_finishes(tjs: TrainJobs) -> None:
    queue = Queue(tjs, cpu="0")
    tjs.create_runtime(torch_runtime(run="2s"))
    uid = tjs.create(queued("waiter", nodes=2))["metadata"]["uid"]
    wl = wait_for(lambda: queue.workload_of(uid), 30, what="the Workload")
    assert wl["spec"]["queueName"] == "q"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    wait_for(lambda: tjs.get("waiter")["spec"]["suspend"] is True, 30, what="suspended")
    assert not tjs.pods("waiter")

    queue.set_quota("4")
    tjs.wait_condition("waiter", "Complete", timeout=90)
    wait_for(
        lambda: wl_condition(queue.workload_of(uid), "Finished"),
        30,
        what="the Workload to be Finished",
    )


def test_two_trainjobs_over_quota_run_one_after_the_other(tjs: TrainJobs) -> None:
    Queue(tjs, cpu="1")
    tjs.create_runtime(torch_runtime(run="4s"))
    tjs.create(queued("first"))
    wait_for(lambda: tjs.pods("first", "Running"), 30, what="first running")
    tjs.create(queued("second"))
    wait_for(lambda: tjs.get("second")["spec"].get("suspend") is True, 30, what="second held")
    assert not tjs.pods("second")
    first_done = tjs.wait_condition("first", "Complete", timeout=60)
    tjs.wait_condition("second", "Complete", timeout=90)
    second_jobs = tjs.jobs("second")
    assert second_jobs[0].status.start_time.isoformat() >= first_done["lastTransitionTime"][:19]


def test_flavor_node_labels_reach_the_pods(
    tjs: TrainJobs, bed: Bed, worker_names: list[str]
) -> None:
    Queue(tjs, cpu="4", node_labels={"bed.trainjob.dev/pool": "node"})
    tjs.create_runtime(torch_runtime(run="30s"))
    tjs.create(queued("placed"))
    pods = wait_for(lambda: tjs.pods("placed", "Running"), 30, what="pod running")
    assert pods[0].spec.node_selector == {"bed.trainjob.dev/pool": "node"}
    patches = tjs.get("placed")["spec"]["runtimePatches"]
    assert [p["manager"] for p in patches] == ["kueue.x-k8s.io/manager"]


def test_deleted_workload_is_rebuilt(tjs: TrainJobs) -> None:
    queue = Queue(tjs, cpu="0")
    tjs.create_runtime(torch_runtime())
    uid = tjs.create(queued("again"))["metadata"]["uid"]
    first = wait_for(lambda: queue.workload_of(uid), 30, what="the Workload")
    tjs.custom.delete_namespaced_custom_object(
        *KUEUE, tjs.ns, "workloads", first["metadata"]["name"]
    )
    rebuilt = wait_for(
        lambda: (
            (wl := queue.workload_of(uid))
            and wl["metadata"]["uid"] != first["metadata"]["uid"]
            and wl
        ),
        30,
        what="a new Workload",
    )
    assert rebuilt["metadata"]["name"] == first["metadata"]["name"]


def test_prebuilt_workload_is_adopted_and_used(tjs: TrainJobs) -> None:
    queue = Queue(tjs, cpu="4")
    tjs.create_runtime(torch_runtime(run="2s"))
    tjs.custom.create_namespaced_custom_object(
        *KUEUE,
        tjs.ns,
        "workloads",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "prebuilt-wl", "namespace": tjs.ns},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "node",
                        "count": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "node",
                                        "image": "x",
                                        "resources": {"requests": {"cpu": "1"}},
                                    }
                                ],
                                "restartPolicy": "Never",
                            }
                        },
                    }
                ],
            },
        },
    )
    body = queued("adopter", suspend=True)
    body["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "prebuilt-wl"
    uid = tjs.create(body)["metadata"]["uid"]
    tjs.wait_condition("adopter", "Complete", timeout=90)

    def finished_prebuilt() -> Any:
        wl = tjs.custom.get_namespaced_custom_object(*KUEUE, tjs.ns, "workloads", "prebuilt-wl")
        return wl if wl_condition(wl, "Finished") else None

    # Finished follows Complete (the pass after the TrainJob's status write).
    wl = wait_for(finished_prebuilt, 30, what="the prebuilt Workload Finished")
    assert uid in [r["uid"] for r in wl["metadata"]["ownerReferences"]]
    assert len(queue.workloads()) == 1  # no second Workload was made


def test_higher_priority_preempts_lower_which_resumes_later(tjs: TrainJobs) -> None:
    for name, value in (("low", 10), ("high", 1000)):
        pc = f"{name}-{tjs.ns}"
        tjs.custom.create_cluster_custom_object(
            *KUEUE,
            "workloadpriorityclasses",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": pc},
                "value": value,
            },
        )
    Queue(tjs, cpu="1", preemption={"withinClusterQueue": "LowerPriority"})
    tjs.create_runtime(torch_runtime(run="12s"))
    tjs.create(queued("victim", priority=f"low-{tjs.ns}"))
    wait_for(lambda: tjs.pods("victim", "Running"), 30, what="victim running")
    tjs.create(queued("boss", priority=f"high-{tjs.ns}"))

    wait_for(
        lambda: tjs.get("victim")["spec"]["suspend"] is True,
        30,
        what="the low-priority TrainJob to be suspended",
    )
    wait_for(lambda: not tjs.pods("victim", "Running"), 60, what="victim's pods to go away")
    tjs.wait_condition("boss", "Complete", timeout=90)
    tjs.wait_condition("victim", "Complete", timeout=120)
    events = tjs.core.list_namespaced_event(
        tjs.ns, field_selector="involvedObject.name=victim"
    ).items
    assert any(e.reason == "Stopped" and "Preempted" in e.message for e in events), [
        (e.reason, e.message) for e in events
    ]


def test_webhook_suspends_queued_trainjob_on_create(tjs: TrainJobs) -> None:
    Queue(tjs, cpu="0")
    tjs.create_runtime(torch_runtime())
    body = queued("eager")
    body["spec"]["suspend"] = False
    created = tjs.create(body)
    assert created["spec"]["suspend"] is True  # set by the mutating webhook, before any pod


def test_queued_trainjob_resumed_by_hand_is_stopped_again(tjs: TrainJobs) -> None:
    Queue(tjs, cpu="0")
    tjs.create_runtime(torch_runtime())
    tjs.create(queued("sneaky"))
    tjs.patch("sneaky", {"spec": {"suspend": False}})
    wait_for(
        lambda: tjs.get("sneaky")["spec"]["suspend"] is True,
        30,
        what="the controller to suspend it again",
    )
    assert not tjs.jobs("sneaky") and not tjs.pods("sneaky")


def test_a_queue_that_does_not_exist_yet_is_accepted_and_waits_for_it(tjs: TrainJobs) -> None:
    """As with Kueue: the TrainJob is suspended and its Workload waits for the queue."""
    body = queued("lost")
    body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nope"
    made = tjs.create(body)
    assert made["spec"]["suspend"] is True
    stays_false(lambda: tjs.jobs("lost"), 5, what="Jobs of a TrainJob whose queue does not exist")


# ---- Kueue's waitForPodsReady (on by default; the bed's timeout is 20 s) ------------------------


def pods_ready(wl: Dict | None) -> tuple[str, str] | None:
    for cond in (wl or {}).get("status", {}).get("conditions") or []:
        if cond["type"] == "PodsReady":
            return cond["status"], cond["reason"]
    return None


def evictions(wl: Dict | None) -> list[str]:
    return [
        f"{c['reason']}: {c.get('message', '')}"
        for c in (wl or {}).get("status", {}).get("conditions") or []
        if c["type"] == "Evicted" and c["status"] == "True"
    ]


def test_workload_refused_by_kueue_is_an_event_naming_the_field_and_is_not_resent(
    tjs: TrainJobs,
) -> None:
    """Kueue's webhook refuses a Workload whose pods request the reserved `pods` resource
    (here from the runtime): the TrainJob gets one Warning Event in Kueue's words, and once
    the runtime is fixed the Workload is created and the TrainJob runs."""
    queue = Queue(tjs, cpu="4")
    runtime = torch_runtime(run="1s")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node_ctr = node["template"]["spec"]["template"]["spec"]["containers"][0]
    node_ctr["resources"]["requests"]["pods"] = "1"
    tjs.create_runtime(runtime)
    body = queued("podsreq")
    del body["spec"]["trainer"]["resourcesPerNode"]
    uid = tjs.create(body)["metadata"]["uid"]

    def refused() -> list[str]:
        return [m for r, m in tjs.events("podsreq") if r == "WorkloadRefused"]

    messages = wait_for(refused, 30, what="the WorkloadRefused Event")
    assert "resources.requests[pods]" in messages[0], messages
    assert "reserved for internal kueue use" in messages[0], messages
    assert queue.workload_of(uid) is None
    assert tjs.get("podsreq")["spec"]["suspend"] is True
    # Not sent again while nothing changed: the controller resyncs every 2 s in the bed.
    stays_false(lambda: len(refused()) > 1, 5, what="a second WorkloadRefused Event")

    del node_ctr["resources"]["requests"]["pods"]
    tjs.custom.patch_namespaced_custom_object(
        "trainer.kubeflow.org",
        "v1alpha1",
        tjs.ns,
        "trainingruntimes",
        "torch",
        {"spec": {"template": runtime["spec"]["template"]}},
    )
    tjs.wait_condition("podsreq", "Complete", timeout=60)
    assert len(refused()) == 1, refused()


def test_trainjob_running_longer_than_the_pods_ready_timeout_is_not_evicted(
    tjs: TrainJobs, bed: Bed
) -> None:
    timeout = bed.config.wait_for_pods_ready.timeout_seconds
    queue = Queue(tjs, cpu="4")
    tjs.create_runtime(torch_runtime(run=f"{timeout + 15}s"))
    uid = tjs.create(queued("marathon", nodes=2))["metadata"]["uid"]
    wait_for(
        lambda: pods_ready(queue.workload_of(uid)) == ("True", "Started"),
        30,
        what="PodsReady=True (Started) on the Workload",
    )
    wl = queue.workload_of(uid)
    assert wl is not None
    assert wl["status"].get("reclaimablePods") is None  # one PodSet, still running
    tjs.wait_condition("marathon", "Complete", timeout=timeout + 60)
    wl = wait_for(
        lambda: (w := queue.workload_of(uid)) and wl_condition(w, "Finished") and w,
        30,
        what="the Workload Finished",
    )
    assert evictions(wl) == [] and "requeueState" not in wl["status"], wl["status"]
    reasons = [
        e.reason
        for e in tjs.core.list_namespaced_event(
            tjs.ns, field_selector="involvedObject.name=marathon"
        ).items
    ]
    assert "Stopped" not in reasons, reasons


def test_pod_lost_after_the_job_was_ready_waits_for_recovery_then_recovers(
    tjs: TrainJobs,
) -> None:
    queue = Queue(tjs, cpu="4")
    # Each pod fails after 6 s; the Job replaces it once (Job backoff ~10 s, under the bed's
    # 20 s recovery timeout), the replacement is Ready, then fails too and the Job gives up.
    tjs.create_runtime(torch_runtime(run="6s", exit_code=3, backoff_limit=1))
    uid = tjs.create(queued("phoenix"))["metadata"]["uid"]
    seen: list[tuple[str, str]] = []
    wanted = [("True", "Started"), ("False", "WaitForRecovery"), ("True", "Recovered")]

    def recovered() -> bool:
        state = pods_ready(queue.workload_of(uid))
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        walk = iter(seen)
        return all(step in walk for step in wanted)  # in this order, gaps allowed

    wait_for(recovered, 90, what=f"PodsReady {wanted} in order", interval=0.1)
    assert seen[0] in (("False", "WaitForStart"), ("True", "Started")), seen
    failed = tjs.wait_condition("phoenix", "Failed", timeout=60)
    assert "BackoffLimitExceeded" in failed["message"], failed


def test_trainjob_that_never_schedules_is_evicted_by_pods_ready_timeout_and_requeued(
    tjs: TrainJobs, bed: Bed
) -> None:
    timeout = bed.config.wait_for_pods_ready.timeout_seconds
    queue = Queue(tjs, cpu="100")  # the quota fits; no node has 10 CPUs
    tjs.create_runtime(torch_runtime(run="5s"))
    uid = tjs.create(queued("unplaceable", cpu="10"))["metadata"]["uid"]
    wait_for(lambda: tjs.pods("unplaceable"), 30, what="its pod, Pending")
    assert pods_ready(queue.workload_of(uid)) == ("False", "WaitForStart")
    wl = wait_for(
        lambda: (w := queue.workload_of(uid)) and evictions(w) and w,
        timeout + 40,
        what="Kueue to evict the Workload",
    )
    assert evictions(wl)[0].startswith("PodsReadyTimeout: Exceeded the PodsReady timeout"), wl
    wait_for(
        lambda: tjs.get("unplaceable")["spec"]["suspend"] is True and not tjs.pods("unplaceable"),
        30,
        what="the TrainJob suspended and its pods gone",
    )
    # Requeued with Kueue's backoff, admitted again, and started again.
    wl = wait_for(
        lambda: (
            (w := queue.workload_of(uid))
            and (w["status"].get("requeueState") or {}).get("count", 0) >= 1
            and wl_condition(w, "Admitted")
            and w
        ),
        60,
        what="the Workload requeued and admitted again",
    )
    assert pods_ready(wl) == ("False", "WaitForStart"), wl["status"]["conditions"]
    wait_for(
        lambda: tjs.get("unplaceable")["spec"]["suspend"] is False,
        30,
        what="the TrainJob resumed for its second try",
    )
    reasons = {
        (e.reason, e.message.split(":")[0])
        for e in tjs.core.list_namespaced_event(
            tjs.ns, field_selector="involvedObject.name=unplaceable"
        ).items
    }
    assert ("Stopped", "PodsReadyTimeout") in reasons, reasons


def test_manage_jobs_without_queue_name_holds_an_unqueued_trainjob_suspended(
    tjs: TrainJobs, controllers: list[setup.Controller], worker_names: list[str]
) -> None:
    """Kueue's manageJobsWithoutQueueName: a TrainJob that names no queue waits suspended, and
    a Warning says why, instead of running outside Kueue's quota."""
    tjs.create_runtime(torch_runtime(run="2s"))
    with worker_controller_with(controllers, worker_names[0], "--manage-jobs-without-queue-name"):
        made = tjs.create(
            make_trainjob("loose", runtimeRef={"name": "torch", "kind": "TrainingRuntime"})
        )
        assert made["spec"]["suspend"] is True
        wait_for(
            lambda: any(r == "NoQueueName" for r, _ in tjs.events("loose")),
            30,
            what="the NoQueueName Warning",
        )
        stays_false(
            lambda: tjs.jobs("loose") and any(not j.spec.suspend for j in tjs.jobs("loose")),
            5,
            what="an unsuspended Job",
        )
        # Unsuspended by hand: suspended again, as Kueue stops a job it has not admitted.
        tjs.patch("loose", {"spec": {"suspend": False}})
        wait_for(lambda: tjs.get("loose")["spec"]["suspend"] is True, 30, what="it to be held")
