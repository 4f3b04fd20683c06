"""Small helpers for tests that talk to the bed's API servers (no mocks)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kubernetes import client, watch

from clusters.helpers.waiting import wait_for

if TYPE_CHECKING:
    from clusters.bed import Bed

Dict = dict[str, Any]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def active_condition(
    custom: client.CustomObjectsApi, name: str, plural: str = "multikueueclusters"
) -> Dict | None:
    """The `Active` condition of a cluster-scoped Kueue object (MultiKueueCluster,
    AdmissionCheck), or None."""
    obj = custom.get_cluster_custom_object(*KUEUE, plural, name)
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Active"),
        None,
    )


def is_active(custom: client.CustomObjectsApi, name: str, plural: str) -> bool:
    return (active_condition(custom, name, plural) or {}).get("status") == "True"


def create_workload(
    custom: client.CustomObjectsApi, ns: str, name: str, labels: Dict, *, active: bool = True
) -> None:
    """A Workload of one 1-CPU pod in queue `q` that no job owns (an orphan, to a
    MultiKueue garbage collector when `labels` carry its origin)."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    spec: Dict = {
        "queueName": "q",
        "podSets": [{"name": "node", "count": 1, "template": {"spec": pod}}],
    }
    if not active:
        spec["active"] = False
    custom.create_namespaced_custom_object(
        *KUEUE,
        ns,
        "workloads",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        },
    )


class TrainJobs:
    """TrainJobs, runtimes and their children in one namespace of one cluster."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.ns = api, namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)

    def create(self, body: Dict) -> Dict:
        body = {**body, "metadata": {**body["metadata"], "namespace": self.ns}}
        body["metadata"].pop("uid", None)
        body["metadata"].pop("resourceVersion", None)
        body["metadata"].pop("generation", None)
        result: Dict = self.custom.create_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", body
        )
        return result

    def create_runtime(self, body: Dict) -> None:
        body = {
            **body,
            "kind": "TrainingRuntime",
            "metadata": {**body["metadata"], "namespace": self.ns},
        }
        self.custom.create_namespaced_custom_object(*TRAINER, self.ns, "trainingruntimes", body)

    def get(self, name: str) -> Dict:
        result: Dict = self.custom.get_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", name
        )
        return result

    def patch(self, name: str, patch: Dict) -> Dict:
        result: Dict = self.custom.patch_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", name, patch
        )
        return result

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", name, propagation_policy="Foreground"
        )

    def condition(self, name: str, ctype: str) -> Dict | None:
        for cond in self.get(name).get("status", {}).get("conditions") or []:
            if cond["type"] == ctype:
                return dict(cond)
        return None

    def wait_condition(
        self, name: str, ctype: str, status: str = "True", timeout: float = 60
    ) -> Dict:
        def check() -> Dict | None:
            cond = self.condition(name, ctype)
            return cond if cond and cond["status"] == status else None

        try:
            return wait_for(check, timeout, what=f"TrainJob {name} {ctype}={status}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe(name)}") from None

    def describe(self, name: str) -> str:
        """What a failed wait prints: the TrainJob's spec and status, its Events and the
        Workloads of the namespace it owns, so a run that timed out says where it stood."""
        lines: list[str] = []
        try:
            tj = self.get(name)
            lines.append(f"spec: {json.dumps(tj.get('spec'), sort_keys=True)}")
            lines.append(f"status: {json.dumps(tj.get('status'), sort_keys=True)}")
            lines += [f"event {reason}: {message}" for reason, message in self.events(name)]
            for wl in self.custom.list_namespaced_custom_object(*KUEUE, self.ns, "workloads")[
                "items"
            ]:
                owners = [o.get("name") for o in wl["metadata"].get("ownerReferences") or []]
                if name in owners:
                    lines.append(
                        f"Workload {wl['metadata']['name']}: "
                        f"{json.dumps(wl.get('status'), sort_keys=True)}"
                    )
        except client.ApiException as exc:
            lines.append(f"(could not read: {exc.status} {exc.reason})")
        return "\n".join(lines)

    def events(self, name: str) -> list[tuple[str, str]]:
        """(reason, message) of the Events recorded on TrainJob `name`."""
        found = self.core.list_namespaced_event(
            self.ns, field_selector=f"involvedObject.name={name},involvedObject.kind=TrainJob"
        ).items
        return [(e.reason, e.message) for e in found]

    def pods(self, name: str, phase: str | None = None) -> list[client.V1Pod]:
        pods = self.core.list_namespaced_pod(
            self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
        ).items
        return [p for p in pods if phase is None or p.status.phase == phase]

    def jobs(self, name: str) -> list[client.V1Job]:
        return list(
            self.batch.list_namespaced_job(
                self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
            ).items
        )


def api_error(exc: client.ApiException) -> str:
    return str(json.loads(exc.body).get("message", exc.body))


@contextlib.contextmanager
def workloads_seen(api: client.ApiClient, namespace: str, cluster: str) -> Iterator[list[Dict]]:
    """Every version of every Workload in `namespace` on `cluster` (through `api`) during
    the block, as a watch brings them: a copy made and deleted moments later included, and a
    state that lasted less than a poll's interval."""
    seen: list[Dict] = []
    stop = threading.Event()
    started = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            custom = client.CustomObjectsApi(api)
            listed = custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")
            seen.extend(listed["items"])
            version = listed["metadata"]["resourceVersion"]
            started.set()
            while not stop.is_set():
                stream = watch.Watch().stream(
                    custom.list_namespaced_custom_object,
                    *KUEUE,
                    namespace,
                    "workloads",
                    resource_version=version,
                    timeout_seconds=2,
                )
                for event in stream:
                    if event["type"] == "ERROR":  # a gap: what it missed is not known
                        raise RuntimeError(f"watch error: {event['object']}")
                    seen.append(event["object"])
                    version = event["object"]["metadata"]["resourceVersion"]
        except BaseException as exc:  # a negative check on `seen` would pass without it
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10), f"cannot watch Workloads on {cluster}: {failed}"
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)
    # What the block saw is whole only if the watch ran to its end.
    assert not failed, f"the Workload watch on {cluster} stopped: {failed[0]!r}"
    assert not thread.is_alive(), f"the Workload watch on {cluster} did not end"


def preempting_for(bed: Bed, namespace: str, priority_class: str, value: int = 1000) -> None:
    """A WorkloadPriorityClass `priority_class` of `value` on every cluster of the bed (one
    left by an earlier run kept), and each worker's ClusterQueue of `namespace` (setup's
    `cq-<namespace>`) preempting lower priorities (Kueue's withinClusterQueue: LowerPriority)."""
    for spec in bed.config.clusters:
        wpc: Dict = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
        wpc |= {"metadata": {"name": priority_class}, "value": value}
        with contextlib.suppress(client.ApiException):
            client.CustomObjectsApi(bed.api(spec.name)).create_cluster_custom_object(
                *KUEUE, "workloadpriorityclasses", wpc
            )
    for worker in bed.config.workers:
        client.CustomObjectsApi(bed.api(worker.name)).patch_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            f"cq-{namespace}",
            {"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}},
        )
