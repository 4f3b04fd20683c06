"""The MultiKueue driver of the end-to-end tests: the bed's manager and workers through the
kubernetes client, the dispatcher replicas as processes, and what the tests read of them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers import kube
from clusters.helpers.waiting import stays_false, wait_for
from clusters.install import DISPATCHER
from clusters.install import leads as install_leads
from clusters.kube import Applier, load_manifests
from dispatcher.commands.worker_secret import token_claims
from tests.support.builders import runtime_patch

Dict = dict[str, Any]


TRAINER = ("trainer.kubeflow.org", "v1alpha1")


KUEUE = ("kueue.x-k8s.io", "v1beta2")


JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # on every pod of a TrainJob


MULTIKUEUE = "kueue.x-k8s.io/multikueue"


class MultiKueue:
    """One test namespace across the manager and the workers."""

    def __init__(self, bed: Bed, **install: Any) -> None:
        self.bed = bed
        self.ns = f"mk-{uuid.uuid4().hex[:6]}"
        self.manager = bed.config.managers[0].name
        self.workers = [w.name for w in bed.config.workers]
        setup.install(bed, self.ns, **install)
        # Every test starts from all workers connected (an earlier test may have cut one off).
        custom = self.custom()

        def all_active() -> bool:
            items = custom.list_cluster_custom_object(*KUEUE, "multikueueclusters")["items"]
            active = {
                m["metadata"]["name"]
                for m in items
                if any(
                    c["type"] == "Active" and c["status"] == "True"
                    for c in (m.get("status") or {}).get("conditions") or []
                )
            }
            return set(self.workers) <= active

        wait_for(all_active, 60, what="every worker's MultiKueueCluster to be Active")

    def set_quota(self, worker: str, cpu: str) -> None:
        """Change the CPU quota of this namespace's ClusterQueue on `worker`."""
        queue = setup.queue_objects(self.ns, cpu, suffix=f"-{self.ns}")[1]
        self.custom(worker).patch_cluster_custom_object(
            *KUEUE, "clusterqueues", queue["metadata"]["name"], {"spec": queue["spec"]}
        )

    def custom(self, cluster: str | None = None) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.bed.api(cluster or self.manager))

    def reserved_cpu(self, cluster: str) -> str | None:
        """The CPU reserved in this namespace's ClusterQueue on `cluster`, as its status says."""
        cq = self.custom(cluster).get_cluster_custom_object(
            *KUEUE, "clusterqueues", f"cq-{self.ns}"
        )
        return next(
            (
                str(r.get("total"))
                for f in (cq.get("status") or {}).get("flavorsReservation") or []
                for r in f.get("resources") or []
                if r["name"] == "cpu"
            ),
            None,
        )

    @contextlib.contextmanager
    def filled(self, *workers: str, cpu: str) -> Iterator[None]:
        """Each of `workers` busy with a TrainJob of its own (no MultiKueue) holding `cpu` of
        its quota, until the block ends or `free` removes it. Kueue writes a ClusterQueue's
        reservation in its status up to a second after it admits (it batches those writes): the
        dispatcher sees a worker full once the status says so, and so does this."""
        try:
            for worker in workers:
                self.submit("local", cluster=worker, cpu=cpu, run="600s")
            for worker in workers:
                self.wait_full(worker, cpu, 60)
            yield
        finally:
            for worker in workers:
                self.free(worker)

    def preempting_for(self, priority_class: str, value: int = 1000) -> None:
        """clusters.helpers.kube.preempting_for, over this namespace."""
        kube.preempting_for(self.bed, self.ns, priority_class, value)

    def wait_full(self, worker: str, cpu: str, timeout: float) -> None:
        """Until this namespace's ClusterQueue on `worker` says `cpu` is reserved."""
        wait_for(lambda: self.reserved_cpu(worker) == cpu, timeout, what=f"{worker} full")

    def fail_fast_runtime(self, *, per_index: bool = False) -> str:
        """A ClusterTrainingRuntime like torch-distributed on every cluster, but a failed pod
        fails its Job at once (backoffLimit 0); its name. With per_index, a failed pod is not
        retried and its Job fails once every index has ended (backoffLimitPerIndex 0): no pod is
        deleted still running because another failed first."""
        runtime = example_runtime()
        name = "torch-fail-each" if per_index else "torch-fail-fast"
        runtime["metadata"]["name"] = name
        node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
        node["template"]["spec"]["backoffLimitPerIndex" if per_index else "backoffLimit"] = 0
        if per_index:  # Kubernetes takes backoffLimitPerIndex with restartPolicy Never only
            node["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
        for cluster in [self.manager, *self.workers]:
            Applier(self.bed.api(cluster)).apply(runtime)
        return name

    def tenant_runtime(self, name: str, cpu: str) -> Dict:
        """The example torch-distributed runtime as a TrainingRuntime of this namespace named
        `name`, its node container asking for `cpu` (not created anywhere)."""
        runtime = example_runtime()
        runtime["kind"] = "TrainingRuntime"
        runtime["metadata"] = {"name": name, "namespace": self.ns}
        node_container(runtime)["resources"] = {"requests": {"cpu": cpu}}
        return runtime

    def free(self, worker: str) -> None:
        with contextlib.suppress(client.ApiException):
            self.custom(worker).delete_namespaced_custom_object(
                *TRAINER, self.ns, "trainjobs", "local"
            )

    def submit(
        self,
        name: str,
        *,
        nodes: int = 1,
        run: str = "3s",
        exit_code: int | None = None,
        runtime: str = "torch-distributed",
        runtime_kind: str = "ClusterTrainingRuntime",
        cpu: str | None = "1",
        managed_by: str | None = None,
        suspend: bool | None = None,
        queue: str | None = "q",
        cluster: str | None = None,
        metadata: Dict | None = None,
        pod_annotations: Dict | None = None,
        env: list[Dict] | None = None,
        pod_spec: Dict | None = None,
    ) -> Dict:
        """A TrainJob on the manager (or on `cluster`: a worker's own, run there by Kueue and
        the worker controller without MultiKueue); `queue` None: no Kueue queue."""
        annotations = {"bed.trainjob.dev/run-duration": run, **(pod_annotations or {})}
        if exit_code is not None:
            annotations["bed.trainjob.dev/exit-code"] = str(exit_code)
        body: Dict = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {
                "name": name,
                "labels": {} if queue is None else {"kueue.x-k8s.io/queue-name": queue},
            },
            "spec": {
                "runtimeRef": {"name": runtime, "kind": runtime_kind},
                "trainer": {"numNodes": nodes},
                "runtimePatches": [
                    runtime_patch(
                        "tests.trainjob.dev/e2e",
                        "node",
                        {
                            "metadata": {"annotations": annotations},
                            **({"spec": pod_spec} if pod_spec else {}),
                        },
                    )
                ],
            },
        }
        if cpu is not None:
            body["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": cpu}}
        if env is not None:
            body["spec"]["trainer"]["env"] = env
        if managed_by is not None:
            body["spec"]["managedBy"] = managed_by
        if suspend is not None:
            body["spec"]["suspend"] = suspend
        for key, value in (metadata or {}).items():
            body["metadata"].setdefault(key, {}).update(value)
        result: Dict = self.custom(cluster).create_namespaced_custom_object(
            *TRAINER, self.ns, "trainjobs", body
        )
        return result

    def get(self, name: str, cluster: str | None = None) -> Dict | None:
        try:
            result: Dict = self.custom(cluster).get_namespaced_custom_object(
                *TRAINER, self.ns, "trainjobs", name
            )
            return result
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def condition(self, name: str, ctype: str) -> Dict | None:
        obj = self.get(name) or {}
        return next(
            (
                c
                for c in (obj.get("status") or {}).get("conditions") or []
                if c["type"] == ctype and c["status"] == "True"
            ),
            None,
        )

    def wait_until(self, name: str, ctype: str, timeout: float = 90) -> Dict:
        return wait_for(
            lambda: self.condition(name, ctype), timeout, what=f"{name} {ctype} on the manager"
        )

    def running_on(self, name: str) -> list[str]:
        return [w for w in self.workers if self.get(name, w) is not None]

    def remote_workloads(self, worker: str) -> list[Dict]:
        items: list[Dict] = self.custom(worker).list_namespaced_custom_object(
            *KUEUE, self.ns, "workloads"
        )["items"]
        return items

    def manager_workload(self, name: str) -> Dict | None:
        """The manager Workload of the TrainJob `name`."""
        items: list[Dict] = self.custom().list_namespaced_custom_object(
            *KUEUE, self.ns, "workloads"
        )["items"]
        return next(
            (
                wl
                for wl in items
                if any(o.get("name") == name for o in wl["metadata"].get("ownerReferences") or [])
            ),
            None,
        )

    def started_on(self, name: str) -> str:
        """The worker the TrainJob was sent to, once its pods run there and the manager knows
        it (PodsReady=True on the manager Workload, about a second after the pods run).

        Tests that stop a worker or the dispatcher start from here: before that point an outage
        that outlasts the bed's waitForPodsReady timeout has the manager's Kueue evict the job
        and dispatch it again, as upstream MultiKueue does."""
        worker = wait_for(lambda: self.running_on(name), 60, what=f"{name} on a worker")[0]
        wait_for(lambda: self.pods(worker, name), 30, what=f"pods of {name} running on {worker}")
        wait_for(
            lambda: pods_ready([self.manager_workload(name) or {}]) == ("True", "Started"),
            30,
            what=f"PodsReady=True on the manager Workload of {name}",
        )
        return worker

    def wait_copies_everywhere(self) -> None:
        wait_for(
            lambda: all(self.remote_workloads(w) for w in self.workers),
            30,
            what="copies of the Workload on every worker",
        )

    def pods(self, worker: str, name: str, phase: str = "Running") -> list[Any]:
        pods = (
            client.CoreV1Api(self.bed.api(worker))
            .list_namespaced_pod(self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
            .items
        )
        return [p for p in pods if p.status.phase == phase]


def replica_token(ctrl: setup.Controller) -> str:
    """The ServiceAccount token a replica runs with (the bed's stand-in for its pod's)."""
    kubeconfig = yaml.safe_load(Path(ctrl.env["KUBECONFIG"]).read_text())
    return str(kubeconfig["users"][0]["user"]["token"])


def token_id(ctrl: setup.Controller) -> str:
    """The credential id the API server records for a replica's token (its JWT's jti)."""
    return f"JTI={token_claims(replica_token(ctrl))['jti']}"


def leads(ctrl: setup.Controller) -> bool:
    return bool(install_leads(ctrl))


# Shorter than deploy's (15 s / 10 s / 2 s), for the takeover test.
LEASE_FLAGS = (
    "--lease-duration-seconds",
    "8",
    "--renew-deadline-seconds",
    "6",
    "--retry-period-seconds",
    "1",
)


def dispatchers(controllers: list[setup.Controller]) -> list[setup.Controller]:
    """The dispatcher's replicas (deploy/manager runs 2: one leads, one stands by)."""
    return [c for c in controllers if c.name == DISPATCHER]


def the_leader(controllers: list[setup.Controller]) -> setup.Controller:
    return wait_for(
        lambda: next((c for c in dispatchers(controllers) if leads(c)), None),
        30,
        what="a dispatcher replica to lead",
    )


@contextlib.contextmanager
def dispatcher_down(controllers: list[setup.Controller], *, kill: bool = False) -> Iterator[None]:
    """Every dispatcher replica stopped (SIGTERM, or SIGKILL) for the block, then started."""
    replicas = dispatchers(controllers)
    for replica in replicas:
        if kill:
            replica.proc.kill()
            replica.proc.wait()
        else:
            replica.stop()
    try:
        yield
    finally:
        for replica in replicas:
            replica.start()


@contextlib.contextmanager
def dispatcher_with(controllers: list[setup.Controller], *flags: str) -> Iterator[None]:
    """The dispatcher's replicas, restarted with extra flags for the block, then as before."""
    replicas = dispatchers(controllers)
    usual = {id(r): r.argv for r in replicas}
    with dispatcher_down(controllers):
        for replica in replicas:
            replica.argv = [*replica.argv, *flags]
    the_leader(controllers)
    try:
        yield
    finally:
        with dispatcher_down(controllers):
            for replica in replicas:
                replica.argv = usual[id(replica)]
        the_leader(controllers)


@contextlib.contextmanager
def workloads_seen(mk: MultiKueue, cluster: str) -> Iterator[list[Dict]]:
    """Every version of every Workload in the test namespace on `cluster` during the block
    (clusters.helpers.kube.workloads_seen)."""
    with kube.workloads_seen(mk.bed.api(cluster), mk.ns, cluster) as seen:
        yield seen


def names(workloads: list[Dict]) -> set[str]:
    """The names of `workloads` (a `workloads_seen` list, read while it may still grow)."""
    return {wl["metadata"]["name"] for wl in list(workloads)}


def manager_events(mk: MultiKueue, name: str) -> list[Any]:
    """The Events recorded on a manager TrainJob, oldest first."""
    items = (
        client.CoreV1Api(mk.bed.api(mk.manager))
        .list_namespaced_event(mk.ns, field_selector=f"involvedObject.name={name}")
        .items
    )
    return sorted(items, key=lambda e: e.metadata.creation_timestamp)


def events_of(mk: MultiKueue, name: str) -> list[str]:
    """Reasons of the Events recorded on a manager TrainJob."""
    return [e.reason for e in manager_events(mk, name)]


def pod_phases(trainjob: Dict | None) -> dict[str, tuple[int, ...]]:
    """status.podsStatus as {PodSet: (pending, running, succeeded, failed)}."""
    return {
        p["name"]: tuple(p[k] for k in ("pending", "running", "succeeded", "failed"))
        for p in ((trainjob or {}).get("status") or {}).get("podsStatus") or []
    }


def pods_ready(workloads: list[Dict]) -> tuple[str, str] | None:
    """PodsReady (status, reason) of the only Workload in the list."""
    for wl in workloads[:1]:
        for cond in (wl.get("status") or {}).get("conditions") or []:
            if cond["type"] == "PodsReady":
                return cond["status"], cond["reason"]
    return None


LOST_TIMEOUT = 15.0  # seconds a worker may be unreachable before its jobs move elsewhere
HELD_SECONDS = 6.0  # three of the bed dispatcher's resync passes (clusters/setup.py: 2 s)


def nothing_sent(mk: MultiKueue, why: str, seconds: float = HELD_SECONDS) -> None:
    """No worker gets a copy for `seconds` (several passes of the dispatcher): a job held
    stays held, rather than looking held at one moment."""
    stays_false(
        lambda: [w for w in mk.workers if mk.remote_workloads(w)],
        seconds,
        what=f"a copy sent while {why}",
    )


def dispatched_to(mk: MultiKueue, name: str) -> list[str]:
    """The worker of each dispatch round of a manager TrainJob, from its Events: the Started
    Event of each admission names it, and a `Dispatched` Event does for a round that started
    nothing (the TrainJob was still running when it was sent again)."""
    marker = "dispatched to cluster "
    return [
        e.message.split(marker, 1)[1].split()[0]
        for e in manager_events(mk, name)
        if e.reason in ("Started", "Dispatched") and marker in (e.message or "")
    ]


def fleet(bed: Bed, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """`trainjob-fleet ARGS` against the bed's manager, as a platform engineer runs it."""
    manager = bed.config.managers[0].name
    return subprocess.run(
        [sys.executable, "-m", "dispatcher.commands.fleet",
         "--kubeconfig", str(bed.kubeconfig(manager)), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def node_container(runtime: Dict) -> Dict:
    """The first container of a runtime's first replicatedJob (the example's trainer node)."""
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    found: Dict = node["template"]["spec"]["template"]["spec"]["containers"][0]
    return found


def example_runtime() -> Dict:
    """examples/runtimes/torch-distributed.yaml, the runbook's ClusterTrainingRuntime."""
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    runtime: Dict = load_manifests(example.read_text())[0]
    return runtime


# ---- Kueue's orchestrated preemption (MultiKueueOrchestratedPreemption) ----

GATE = "MultiKueueOrchestratedPreemption"
URGENT = "tj-urgent"  # a WorkloadPriorityClass the workers' queues preempt for (preempting_for)


@contextlib.contextmanager
def orchestrated(bed: Bed, controllers: list[setup.Controller], *flags: str) -> Iterator[None]:
    """Every cluster's Kueue with the gate on and the dispatcher gating its copies, for the
    block; then both as before."""
    bed.set_kueue_feature_gates({GATE: True})
    try:
        with dispatcher_with(controllers, "--orchestrated-preemption", "true", *flags):
            yield
    finally:
        bed.set_kueue_feature_gates({})


def preempted(seen: list[Dict], name: str) -> bool:
    """Whether any version of the Workload of the worker's own TrainJob `name` was evicted by
    a preemption."""
    return any(
        cd.get("type") == "Evicted"
        and cd.get("status") == "True"
        and cd.get("reason") == "Preempted"
        for wl in list(seen)
        if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name") == name
        for cd in (wl.get("status") or {}).get("conditions") or []
    )
