"""The running bed's manager, for the benchmarks that measure against it (`python -m clusters
up` first), and a namespace of their own there."""

from __future__ import annotations

import sys
import uuid

from clusters.bed import Bed
from clusters.config import load_config
from kubebase.kinds import NAMESPACE
from kubecontrol.cluster import Cluster


def manager_namespace(prefix: str) -> tuple[Cluster, str] | None:
    """A client of the bed's manager and a new namespace named `prefix-xxxx`; None (said on
    stderr) when the bed is not up."""
    bed = Bed(load_config())
    if not bed.is_up():
        print("the bed is not up; run `python -m clusters up` first", file=sys.stderr)
        return None
    manager = bed.config.managers[0].name
    kube = Cluster.from_kubeconfig(manager, bed.kubeconfig(manager), "bench.trainjob.dev")
    ns = f"{prefix}-{uuid.uuid4().hex[:4]}"
    kube.create(NAMESPACE, {"metadata": {"name": ns}})
    return kube, ns
