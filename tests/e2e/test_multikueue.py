"""MultiKueue end to end: manager + 2 workers of the bed, real Kueue everywhere, our dispatcher."""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters import audit, setup
from clusters.bed import Bed
from clusters.helpers.kube import active_condition, create_workload
from clusters.helpers.tenant import Tenant, story_path
from clusters.helpers.waiting import stays_false, wait_for
from clusters.install import scrape
from clusters.kube import Applier, load_manifests
from clusters.processes import http_ok
from tests.support.multikueue import (
    JOBSET_NAME,
    KUEUE,
    LEASE_FLAGS,
    LOST_TIMEOUT,
    MULTIKUEUE,
    TRAINER,
    MultiKueue,
    dispatched_to,
    dispatcher_down,
    dispatcher_with,
    dispatchers,
    events_of,
    leads,
    manager_events,
    pod_phases,
    pods_ready,
    the_leader,
    token_id,
    workloads_seen,
)

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]


def test_trainjob_runs_on_exactly_one_worker_and_completes_on_the_manager(bed: Bed) -> None:
    mk = MultiKueue(bed)
    created = mk.submit("one", nodes=3)
    assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert created["spec"]["suspend"] is True
    # Every runtimePatches entry carries its time, as Trainer's webhook stamps it on create.
    assert [p["manager"] for p in created["spec"]["runtimePatches"]] == ["tests.trainjob.dev/e2e"]
    assert all(p.get("time") for p in created["spec"]["runtimePatches"])
    mk.wait_until("one", "Complete")
    # ... and Kueue's placement patch, written at admission, carries its writer's time.
    patches = {p["manager"]: p for p in (mk.get("one") or {})["spec"]["runtimePatches"]}
    assert patches["kueue.x-k8s.io/manager"]["time"] >= patches["tests.trainjob.dev/e2e"]["time"]
    status = (mk.get("one") or {})["status"]
    winner = status["clusterName"]
    assert winner in mk.workers
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    # The pods' count by phase, from the worker controller's pod watch, synced back.
    assert pod_phases(mk.get("one")) == {"node": (0, 0, 3, 0)}
    others = [w for w in mk.workers if w != winner]
    assert all(mk.get("one", w) is None and not mk.remote_workloads(w) for w in others)
    wl = mk.custom().list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")["items"][0]
    assert any(
        c["type"] == "Finished" and c["status"] == "True" for c in wl["status"]["conditions"]
    )
    # Finished remote objects are cleaned up.
    wait_for(
        lambda: mk.get("one", winner) is None and not mk.remote_workloads(winner),
        60,
        what=f"remote objects on {winner} to be removed after completion",
    )


BUILTIN = "trainer.kubeflow.org/trainjob-controller"


def test_managed_by_edges_are_judged_as_trainers_crd_and_kueues_webhook_do(bed: Bed) -> None:
    mk = MultiKueue(bed)
    # The built-in value (Trainer's CRD default) on a MultiKueue queue is routed, as by Kueue.
    routed = mk.submit("builtin", managed_by="trainer.kubeflow.org/trainjob-controller")
    assert routed["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert "trainjob.dev/dispatcher-cleanup" in routed["metadata"]["finalizers"]
    mk.wait_until("builtin", "Complete")

    def refused(change: Dict, name: str = "builtin") -> str:
        with pytest.raises(client.ApiException) as exc:
            mk.custom().patch_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", name, change)
        assert exc.value.status == 422, exc.value
        return str(json.loads(exc.value.body)["message"])

    # Immutable: neither changed to another value, nor removed.
    other = {"spec": {"managedBy": "trainer.kubeflow.org/trainjob-controller"}}
    assert "spec.managedBy" in refused(other)
    assert "spec.managedBy" in refused({"spec": {"managedBy": None}})
    # Only the two values, when set: "" and anything else are refused at create.
    for bad in ("", "example.com/mine"):
        with pytest.raises(client.ApiException) as exc:
            mk.submit("bad", managed_by=bad)
        assert exc.value.status == 422 and "managedBy" in str(exc.value.body), exc.value.body
    # Not MultiKueue's (no queue), on a manager that runs no TrainJobs: said, never stranded
    # in silence, and never given our finalizer.
    for name, managed_by in (("unqueued", None), ("unqueued-builtin", BUILTIN)):
        body: Dict = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
        if managed_by:
            body["spec"]["managedBy"] = managed_by
        made = mk.custom().create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", body)
        assert "trainjob.dev/dispatcher-cleanup" not in (made["metadata"].get("finalizers") or [])
        failed = mk.wait_until(name, "Failed", timeout=30)
        assert failed["reason"] == "NotDispatched", failed
        assert "no queue" in failed["message"] and "spec.managedBy" in failed["message"]
        # the Event is posted once the status is written: it may come a moment after
        wait_for(lambda n=name: "NotDispatched" in events_of(mk, n), 10, what=f"{name}'s Event")
    # MultiKueue's by managedBy, but queued nowhere: said (NoQueueName), not left in silence.
    no_queue = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "mk-no-queue"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "managedBy": MULTIKUEUE},
    }
    mk.custom().create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", no_queue)
    said = mk.wait_until("mk-no-queue", "Failed", timeout=30)
    assert said["reason"] == "NoQueueName" and "queue-name" in said["message"], said
    # A queue that does not exist yet is accepted (manifests apply in any order, as with
    # Kueue), routed to MultiKueue (the only way a manager that runs none can run it), and
    # runs once the queue is made.
    made = mk.submit("queue-later", queue="later")
    assert made["spec"]["managedBy"] == MULTIKUEUE and made["spec"]["suspend"], made["spec"]
    cq = mk.custom().get_namespaced_custom_object(*KUEUE, mk.ns, "localqueues", "q")["spec"]

    def local_queue(name: str) -> None:
        """A LocalQueue on every cluster (the copies on the workers name it too)."""
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"}
        body |= {"metadata": {"name": name}, "spec": {"clusterQueue": cq["clusterQueue"]}}
        for cluster in [*mk.workers, mk.manager]:
            api = client.CustomObjectsApi(bed.api(cluster))
            api.create_namespaced_custom_object(*KUEUE, mk.ns, "localqueues", body)

    local_queue("later")
    mk.wait_until("queue-later", "Complete")
    # Kueue's default LocalQueue: a TrainJob without a queue label is queued to `default`.
    local_queue("default")
    unlabelled = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "by-default", "annotations": {"bed.trainjob.dev/run-duration": "2s"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }
    made = mk.custom().create_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", unlabelled)
    assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default", made["metadata"]
    assert made["spec"]["managedBy"] == MULTIKUEUE, made["spec"]
    mk.wait_until("by-default", "Complete")


