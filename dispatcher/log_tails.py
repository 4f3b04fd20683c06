"""The last lines of a TrainJob's pods, kept on the manager once its copy leaves the worker.

A worker removes a TrainJob's pods with its copy (retention 0 by default), and with them what
a failed job last said. So, just before the leader deletes a TrainJob copy that has pods, it
reads the tail of each container's log (at most `TAIL_LINES` lines and `TAIL_BYTES` bytes each,
`MAX_PODS` pods, within `CAPTURE_SECONDS` in all) and keeps them in one immutable ConfigMap in
its own namespace, named after the manager TrainJob's UID: never in the tenant's namespace,
never in memory. The view.trainjob.dev API serves them when the pods are gone. The resync
loop deletes the tails of TrainJobs that are gone, and the oldest beyond `--log-tails-kept`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

from dispatcher import copy_pods
from kubecontrol.client import ApiException, TransportError
from kubecontrol.controller import own_namespace
from kubecontrol.kinds import CONFIG_MAP
from kubecontrol.objects import Dict
from trainjob import constants as c

if TYPE_CHECKING:
    from dispatcher.remote import RemoteCluster
    from kubecontrol.cluster import Cluster
    from trainjob.caches import Caches

log = logging.getLogger(__name__)

PREFIX = "log-tail-"
LABEL = f"{c.DOMAIN}/log-tail-of"  # the manager TrainJob's UID
TRAINJOB_ANNOTATION = f"{c.DOMAIN}/log-tail-trainjob"  # NAMESPACE/NAME, for people
PODS_KEY = "pods.json"
TAIL_LINES = 100
TAIL_BYTES = 8 * 1024  # kept per container: 32 pods x 2 containers fit a ConfigMap's 1 MiB
READ_BYTES = 64 * 1024  # read per container (a line may be long; the end is what is kept)
# All of one TrainJob's tails: below a ConfigMap's 1 MiB whatever the containers per pod (a
# tenant's runtime chooses how many).
TOTAL_BYTES = 768 * 1024
MAX_PODS = 32
CAPTURE_SECONDS = 15.0


def name_of(trainjob_uid: str) -> str:
    return f"{PREFIX}{trainjob_uid}"


def _entry(pod: Dict, worker: str) -> Dict:
    """What is kept of a pod: enough to pick it again (name, role, index, containers) and say
    how it ended."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "labels": {
                k: labels[k]
                for k in (c.REPLICATED_JOB_NAME_LABEL, c.JOB_COMPLETION_INDEX)
                if k in labels
            },
        },
        "spec": {
            "containers": [{"name": x.get("name")} for x in spec.get("containers") or []],
            "nodeName": spec.get("nodeName"),
        },
        "status": {
            "phase": (pod.get("status") or {}).get("phase"),
            "containerStatuses": [
                {"ready": False, "restartCount": s.get("restartCount") or 0}
                for s in (pod.get("status") or {}).get("containerStatuses") or []
            ],
        },
        "worker": worker,
    }


def key_of(pod: str, container: str) -> str:
    return f"{pod}.{container}"


def capture(remote: RemoteCluster, copy: Dict) -> Dict | None:
    """The ConfigMap of the tails of our copy's pods on `remote`, or None when it has none
    (a copy that never ran) or the worker cannot say which."""
    meta = copy["metadata"]
    made_for = (meta.get("annotations") or {}).get(c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION)
    if not made_for or not meta.get("uid"):
        return None
    namespace, name = meta["namespace"], meta["name"]
    try:
        _, pods = copy_pods.read(remote, namespace, name, meta["uid"])
    except (ApiException, TransportError) as exc:
        log.info("log tails of %s/%s not kept: %s", namespace, name, exc)
        return None
    if not pods:
        return None
    pods = sorted(pods, key=lambda p: p["metadata"]["name"])[:MAX_PODS]
    deadline = time.monotonic() + CAPTURE_SECONDS
    data: dict[str, str] = {}
    kept = 0
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            key = key_of(pod["metadata"]["name"], container["name"])
            if time.monotonic() > deadline:
                data[key] = f"(not kept: no time left within {CAPTURE_SECONDS:g}s)\n"
            elif kept >= TOTAL_BYTES:
                data[key] = f"(not kept: the TrainJob's tails reached {TOTAL_BYTES // 1024} KiB)\n"
            else:
                data[key] = _tail(remote, namespace, pod["metadata"]["name"], container["name"])
                kept += len(data[key].encode())
    data[PODS_KEY] = orjson.dumps([_entry(p, remote.name) for p in pods]).decode()
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name_of(made_for),
            "namespace": own_namespace(),
            "labels": {LABEL: made_for},
            "annotations": {TRAINJOB_ANNOTATION: f"{namespace}/{name}"},
        },
        "immutable": True,
        "data": data,
    }


