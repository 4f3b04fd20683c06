"""A MultiKueue set-up on the bed (queues, MultiKueueClusters, the product installed from
deploy/), for the demo, the tests and the benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusters import images
from clusters.bed import Bed
from clusters.install import Replica, install_product, stop_product
from clusters.kube import Applier, load_manifests

Dict = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
KUEUE = "kueue.x-k8s.io/v1beta2"


def _obj(
    kind: str, name: str, spec: Dict | None = None, namespace: str | None = None, **extra: Any
) -> Dict:
    meta: Dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    obj: Dict = {"apiVersion": KUEUE, "kind": kind, "metadata": meta, **extra}
    if spec is not None:
        obj["spec"] = spec
    return obj


def queue_objects(
    namespace: str, cpu: str, *, checks: list[str] | None = None, suffix: str = ""
) -> list[Dict]:
    """ResourceFlavor `default`, ClusterQueue `cq<suffix>` (cpu quota) and LocalQueue `q`."""
    cq_spec: Dict = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": "1Ti"},
                        ],
                    }
                ],
            }
        ],
    }
    if checks:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return [
        _obj("ResourceFlavor", "default", {}),
        _obj("ClusterQueue", f"cq{suffix}", cq_spec),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        _obj("LocalQueue", "q", {"clusterQueue": f"cq{suffix}"}, namespace=namespace),
    ]


def multikueue_objects(bed: Bed) -> list[Dict]:
    """The standard MultiKueue objects on the manager, one MultiKueueCluster per worker."""
    workers = [w.name for w in bed.config.workers]
    return [
        _obj(
            "AdmissionCheck",
            "multikueue",
            {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": "multikueue",
                },
            },
        ),
        _obj("MultiKueueConfig", "multikueue", {"clusters": workers}),
        *[
            _obj(
                "MultiKueueCluster",
                w,
                {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{w}-secret"}
                    }
                },
            )
            for w in workers
        ],
    ]


def install(
    bed: Bed,
    namespace: str,
    *,
    worker_cpu: str = "16",
    cpu_by_worker: dict[str, str] | None = None,
    runtime: Path = REPO / "examples" / "runtimes" / "torch-distributed.yaml",
    on_workers: bool = True,
) -> None:
    """Runtime everywhere; a MultiKueue-checked queue `q` in `namespace` on the manager; a plain
    queue `q` there on every worker (quota per worker from `cpu_by_worker`), unless
    `on_workers` is False (then the workers have neither the namespace nor the queue)."""
    # The runtime's file may carry an example TrainJob too: that is the caller's to submit.
    runtime_docs = images.for_the_bed(
        [d for d in load_manifests(runtime.read_text()) if d["kind"] != "TrainJob"]
    )
    manager = bed.config.managers[0].name
    suffix = f"-{namespace}"
    Applier(bed.api(manager)).apply_all(
        [
            *runtime_docs,
            *queue_objects(namespace, "1000", checks=["multikueue"], suffix=suffix),
            *multikueue_objects(bed),
        ]
    )
    for worker in bed.config.workers if on_workers else []:
        cpu = (cpu_by_worker or {}).get(worker.name, worker_cpu)
        Applier(bed.api(worker.name)).apply_all(
            [*runtime_docs, *queue_objects(namespace, cpu, suffix=suffix)]
        )


# A replica of one of our Deployments, run by the bed from deploy/ (clusters/install.py).
Controller = Replica


def start_controllers(
    bed: Bed,
    *,
    worker_lost_timeout: float = 900.0,
    resync: float | None = 2.0,
    manager_flags: tuple[str, ...] = (),
    chart_values: dict[str, Any] | None = None,
) -> list[Controller]:
    """The product installed from deploy/ on every cluster (clusters/install.py), or from the
    Helm chart with `chart_values`, with the controllers' safety-net timers shortened by flags
    for the tests and the demo (`resync`; None keeps the installed ones, as the benchmarks
    do), and the dispatcher given `manager_flags` too."""
    worker_timers = [] if resync is None else ["--resync-seconds", str(resync)]
    manager_timers = [] if resync is None else [*worker_timers, "--gc-interval", "10"]
    return install_product(
        bed,
        worker_args=worker_timers,
        manager_args=[
            "--worker-lost-timeout",
            str(worker_lost_timeout),
            *manager_timers,
            *manager_flags,
        ],
        chart_values=chart_values,
    )


def stop_controllers(bed: Bed, ctrls: list[Controller]) -> None:
    stop_product(bed, ctrls)