def test_tas_requests_and_priority_reach_the_workload_and_follow_to_the_copies(bed: Bed) -> None:
    """Kueue's Topology Aware Scheduling request from the pods' annotations, and the priority
    from the WorkloadPriorityClass label, which the Workload and its copy on the worker follow
    when the label changes."""
    mk = MultiKueue(bed)
    for cluster in [mk.manager, *mk.workers]:
        for name, value in (("tj-low", 10), ("tj-high", 100)):
            wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
            wpc |= {"metadata": {"name": name}, "value": value}
            with contextlib.suppress(client.ApiException):  # kept from an earlier run
                mk.custom(cluster).create_cluster_custom_object(
                    *KUEUE, "workloadpriorityclasses", wpc
                )
    rack = {"kueue.x-k8s.io/podset-preferred-topology": "cloud.example.com/rack"}
    mk.submit("tas", pod_annotations=rack, run="1s")
    wl = wait_for(lambda: mk.manager_workload("tas"), 30, what="the Workload of tas")
    assert wl["spec"]["podSets"][0]["topologyRequest"] == {
        "preferred": "cloud.example.com/rack",
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 1,
    }
    labels = {"labels": {"kueue.x-k8s.io/priority-class": "tj-low"}}
    mk.submit("ranked", run="60s", metadata=labels)
    where = mk.started_on("ranked")
    wl = wait_for(lambda: mk.manager_workload("ranked"), 30, what="the Workload of ranked")
    assert wl["spec"]["priority"] == 10, wl["spec"]
    assert wl["spec"]["priorityClassRef"]["name"] == "tj-low"

    def copy_priority() -> int | None:
        copies = [
            w for w in mk.remote_workloads(where) if w["metadata"]["name"] == wl["metadata"]["name"]
        ]
        return copies[0]["spec"].get("priority") if copies else None

    assert copy_priority() == 10
    mk.custom().patch_namespaced_custom_object(
        *TRAINER,
        mk.ns,
        "trainjobs",
        "ranked",
        {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "tj-high"}}},
    )
    wait_for(
        lambda: (mk.manager_workload("ranked") or {}).get("spec", {}).get("priority") == 100,
        30,
        what="the manager Workload to take the new priority",
    )
    wait_for(lambda: copy_priority() == 100, 30, what="the copy on the worker to follow")
    assert "UpdatedWorkload" in events_of(mk, "ranked")
    _waits_for_its_missing_class(mk)


def _waits_for_its_missing_class(mk: MultiKueue) -> None:
    """A TrainJob whose label names a WorkloadPriorityClass that does not exist gets no
    Workload (Kueue makes none) and a Warning naming the class, not one at priority 0; once
    the class is made, its Workload is made with it."""
    name = f"tj-later-{mk.ns}"  # of this test's namespace: no earlier run's
    mk.submit("later", metadata={"labels": {"kueue.x-k8s.io/priority-class": name}})

    def warnings() -> list[Any]:
        return [
            e
            for e in manager_events(mk, "later")
            if e.reason == "ErrWorkloadCompose" and name in (e.message or "")
        ]

    wait_for(warnings, 30, what="a Warning naming the missing class")
    assert mk.manager_workload("later") is None
    try:
        for cluster in [mk.manager, *mk.workers]:
            wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
            wpc |= {"metadata": {"name": name}, "value": 50}
            mk.custom(cluster).create_cluster_custom_object(*KUEUE, "workloadpriorityclasses", wpc)
        # read again once the 30 s a missing class is kept have run
        wl = wait_for(lambda: mk.manager_workload("later"), 75, what="the Workload of later")
        assert wl["spec"]["priority"] == 50, wl["spec"]
        assert len(warnings()) == 1  # said once, over the passes while it waited
        mk.wait_until("later", "Complete")
    finally:
        for cluster in [mk.manager, *mk.workers]:
            with contextlib.suppress(client.ApiException):  # one not made: its error is above
                mk.custom(cluster).delete_cluster_custom_object(
                    *KUEUE, "workloadpriorityclasses", name
                )


def test_worker_without_quota_sends_the_trainjob_to_the_other(bed: Bed) -> None:
    workers = [w.name for w in bed.config.workers]
    mk = MultiKueue(bed, cpu_by_worker={workers[0]: "0"})
    mk.submit("elsewhere")
    mk.wait_until("elsewhere", "Complete")
    assert (mk.get("elsewhere") or {})["status"]["clusterName"] == workers[1]


def test_no_room_anywhere_waits_with_copies_everywhere_and_runs_once_freed(
    bed: Bed, tmp_path: Path
) -> None:
    mk = MultiKueue(bed, worker_cpu="1")
    with mk.filled(*mk.workers, cpu="1"):  # each worker busy with a TrainJob of its own
        mk.submit("patient")
        mk.wait_copies_everywhere()  # room nowhere: every worker gets a copy, as with AllAtOnce
        assert mk.condition("patient", "Complete") is None and mk.running_on("patient") == []
        # its story says where it waits and how busy each queue is there
        reader = Tenant(bed, mk.ns, "reader", "view", tmp_path)

        def waiting_everywhere() -> list[Dict] | None:
            code, story = reader.get(story_path(mk.ns, "patient"))
            assert code == 200, story
            queues = story["queues"]
            counted = all((q.get("pendingInClusterQueue") or 0) >= 1 for q in queues)
            return queues if len(queues) == len(mk.workers) and counted else None

        queues = wait_for(waiting_everywhere, 30, what="the queues it waits in, in its story")
        assert {q["worker"] for q in queues} == set(mk.workers), queues
        assert {(q["copy"], q["localQueue"]) for q in queues} == {("waiting", "q")}, queues
        assert all(q["admittedInClusterQueue"] == 1 for q in queues), queues  # the local one
        last = mk.workers[-1]
        mk.free(last)
        mk.wait_until("patient", "Complete")
    assert (mk.get("patient") or {})["status"]["clusterName"] == last


def test_delete_on_the_manager_removes_the_remote_objects(bed: Bed) -> None:
    mk = MultiKueue(bed)
    mk.submit("doomed", run="600s")
    where = wait_for(lambda: mk.running_on("doomed"), 60, what="the remote TrainJob")[0]
    pods = wait_for(lambda: mk.pods(where, "doomed"), 30, what="remote pods running")
    # The worker's pods say which manager sent them (Kueue's origin label, kueue#10083).
    origin = (mk.get("doomed", where) or {})["metadata"]["labels"][ORIGIN]
    assert all(p.metadata.labels.get(ORIGIN) == origin for p in pods), origin
    mk.custom().delete_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", "doomed")
    wait_for(
        lambda: (
            mk.get("doomed") is None
            and mk.get("doomed", where) is None
            and not mk.remote_workloads(where)
        ),
        60,
        what="manager and remote objects to be gone",
    )


ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def _users_own_trainjob(mk: MultiKueue, worker: str, name: str) -> Dict:
    """A suspended TrainJob a user made on `worker` itself (no copy of ours)."""
    theirs = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True},
    }
    made: Dict = mk.custom(worker).create_namespaced_custom_object(
        *TRAINER, mk.ns, "trainjobs", theirs
    )
    return made