def _tail(remote: RemoteCluster, namespace: str, pod: str, container: str) -> str:
    path = f"{copy_pods.PODS.format(namespace=namespace)}/{pod}/log"
    query = {"container": container, "tailLines": TAIL_LINES, "limitBytes": READ_BYTES}
    try:
        text = remote.cluster.api.request("GET", path, query=query, timeout=5.0, accept="*/*")
    except (ApiException, TransportError) as exc:
        return f"(not kept: {exc})\n"
    return text[-TAIL_BYTES:].decode(errors="replace")


def keep(manager: Cluster, remote: RemoteCluster, copy: Dict) -> None:
    """Capture and keep the tails of `copy`'s pods (best effort: a failure is logged, and the
    copy is deleted all the same)."""
    try:
        found = capture(remote, copy)
        if found is None:
            return
        try:
            manager.create(CONFIG_MAP, found)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # an earlier run's (it was sent back, and ran again elsewhere): the last run's
            # words are the ones to keep
            meta = found["metadata"]
            manager.delete(CONFIG_MAP, meta["name"], meta["namespace"])
            manager.create(CONFIG_MAP, found)
        log.info(
            "kept the log tails of %s/%s (%d containers) from %s",
            copy["metadata"]["namespace"],
            copy["metadata"]["name"],
            len(found["data"]) - 1,
            remote.name,
        )
    except ApiException as exc:
        log.warning("log tails of %s not kept: %s", copy["metadata"].get("name"), exc)
    except Exception:
        log.exception("log tails of %s not kept", copy["metadata"].get("name"))


def read(manager: Cluster, trainjob_uid: str) -> tuple[list[Dict], dict[str, str]] | None:
    """(kept pods, tails by `key_of(pod, container)`) of a TrainJob, or None."""
    found = manager.get_or_none(CONFIG_MAP, name_of(trainjob_uid), own_namespace())
    if found is None:
        return None
    data: dict[str, str] = dict(found.get("data") or {})
    try:
        pods = orjson.loads(data.pop(PODS_KEY, "[]"))
    except orjson.JSONDecodeError:
        return None
    return (pods if isinstance(pods, list) else []), data


def sweep(manager: Cluster, caches: Caches, kept: int, label: str = LABEL) -> int:
    """Delete the records labelled `label` (their TrainJob's UID; the tails, by default) of
    TrainJobs that are gone, then the oldest beyond `kept`; how many were deleted."""
    # Their metadata only: the tails themselves (up to a MiB each) are not read to be deleted.
    items = manager.list_metadata(CONFIG_MAP, own_namespace(), label_selector=label)
    alive = set()
    for key in caches.trainjob_keys():
        tj = caches.trainjob(*key)
        if tj is not None and tj.uid:
            alive.add(tj.uid)
    going = doomed(items, alive, kept, label)
    for item in going:
        meta = item["metadata"]
        manager.delete(CONFIG_MAP, meta["name"], meta["namespace"], uid=meta.get("uid"))
    return len(going)


def doomed(items: list[Dict], alive: set[str], kept: int, label: str = LABEL) -> list[Dict]:
    """The records to delete: those of TrainJobs not `alive`, then the oldest beyond `kept`."""
    gone = [i for i in items if (i["metadata"].get("labels") or {}).get(label) not in alive]
    rest = sorted(
        (i for i in items if i not in gone),
        key=lambda i: str(i["metadata"].get("creationTimestamp") or ""),
    )
    return gone + rest[: max(0, len(rest) - kept)]
