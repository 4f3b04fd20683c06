"""What the worker controller's bed tests share: a TrainJob on a namespaced runtime, and the
worker controller's replicas restarted with extra flags."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from clusters import setup
from clusters.install import WORKER_CONTROLLER
from tests.support.builders import make_trainjob


def trainjob(name: str, runtime: str = "torch", **spec: object) -> dict[str, object]:
    return make_trainjob(name, runtimeRef={"name": runtime, "kind": "TrainingRuntime"}, **spec)


@contextlib.contextmanager
def worker_controller_with(
    controllers: list[setup.Controller], cluster: str, *flags: str
) -> Iterator[None]:
    """The worker controller's replicas on `cluster`, restarted with extra flags, then as before."""
    replicas = [c for c in controllers if c.name == WORKER_CONTROLLER and c.cluster == cluster]
    usual = {id(r): r.argv for r in replicas}
    for replica in replicas:
        replica.stop()
        replica.argv = [*replica.argv, *flags]
        replica.start()
    try:
        yield
    finally:
        for replica in replicas:
            replica.stop()
            replica.argv = usual[id(replica)]
            replica.start()