def test_a_same_named_trainjob_made_on_a_worker_by_a_user_is_never_ours_to_delete(
    bed: Bed,
) -> None:
    first, second = bed.config.workers[0].name, bed.config.workers[1].name
    mk = MultiKueue(bed, cpu_by_worker={second: "0"})  # ours can only run on the first
    made = _users_own_trainjob(mk, second, "twin")
    mk.submit("twin", run="600s")
    wait_for(lambda: mk.pods(first, "twin"), 60, what=f"our twin running on {first}")
    mk.custom().delete_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", "twin")
    wait_for(
        lambda: mk.get("twin") is None and mk.get("twin", first) is None,
        60,
        what=f"the manager TrainJob and our copy on {first} to be gone",
    )
    # Deletion (and the garbage collector after it) went by origin and UID, not by name.
    kept = mk.get("twin", second)
    assert kept is not None and kept["metadata"]["uid"] == made["metadata"]["uid"]
    assert ORIGIN not in (kept["metadata"].get("labels") or {})


def test_a_same_named_trainjob_on_the_winning_worker_sends_ours_elsewhere_and_says_why(
    bed: Bed,
) -> None:
    """Before: the create answered 409 and counted as done, so the dispatch waited for ever
    with quota held on both sides. Now the name is noted as taken there: the check goes to
    Retry (the worker's quota is freed), that worker gets no copy while it is taken, and the
    check's message and an Event say why; the user's TrainJob is left as it is."""
    first, second = bed.config.workers[0].name, bed.config.workers[1].name
    mk = MultiKueue(bed, cpu_by_worker={second: "0"})  # only the first has room
    made = _users_own_trainjob(mk, first, "squat")
    mk.submit("squat", run="60s")
    taken = f"TrainJob {mk.ns}/squat exists there and is not a copy from this manager"

    def check_message() -> str:
        wl = mk.manager_workload("squat") or {}
        return " ".join(
            str(s.get("message", "")) for s in (wl.get("status") or {}).get("admissionChecks") or []
        )

    wait_for(
        lambda: f"not sent to {first}: {taken}" in check_message(),
        90,
        what=f"the check's message to say the name is taken on {first}",
    )
    assert "RemoteNameTaken" in events_of(mk, "squat")
    # The user's TrainJob is theirs still: the same object, its spec as they wrote it, no
    # origin of ours (the worker controller writes only its status, as for any local job).
    kept = mk.get("squat", first)
    assert kept is not None and kept["metadata"]["uid"] == made["metadata"]["uid"]
    assert kept["spec"] == made["spec"]
    assert ORIGIN not in (kept["metadata"].get("labels") or {})
    # Its quota there is not held: the copy on that worker goes (and none comes back while
    # the name stays taken).
    wait_for(lambda: mk.remote_workloads(first) == [], 30, what=f"no copy on {first}")


def test_failed_remote_trainjob_fails_on_the_manager_with_the_reason(bed: Bed) -> None:
    mk = MultiKueue(bed)
    mk.submit("broken", run="1s", exit_code=3, runtime=mk.fail_fast_runtime())
    failed = mk.wait_until("broken", "Failed")
    assert failed["reason"] == "FailedJobs"
    assert "(first failed job: " in failed["message"]
    # The worker's warning is on the manager TrainJob too, with the worker's name in front.
    worker = (mk.get("broken") or {})["status"]["clusterName"]

    def mirrored() -> list[Any]:
        items = (
            client.CoreV1Api(bed.api(mk.manager))
            .list_namespaced_event(mk.ns, field_selector="involvedObject.name=broken")
            .items
        )
        return [
            e
            for e in items
            if e.type == "Warning"
            and e.reason == "FailedJobs"
            and e.message.startswith(f"{worker}: ")
        ]

    [event] = wait_for(mirrored, 30, what="the worker's FailedJobs warning on the manager")
    assert "(first failed job: " in event.message


# A kubeconfig's credentials, by the fields client-go reads them from.
CREDENTIAL_FIELDS = ("token", "client-key-data", "client-certificate-data", "password")


def _credentials(kubeconfig: Dict) -> list[str]:
    return [
        str(user.get("user", {}).get(field))
        for user in kubeconfig.get("users") or []
        if isinstance(user, dict)
        for field in CREDENTIAL_FIELDS
        if user.get("user", {}).get(field)
    ]


def _pieces(secret: str, size: int = 12) -> list[str]:
    """Slices of a credential to look for: its start, its middle and its end."""
    middle = max(0, len(secret) // 2 - size // 2)
    return [secret[:size], secret[middle : middle + size], secret[-size:]]


def _no_ca(k: Dict) -> None:
    k["clusters"][0]["cluster"]["certificate-authority-data"] = "%%%"


@pytest.mark.parametrize(
    ("edit", "reason", "fragment"),
    [
        (
            lambda k: k["clusters"][0]["cluster"].update({"insecure-skip-tls-verify": True}),
            "InsecureKubeConfig",
            "insecure-skip-tls-verify",
        ),
        (
            lambda k: k.update({"current-context": "nowhere"}),
            "BadKubeConfig",
            "current-context 'nowhere' names no context",
        ),
        (_no_ca, "BadKubeConfig", "certificate-authority-data is not base64"),
        (
            lambda k: k.update({"clusters": ["plain-string"]}),
            "BadKubeConfig",
            "clusters[0] must be a mapping with a name",
        ),
        (None, "BadKubeConfig", "not found in kueue-system"),
    ],
)
def test_bad_kubeconfig_secret_is_reported_on_the_cluster(
    bed: Bed, edit: Any, reason: str, fragment: str
) -> None:
    mk_name = f"bad-{uuid.uuid4().hex[:4]}"
    manager = bed.config.managers[0].name
    core = client.CoreV1Api(bed.api(manager))
    # A good one to spoil: the kubeconfig the install made for the first worker.
    good = core.read_namespaced_secret(f"{bed.config.workers[0].name}-secret", "kueue-system")
    kubeconfig = yaml.safe_load(base64.b64decode(good.data["kubeconfig"]))
    custom = client.CustomObjectsApi(bed.api(manager))
    if edit is not None:
        edit(kubeconfig)
        core.create_namespaced_secret(
            "kueue-system",
            client.V1Secret(
                metadata=client.V1ObjectMeta(name=mk_name),
                data={"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()},
            ),
        )
    custom.create_cluster_custom_object(
        *KUEUE,
        "multikueueclusters",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": mk_name},
            "spec": {
                "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": mk_name}}
            },
        },
    )
    try:

        def active() -> Dict | None:
            obj = custom.get_cluster_custom_object(*KUEUE, "multikueueclusters", mk_name)
            return next(
                (
                    c
                    for c in (obj.get("status") or {}).get("conditions") or []
                    if c["type"] == "Active"
                ),
                None,
            )

        cond = wait_for(active, 30, what="the Active condition")
        assert cond["status"] == "False" and cond["reason"] == reason, cond
        assert fragment in cond["message"], cond["message"]
        # No credential of the kubeconfig, nor a piece of one, in what anyone reads of it.
        secrets = _credentials(kubeconfig)
        assert secrets, "the kubeconfig holds no credential to look for"
        for secret in secrets:
            # Its start (a JWT's is the header every RS256 token shares), a piece of its
            # middle and its end (a JWT's signature): none in what the condition says.
            for piece in _pieces(secret):
                assert piece not in cond["message"], cond["message"]
        # One broken cluster holds up no other: the bed's workers stay Active.
        for worker in bed.config.workers:
            obj = custom.get_cluster_custom_object(*KUEUE, "multikueueclusters", worker.name)
            conds = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
            assert conds["Active"] == "True", (worker.name, obj["status"])
    finally:
        custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", mk_name)
        with contextlib.suppress(client.ApiException):
            core.delete_namespaced_secret(mk_name, "kueue-system")


def test_kubeconfig_files_under_the_path_prefix_connect_and_other_sources_are_named(
    bed: Bed, controllers: list[setup.Controller], tmp_path: Path
) -> None:
    manager = bed.config.managers[0].name
    core = client.CoreV1Api(bed.api(manager))
    good = core.read_namespaced_secret(f"{bed.config.workers[0].name}-secret", "kueue-system")
    prefix = tmp_path / "kubeconfigs"
    prefix.mkdir()
    (prefix / "w1.yaml").write_bytes(base64.b64decode(good.data["kubeconfig"]))
    (tmp_path / "outside.yaml").write_bytes(base64.b64decode(good.data["kubeconfig"]))
    (prefix / "escape.yaml").symlink_to(tmp_path / "outside.yaml")
    sources = {
        "path-good": {"kubeConfig": {"locationType": "Path", "location": str(prefix / "w1.yaml")}},
        "path-outside": {
            "kubeConfig": {"locationType": "Path", "location": str(tmp_path / "outside.yaml")}
        },
        "path-symlink": {
            "kubeConfig": {"locationType": "Path", "location": str(prefix / "escape.yaml")}
        },
        "path-relative": {"kubeConfig": {"locationType": "Path", "location": "w1.yaml"}},
        "profile": {"clusterProfileRef": {"name": "somewhere"}},
    }
    custom = client.CustomObjectsApi(bed.api(manager))
    flags = ("--kubeconfig-path-prefix", str(prefix), "--kubeconfig-path-validation")
    with dispatcher_with(controllers, *flags):
        conds = active_conditions(custom, sources)
    assert (conds["path-good"]["status"], conds["path-good"]["reason"]) == ("True", "Active")
    for name, fragment in (
        ("path-outside", "is not under"),
        ("path-symlink", "is not under"),
        ("path-relative", "must be absolute"),
    ):
        cond = conds[name]
        assert (cond["status"], cond["reason"]) == ("False", "BadKubeConfig"), cond
        assert "spec.clusterSource.kubeConfig.location" in cond["message"], cond
        assert fragment in cond["message"], cond
    profile = conds["profile"]
    assert (profile["status"], profile["reason"]) == (
        "False",
        "MultiKueueClusterProfileFeatureDisabled",
    )
    assert "--cluster-profiles" in profile["message"]  # how to turn the gate on


def active_conditions(custom: client.CustomObjectsApi, sources: dict[str, Dict]) -> Dict:
    """Make a MultiKueueCluster per source, and return each one's Active condition."""
    for name, source in sources.items():
        custom.create_cluster_custom_object(
            *KUEUE,
            "multikueueclusters",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": source},
            },
        )
    try:
        return {
            name: wait_for(lambda n=name: active_condition(custom, n), 30, what=f"{name} Active")
            for name in sources
        }
    finally:
        for name in sources:
            custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", name)


def test_without_path_validation_any_kubeconfig_file_connects_with_kueues_warning(
    bed: Bed, tmp_path: Path
) -> None:
    """Kueue 0.19's default (its MultiKueueKubeConfigPathValidation gate is alpha, off): a
    file anywhere is read, and the cluster gets a DeprecatedPathUsage Warning Event."""
    manager = bed.config.managers[0].name
    core = client.CoreV1Api(bed.api(manager))
    good = core.read_namespaced_secret(f"{bed.config.workers[0].name}-secret", "kueue-system")
    (tmp_path / "anywhere.yaml").write_bytes(base64.b64decode(good.data["kubeconfig"]))
    custom = client.CustomObjectsApi(bed.api(manager))
    source = {"kubeConfig": {"locationType": "Path", "location": str(tmp_path / "anywhere.yaml")}}
    cond = active_conditions(custom, {"path-anywhere": source})["path-anywhere"]
    assert (cond["status"], cond["reason"]) == ("True", "Active"), cond
    warned = wait_for(
        lambda: [
            e
            for e in core.list_namespaced_event(
                "default", field_selector="involvedObject.name=path-anywhere"
            ).items
            if e.reason == "DeprecatedPathUsage" and e.type == "Warning"
        ],
        30,
        what="the DeprecatedPathUsage Warning",
    )
    assert "--kubeconfig-path-validation" in warned[0].message


def test_trainjob_requesting_nothing_never_sits_silently_on_the_manager(bed: Bed) -> None:
    """Kueue lists our check on a pending Workload, then drops it once the Workload is
    admitted with no flavour (it requests nothing). Depending on who is first, the TrainJob
    was dispatched before that (then it runs on one worker and completes) or not (then it
    fails NotDispatchable, saying why, and its quota goes back). Never neither."""
    mk = MultiKueue(bed)
    mk.submit("weightless", cpu=None)  # the example runtime requests nothing either
    outcome = wait_for(
        lambda: mk.condition("weightless", "Failed") or mk.condition("weightless", "Complete"),
        60,
        what="weightless Complete, or Failed saying why",
    )
    # Which way this run went (a run that always goes one way never tries the other).
    print(f"[figure] a TrainJob requesting nothing ended {outcome['type']}")
    if outcome["type"] == "Complete":
        assert (mk.get("weightless") or {})["status"]["clusterName"] in mk.workers
        assert "NotDispatchable" not in events_of(mk, "weightless")
        return
    assert outcome["reason"] == "NotDispatchable", outcome
    assert "without the MultiKueue admission check" in outcome["message"]
    assert "spec.trainer.resourcesPerNode" in outcome["message"]
    assert (mk.get("weightless") or {})["spec"]["suspend"] is True  # never started here
    wait_for(
        lambda: all(
            any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in wl["status"]["conditions"]
            )
            for wl in mk.custom().list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")["items"]
        ),
        30,
        what="the manager Workload Finished (its quota released)",
    )
    assert mk.running_on("weightless") == []
    assert "NotDispatchable" in events_of(mk, "weightless")


def test_namespace_missing_on_the_workers_is_said_in_the_check_until_it_exists(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed, on_workers=False)
    mk.submit("homeless")

    def check_message() -> str:
        items = mk.custom().list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")["items"]
        states = [s for wl in items for s in (wl.get("status") or {}).get("admissionChecks") or []]
        return " ".join(str(s.get("message", "")) for s in states)

    message = wait_for(
        lambda: (
            all(f"{w}: namespace {mk.ns!r} not found" in check_message() for w in mk.workers)
            and check_message()
        ),
        60,
        what="the check's message to name the missing namespace on every worker",
    )
    assert message.startswith("dispatched to "), message
    setup.install(bed, mk.ns)  # now the workers have the namespace and the queue
    mk.wait_until("homeless", "Complete", timeout=90)


def test_missing_runtime_is_said_on_the_manager_and_clears_once_it_exists(bed: Bed) -> None:
    mk = MultiKueue(bed)
    runtime_name = f"late-{mk.ns}"
    mk.submit("early-bird", runtime=runtime_name)
    failed = wait_for(
        lambda: mk.condition("early-bird", "Failed"), 30, what="Failed on the manager TrainJob"
    )
    assert failed["reason"] == "RuntimeNotFound", failed
    assert f"ClusterTrainingRuntime {runtime_name!r} not found" in failed["message"]
    wait_for(lambda: "RuntimeNotFound" in events_of(mk, "early-bird"), 30, what="a Warning Event")
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    (runtime,) = load_manifests(example.read_text())
    runtime["metadata"]["name"] = runtime_name
    try:
        for cluster in [mk.manager, *mk.workers]:
            Applier(bed.api(cluster)).apply_all([runtime])
        mk.wait_until("early-bird", "Complete", timeout=90)
        assert "RuntimeResolved" in events_of(mk, "early-bird")
    finally:
        for cluster in [mk.manager, *mk.workers]:
            mk.custom(cluster).delete_cluster_custom_object(
                *TRAINER, "clustertrainingruntimes", runtime_name
            )


def test_dispatcher_restart_mid_dispatch_runs_the_trainjob_once(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed, worker_cpu="1")
    ran_on: set[str] = set()

    def watch_pods() -> None:  # remember every worker that ever ran a pod of it
        for worker in mk.workers:
            if (
                client.CoreV1Api(bed.api(worker))
                .list_namespaced_pod(mk.ns, label_selector=f"{JOBSET_NAME}=survivor")
                .items
            ):
                ran_on.add(worker)

    with mk.filled(*mk.workers, cpu="1"):  # no room anywhere: a copy on every worker
        # Its pods run long enough to be seen however late the restarted dispatcher picks
        # (3 s ran and went, copy and all, before the first look on a loaded machine).
        mk.submit("survivor", run="15s")
        mk.wait_copies_everywhere()
        with dispatcher_down(controllers):
            # While the dispatcher is down, every worker gets room and admits its copy.
            for worker in mk.workers:
                mk.set_quota(worker, "8")

            def admitted_on() -> set[str]:
                watch_pods()  # and no pod may start while nobody has decided
                return {
                    w
                    for w in mk.workers
                    for wl in mk.remote_workloads(w)
                    for c in wl.get("status", {}).get("conditions", [])
                    if c["type"] == "Admitted" and c["status"] == "True"
                }

            # The race this test is for: every worker admits its copy while nobody decides,
            # and the dispatcher, back, must pick one winner among them.
            wait_for(
                lambda: admitted_on() == set(mk.workers),
                90,
                what="every worker's copy admitted while the dispatcher is down",
            )
            assert ran_on == set(), "a copy ran before the dispatcher chose its worker"

    def complete_while_watching() -> Dict | None:
        watch_pods()
        return mk.condition("survivor", "Complete")

    wait_for(complete_while_watching, 90, what="survivor Complete on the manager", interval=0.1)
    winner = (mk.get("survivor") or {})["status"]["clusterName"]
    assert ran_on == {winner}


def watch_until_complete(mk: MultiKueue, names: list[str], timeout: float) -> dict[str, set[str]]:
    """Wait until every TrainJob is Complete on the manager; meanwhile note every worker that
    ever ran a pod of each (a TrainJob run twice shows up as two workers)."""
    ran_on: dict[str, set[str]] = {n: set() for n in names}

    def all_complete() -> bool:
        for worker in mk.workers:
            pods = client.CoreV1Api(mk.bed.api(worker)).list_namespaced_pod(mk.ns).items
            for pod in pods:
                owner = (pod.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name")
                if owner in ran_on:
                    ran_on[owner].add(worker)
        return all(mk.condition(n, "Complete") for n in names)

    wait_for(all_complete, timeout, what=f"{names} Complete on the manager", interval=0.2)
    return ran_on


def test_dispatcher_restarted_with_trainjobs_running_dispatches_none_again(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    names = ["steady-0", "steady-1", "steady-2"]
    for name in names:
        mk.submit(name, run="30s")
    started = {name: mk.started_on(name) for name in names}
    with dispatcher_down(controllers):  # SIGTERM to every replica, no outage anywhere
        pass
    ran_on = watch_until_complete(mk, names, 90)
    for name in names:
        assert ran_on[name] == {started[name]}, (name, ran_on[name])
        assert dispatched_to(mk, name) == [started[name]], (name, dispatched_to(mk, name))
        assert "ClusterLost" not in events_of(mk, name), (name, events_of(mk, name))


def writes_of(ctrl: setup.Controller) -> float:
    """API writes (any verb but GET) the controller's clients sent."""
    return sum(
        value
        for (name, labels), value in scrape(ctrl).items()
        if name == "trainjob_api_requests_total" and dict(labels)["verb"] != "GET"
    )


# Events with which the manager sends a TrainJob back to be dispatched again (as the chaos
# soak counts them).
SENT_BACK = {"ClusterLost", "RemoteWorkloadGone", "RemoteEvicted"}


NOT_WRITES = ("leases", "tokenreviews", "subjectaccessreviews")


def audited_writes(
    bed: Bed, cluster: str, credential: str, since: dt.datetime | None = None
) -> int:
    """Writes the API server of `cluster` recorded for one token (the bed audits the
    product's identities) received after `since`: the server's own count, not the client's.
    Writes to Leases do not count: campaigning for the leader Lease is a standby's job; nor do
    token and access reviews, which store nothing (a standby asks them of each /metrics caller)."""
    return sum(
        r.writes and r.resource not in NOT_WRITES and credential in r.credentials
        for r in audit.requests(bed.cluster_dir(cluster), since)
    )


@pytest.mark.disruptive  # the webhook is down while its replica is
def test_standby_takes_over_when_the_leader_is_killed_and_dispatches_nothing_twice(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """deploy/manager's 2 dispatcher replicas on one Lease: the standby writes nothing but its
    Lease (counted by the API server's audit log, per token); after `kill -9` of the leader
    mid-burst the standby leads within the lease duration and a retry period, and every
    TrainJob completes on exactly one worker. The Lease is shorter here (8 s) than deploy's
    default (15 s), so that the takeover fits well inside the bed's 20 s PodsReady timeout."""
    with dispatcher_with(controllers, *LEASE_FLAGS):
        mk = MultiKueue(bed)
        leader = the_leader(controllers)
        (standby,) = [c for c in dispatchers(controllers) if c is not leader]
        # A restarted standby reports ready once its caches are synced: wait, don't race it.
        wait_for(
            lambda: http_ok(f"http://127.0.0.1:{standby.health}/readyz"),
            30,
            what="the standby to report ready",
        )
        # Earlier tests restart both replicas, so this one may have led before: count from now.
        standing_by = dt.datetime.now(dt.UTC)
        names = [f"burst-{i}" for i in range(12)]
        for name in names:
            mk.submit(name, run="6s")
        wait_for(
            lambda: sum(bool(mk.running_on(n)) for n in names) >= 3,
            60,
            what="the burst under way on the workers",
        )
        assert not leads(standby)
        standby_token = token_id(standby)
        assert audited_writes(bed, mk.manager, standby_token, standing_by) == 0
        assert audited_writes(bed, mk.manager, token_id(leader), standing_by) > 0
        leader.proc.kill()  # kill -9: the Lease stays held until it expires
        killed = time.monotonic()
        try:
            wait_for(lambda: leads(standby), 30, what="the standby to take the Lease", interval=0.1)
            took_over = time.monotonic() - killed
            ran_on = watch_until_complete(mk, names, 180)
        finally:
            leader.proc.wait()
            leader.start()  # a container restart: it stands by now
        # A job admitted just before the kill may pass the bed's 20 s PodsReady timeout on the
        # manager while no replica leads (the takeover takes 8-10 s here): Kueue then evicts it
        # and it runs again where Kueue sends it. Such a second run must be explained by that
        # eviction (or another Event that sends a job back); any other is a job run twice.
        for name in names:
            if len(ran_on[name]) > 1:
                reasons = events_of(mk, name)
                assert {"Stopped", *SENT_BACK} & set(reasons), (name, ran_on[name], reasons)
        moved = [n for n in names if len(ran_on[n]) > 1]
        assert len(moved) <= 2, moved  # one or two at most: the jobs admitted around the kill
        # a figure; the bound is the wait's 30 s, twice the Lease's 15 s
        print(f"standby led {took_over:.1f}s after the leader was killed; moved by Kueue: {moved}")
        assert writes_of(standby) > 0
        assert audited_writes(bed, mk.manager, standby_token, standing_by) > 0  # it sees writes
        assert not leads(leader)


def test_an_external_dispatcher_nominates_and_copies_go_there_only(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    first, second = mk.workers
    with dispatcher_with(controllers, "--strategy", "External"):
        mk.submit("chosen")
        wl = wait_for(lambda: mk.manager_workload("chosen"), 30, what="the manager Workload")
        name = wl["metadata"]["name"]

        def check_message() -> str:
            states = ((mk.manager_workload("chosen") or {}).get("status") or {}).get(
                "admissionChecks"
            ) or []
            return " ".join(str(s.get("message", "")) for s in states)

        wait_for(lambda: "external dispatcher" in check_message(), 30, what="the Pending note")
        stays_false(
            lambda: mk.remote_workloads(first) or mk.remote_workloads(second),
            5,
            what="a copy made before any nomination",
        )
        # The external dispatcher (this test) picks the second worker.
        mk.custom().patch_namespaced_custom_object_status(
            *KUEUE, mk.ns, "workloads", name, {"status": {"nominatedClusterNames": [second]}}
        )
        mk.wait_until("chosen", "Complete", timeout=90)
        assert (mk.get("chosen") or {})["status"]["clusterName"] == second
        assert mk.remote_workloads(first) == [], "never a copy on a cluster not nominated"


def test_incremental_strategy_tries_clusters_in_order_and_widens(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    first, second = bed.config.workers[0].name, bed.config.workers[1].name
    mk = MultiKueue(bed, cpu_by_worker={first: "0"})  # the first in config order cannot run it
    # Kueue's Incremental as it is: the first cluster gets a copy though it has no room.
    flags = ("--strategy", "Incremental", "--incremental-batch", "1", "--capacity-aware", "false")
    with dispatcher_with(controllers, *flags, "--incremental-round-seconds", "15"):
        mk.submit("stepper")
        wait_for(lambda: mk.remote_workloads(first), 30, what=f"a copy on {first}")
        assert mk.remote_workloads(second) == [], "the first round holds one cluster only"
        wait_for(lambda: mk.remote_workloads(second), 40, what=f"a copy on {second}, next round")
        mk.wait_until("stepper", "Complete", timeout=90)
    assert (mk.get("stepper") or {})["status"]["clusterName"] == second


def test_a_trainjob_created_while_the_dispatcher_is_down_is_refused_not_stranded(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    with dispatcher_down(controllers):
        # Accepted without managedBy (immutable), it would sit on the manager for good.
        with pytest.raises(client.ApiException) as refused:
            mk.submit("early")
        assert "dispatcher.trainjob.dev" in str(refused.value.body)
    mk.submit("early")
    mk.wait_until("early", "Complete", timeout=90)


def test_a_copy_whose_worker_runtime_differs_is_out_of_sync_and_sent_again(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Kueue's OutOfSync path: with the runtime check off (`--check-runtimes false`), as a
    runtime changed on a worker after the copy went there would be."""
    mk = MultiKueue(bed)
    first, second = mk.workers
    mk.set_quota(second, "0")  # the first worker admits it first
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    runtime = load_manifests(example.read_text())[0]
    runtime["metadata"]["name"] = f"drift-{mk.ns}"
    for cluster in [mk.manager, second]:
        Applier(bed.api(cluster)).apply(runtime)
    # On the first worker the same runtime has one replicatedJob more: the copy's TrainJob
    # there would not run what its Workload (the manager's) was admitted for.
    drifted = copy.deepcopy(runtime)
    extra = copy.deepcopy(drifted["spec"]["template"]["spec"]["replicatedJobs"][0])
    extra["name"] = "extra"
    extra["template"]["metadata"]["labels"] = {}
    drifted["spec"]["template"]["spec"]["replicatedJobs"].append(extra)
    Applier(bed.api(first)).apply(drifted)
    try:
        with dispatcher_with(controllers, "--check-runtimes", "false"):
            _out_of_sync_and_sent_again(mk, runtime["metadata"]["name"], first, second)
    finally:
        for cluster, obj in ((mk.manager, runtime), (second, runtime), (first, drifted)):
            with contextlib.suppress(client.ApiException):
                client.CustomObjectsApi(bed.api(cluster)).delete_cluster_custom_object(
                    *TRAINER, "clustertrainingruntimes", obj["metadata"]["name"]
                )


def _out_of_sync_and_sent_again(mk: MultiKueue, runtime: str, first: str, second: str) -> None:
    # The copy is finished as out of sync and deleted within a fraction of a second, and sent
    # to the same worker again until the second has room: only a watch sees each such state.
    with workloads_seen(mk, first) as seen:
        mk.submit("drift", run="3s", runtime=runtime)

        def remote_out_of_sync() -> bool:
            return any(
                c["type"] == "Finished" and c["reason"] == "OutOfSync"
                for wl in list(seen)
                for c in (wl.get("status") or {}).get("conditions") or []
            )

        wait_for(remote_out_of_sync, 60, what=f"the copy on {first} Finished=OutOfSync")
    wait_for(lambda: "RemoteOutOfSync" in events_of(mk, "drift"), 60, what="RemoteOutOfSync")
    assert not mk.pods(first, "drift"), "no pod runs on an out-of-sync copy"
    mk.set_quota(second, "8")  # now the second can run it as the manager describes it
    mk.wait_until("drift", "Complete", timeout=120)
    assert (mk.get("drift") or {})["status"]["clusterName"] == second


def test_trainjob_longer_than_the_pods_ready_timeout_is_ready_on_both_sides_never_evicted(
    bed: Bed,
) -> None:
    timeout = bed.config.wait_for_pods_ready.timeout_seconds
    mk = MultiKueue(bed)
    mk.submit("long", nodes=2, run=f"{timeout + 15}s")
    worker = mk.started_on("long")
    started = ("True", "Started")
    wait_for(
        lambda: pods_ready(mk.remote_workloads(worker)) == started,
        30,
        what=f"PodsReady=True on the Workload on {worker}",
    )

    def manager_wls() -> list[Dict]:
        items: list[Dict] = mk.custom().list_namespaced_custom_object(*KUEUE, mk.ns, "workloads")[
            "items"
        ]
        return items

    wait_for(
        lambda: pods_ready(manager_wls()) == started,
        30,
        what="PodsReady=True on the manager Workload (from the status synced back)",
    )
    for cluster in (worker, None):  # the copy's own count, then the manager's, synced back
        wait_for(
            lambda: pod_phases(mk.get("long", cluster)) == {"node": (0, 2, 0, 0)},  # noqa: B023
            30,
            what=f"two pods Running in podsStatus on {cluster or 'the manager'}",
        )
    mk.wait_until("long", "Complete", timeout=timeout + 60)
    (wl,) = manager_wls()
    assert not any(
        c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"]
    ), wl["status"]["conditions"]
    assert "requeueState" not in wl["status"]
    reasons = events_of(mk, "long")
    assert dispatched_to(mk, "long") == [worker], reasons
    assert not {"RemoteEvicted", "ClusterLost", "RemoteWorkloadGone"} & set(reasons), reasons
    others = [w for w in mk.workers if w != worker]
    assert all(not mk.pods(w, "long", phase="Succeeded") for w in others)


def runs_of(bed: Bed, mk: MultiKueue, name: str, tmp_path: Path) -> list[Dict]:
    """The TrainJob's runs as its story tells them to a tenant with `view`."""
    reader = Tenant(bed, mk.ns, f"reader-{uuid.uuid4().hex[:4]}", "view", tmp_path)
    code, story = reader.get(story_path(mk.ns, name))
    assert code == 200, story
    return list(story["placements"])


def test_remote_eviction_sends_the_trainjob_back_to_be_dispatched_again(
    bed: Bed, tmp_path: Path
) -> None:
    mk = MultiKueue(bed)
    mk.submit("evictee", run="8s")
    first = mk.started_on("evictee")
    # The worker's Kueue evicts it: an operator there deactivates its Workload.
    (remote_wl,) = mk.remote_workloads(first)
    mk.custom(first).patch_namespaced_custom_object(
        *KUEUE, mk.ns, "workloads", remote_wl["metadata"]["name"], {"spec": {"active": False}}
    )
    wait_for(
        lambda: "RemoteEvicted" in events_of(mk, "evictee"),
        60,
        what="the check turned Retry (RemoteEvicted Event) on the manager",
    )
    mk.wait_until("evictee", "Complete", timeout=120)
    assert len(dispatched_to(mk, "evictee")) >= 2, events_of(mk, "evictee")
    # its story keeps where it ran first and why that run ended, then where it completed
    runs = runs_of(bed, mk, "evictee", tmp_path)
    assert [(r["worker"], r["reason"]) for r in runs[:1]] == [(first, "RemoteEvicted")], runs
    assert runs[0]["started"] and runs[0]["ended"] and not runs[0].get("current"), runs
    assert runs[-1]["current"] and runs[-1]["reason"] == "Complete", runs
    assert len(runs) == 2, runs
    # Afterwards nothing of it is left anywhere (retention 0), deactivated copy included.
    wait_for(
        lambda: (
            not mk.running_on("evictee") and not any(mk.remote_workloads(w) for w in mk.workers)
        ),
        60,
        what="the remote objects to be removed",
    )


def test_deactivated_on_the_manager_its_copies_go_and_it_runs_again_once_reactivated(
    bed: Bed, tmp_path: Path
) -> None:
    """Kueue's way to stop a job is its Workload's spec.active=false: the manager's Kueue
    evicts it, the TrainJob is suspended, and nothing of it may stay on a worker."""
    mk = MultiKueue(bed)
    mk.submit("paused", run="10s")
    first = mk.started_on("paused")
    wl = mk.manager_workload("paused")
    assert wl is not None
    mk.custom().patch_namespaced_custom_object(
        *KUEUE, mk.ns, "workloads", wl["metadata"]["name"], {"spec": {"active": False}}
    )
    wait_for(
        lambda: not mk.running_on("paused") and not mk.remote_workloads(first),
        60,
        what="the copies removed from the worker",
    )
    assert (mk.get("paused") or {})["spec"]["suspend"] is True
    wait_for(lambda: "RemoteRemoved" in events_of(mk, "paused"), 30, what="RemoteRemoved Event")
    assert mk.condition("paused", "Complete") is None
    mk.custom().patch_namespaced_custom_object(
        *KUEUE, mk.ns, "workloads", wl["metadata"]["name"], {"spec": {"active": True}}
    )
    mk.wait_until("paused", "Complete", timeout=120)
    assert len(dispatched_to(mk, "paused")) >= 2, events_of(mk, "paused")
    runs = runs_of(bed, mk, "paused", tmp_path)
    assert len(runs) == 2 and runs[0]["worker"] == first, json.dumps(runs, indent=1)
    assert "evicted on the manager" in runs[0]["message"], runs
    assert runs[1]["current"] and runs[1]["reason"] == "Complete", runs


def test_a_worker_taken_out_of_the_config_finishes_what_it_runs_and_gets_nothing_new(
    bed: Bed,
) -> None:
    """An operator takes a worker out of the MultiKueueConfig (to drain it): the TrainJob that
    runs there runs on to its end there, once, and the next one goes elsewhere."""
    mk = MultiKueue(bed)
    mk.submit("draining", run="15s")
    where = mk.started_on("draining")
    config = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueconfigs", "multikueue")
    workers = list(config["spec"]["clusters"])
    try:
        mk.custom().patch_cluster_custom_object(
            *KUEUE,
            "multikueueconfigs",
            "multikueue",
            {"spec": {"clusters": [w for w in workers if w != where]}},
        )
        mk.submit("after", run="1s")
        mk.wait_until("draining", "Complete", timeout=120)
        assert dispatched_to(mk, "draining") == [where], events_of(mk, "draining")
        others = [w for w in mk.workers if w != where]
        assert all(not mk.pods(w, "draining", phase="Running") for w in others)
        assert all(not mk.pods(w, "draining", phase="Succeeded") for w in others)
        mk.wait_until("after", "Complete", timeout=120)
        assert where not in dispatched_to(mk, "after"), events_of(mk, "after")
    finally:
        mk.custom().patch_cluster_custom_object(
            *KUEUE, "multikueueconfigs", "multikueue", {"spec": {"clusters": workers}}
        )


def test_a_user_suspending_an_admitted_trainjob_is_undone_as_kueue_does(bed: Bed) -> None:
    """Kueue owns spec.suspend of a job it admitted: suspending it by hand is undone (Kueue's
    job framework starts an admitted, suspended job), and its run goes on where it was."""
    mk = MultiKueue(bed)
    mk.submit("stubborn", run="15s")
    worker = mk.started_on("stubborn")
    mk.custom().patch_namespaced_custom_object(
        *TRAINER, mk.ns, "trainjobs", "stubborn", {"spec": {"suspend": True}}
    )
    wait_for(
        lambda: (mk.get("stubborn") or {})["spec"].get("suspend") is False,
        30,
        what="spec.suspend set back to false",
    )
    mk.wait_until("stubborn", "Complete", timeout=90)
    # Started again after the user's suspend was undone, always on the same worker.
    assert set(dispatched_to(mk, "stubborn")) == {worker}, dispatched_to(mk, "stubborn")
    assert (mk.get("stubborn") or {})["status"].get("clusterName") == worker


def test_orphans_on_workers_are_garbage_collected_and_nothing_else(bed: Bed) -> None:
    mk = MultiKueue(bed)
    worker = mk.workers[0]
    origin = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    spec = {"runtimeRef": {"name": "torch-distributed"}, "suspend": True}
    custom = mk.custom(worker)
    for name, labels in (("ghost", origin), ("bystander", {})):
        custom.create_namespaced_custom_object(
            *TRAINER,
            mk.ns,
            "trainjobs",
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            },
        )
    create_workload(custom, mk.ns, "trainjob-ghost-00000", origin)
    # The sweep runs every --gc-interval (10 s in the tests).
    wait_for(
        lambda: mk.get("ghost", worker) is None and not mk.remote_workloads(worker),
        60,
        what="the orphan TrainJob and Workload to be collected",
    )
    assert mk.get("bystander", worker) is not None, "objects without our origin are not ours"


@pytest.mark.disruptive
def test_delete_while_the_worker_is_down_is_not_held_up_and_the_copy_is_swept_later(
    bed: Bed,
) -> None:
    """As with Kueue: deleting on the manager never waits for a worker that is down; the
    copy there is an orphan, which the garbage collector removes once the worker is back,
    even when a new TrainJob of the same name was made meanwhile (the copy names its UID)."""
    mk = MultiKueue(bed)
    mk.submit("orphan", run="600s")
    where = mk.started_on("orphan")
    bed.stop_component(where, "kube-apiserver")
    try:
        mk.custom().delete_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", "orphan")
        wait_for(lambda: mk.get("orphan") is None, 20, what="the manager's TrainJob to go")
        assert "RemoteCleanupDeferred" in events_of(mk, "orphan")
        mk.submit("orphan", run="600s")  # a new one, of the same name
    finally:
        bed.restore_api_server(where)

    def old_copy_gone() -> bool:
        copy_ = mk.get("orphan", where)
        new_uid = (mk.get("orphan") or {}).get("metadata", {}).get("uid")
        made_for = (
            ((copy_ or {}).get("metadata") or {})
            .get("annotations", {})
            .get("kueue.x-k8s.io/multikueue-origin-uid")
        )
        return copy_ is None or made_for == new_uid

    wait_for(old_copy_gone, 90, what="the old copy on the worker to be swept")


@pytest.mark.disruptive
def test_lost_worker_moves_the_trainjob_to_the_other(bed: Bed, worker_names: list[str]) -> None:
    mk = MultiKueue(bed)
    mk.submit("mover", run="20s")
    lost = mk.started_on("mover")
    bed.stop_component(lost, "kube-apiserver")
    try:
        custom = mk.custom()

        def inactive() -> bool:
            obj = custom.get_cluster_custom_object(*KUEUE, "multikueueclusters", lost)
            return any(
                c["type"] == "Active" and c["status"] == "False"
                for c in (obj.get("status") or {}).get("conditions") or []
            )

        wait_for(inactive, 60, what=f"MultiKueueCluster {lost} to turn inactive")
        other = next(w for w in worker_names if w != lost)
        wait_for(
            lambda: (mk.get("mover") or {}).get("status", {}).get("clusterName") == other,
            LOST_TIMEOUT + 90,
            what=f"the TrainJob to move to {other}",
        )
        mk.wait_until("mover", "Complete", timeout=120)
    finally:
        bed.restore_api_server(lost)
    # Once the lost worker is back, our stale copy there is removed: never two runs.
    wait_for(
        lambda: mk.get("mover", lost) is None,
        90,
        what=f"the stale TrainJob on {lost} to be garbage-collected",
    )


def mkc_active(mk: MultiKueue, worker: str) -> str | None:
    obj = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueclusters", worker)
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Active":
            return str(cond["status"])
    return None


@pytest.mark.disruptive
def test_dispatcher_killed_while_a_worker_is_down_dispatches_nothing_twice(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    # A lost timeout the outage stays well inside, however slow the restarts are (stopping
    # the API server, restarting both replicas, waiting for Active=False and restoring the
    # worker took close to 90 s in a slow run).
    with dispatcher_with(controllers, "--worker-lost-timeout", "180"):
        mk.submit("patient", run="40s")
        where = mk.started_on("patient")
        bed.stop_component(where, "kube-apiserver")
        try:
            # kill -9 of every replica: no chance to record anything on the way out.
            with dispatcher_down(controllers, kill=True):
                pass
            # The new processes found the worker unreachable and said so on its cluster.
            wait_for(lambda: mkc_active(mk, where) == "False", 60, what=f"{where} Active=False")
        finally:
            bed.restore_api_server(where)
        ran_on = watch_until_complete(mk, ["patient"], 150)
    # Its pods may be done and gone before the worker's API server is back: no other worker
    # may have run any.
    assert ran_on["patient"] <= {where}, ran_on
    reasons = events_of(mk, "patient")
    assert dispatched_to(mk, "patient") == [where] and "ClusterLost" not in reasons, reasons
