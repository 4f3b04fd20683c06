"""A copy's Jobs and pods on its worker, and which of them a request means.

Only what our copy of a TrainJob owns is ever read: the Jobs it controls (on a worker that runs
Kubeflow Trainer, the Jobs of the JobSet it controls) and the pods those Jobs control, in its
namespace. A pod or Job someone else made with the same labels is not the TrainJob's, whatever
its name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import pycurl

from kubebase.kinds import DNS_SUBDOMAIN, LABEL_NAME, POD, Kind
from kubebase.objects import Dict
from kubecontrol.aggregated import query_bool, query_int
from kubecontrol.client import JSON, METADATA_LIST, ApiClient, ApiException, TransportError
from kubecontrol.informer import TENANT_SIZED_PAGE
from kubecontrol.lists import decode_list
from trainjob.ownership import controller_ref, controller_uid
from trainjob_api import constants as c
from trainjob_api.story import PodUsage, pod_usage

if TYPE_CHECKING:
    from dispatcher.workers.remote import RemoteCluster

# On a worker that runs Kubeflow Trainer the copy controls a JobSet of its name, which
# controls the Jobs.
JOBSET = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)
JOBSET_KIND = JOBSET.kind
# The metrics API (metrics-server's PodMetrics), where a worker serves it.
POD_METRICS = Kind("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True)
READ_SECONDS = 10.0  # each read on a worker: an unreachable one is named, not waited for
MAX_TAIL_LINES = 100_000
# Lists read from a worker come in pages of PAGE items, and stop at a bound: a TrainJob of
# thousands of pods costs a read of its first MAX_PODS (the story says there are more), not
# tens of MB of JSON per request. A TrainJob has at most 1,000 Jobs (admission refuses more).
# A pod's size is the tenant's (an env value has no length limit): a page is held whole, as
# bytes and decoded, so 50 pods of ~1 MB cost ~150 MB at once where 500 cost 1.4 GiB.
PAGE = TENANT_SIZED_PAGE
MAX_PODS = 500
MAX_JOBS = 1000


class Refusal(Exception):
    """An answer other than the one asked for: its HTTP code and why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---- pure: which pods are the TrainJob's, which one is meant, what to ask for -----------------


def ours(
    owner_uids: AbstractSet[str], jobs: Iterable[Dict], pods: Iterable[Dict]
) -> tuple[list[Dict], list[Dict]]:
    """The Jobs that one of `owner_uids` (our copy's UID, and that of the JobSet the copy
    controls, if any) controls, and the pods those Jobs control: a pod or Job someone else
    made with the same labels is not the TrainJob's."""
    owned = [j for j in jobs if controller_uid(j) in owner_uids]
    uids = {(j.get("metadata") or {}).get("uid") for j in owned}
    return owned, [p for p in pods if controller_uid(p) in uids]


def jobset_controller(jobs: Iterable[Dict], name: str) -> bool:
    """Whether a JobSet named `name` controls one of `jobs` (Trainer's way to run a
    TrainJob), so that the JobSet is worth reading to learn whether it is our copy's."""
    return any(
        (ref := controller_ref(job)) is not None
        and ref.get("kind") == JOBSET_KIND
        and ref.get("name") == name
        for job in jobs
    )


def _labels(pod: Dict) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def log_pods(query: Mapping[str, str]) -> dict[str, str]:
    """What narrows the list of pods a log request can mean (`read`'s `narrow`): its pod by
    name, else its role and completion index, as `pick_pod` picks among them."""
    name = query.get("pod")
    if name:
        if not DNS_SUBDOMAIN.fullmatch(name):
            raise Refusal(400, f"pod: {name[:64]!r} is not a pod's name")
        return {"metadata.name": name}
    role = query.get("replicatedJob") or c.NODE_REPLICATED_JOB
    if not LABEL_NAME.fullmatch(role):
        raise Refusal(400, f"replicatedJob: {role[:64]!r} is not a replicatedJob's name")
    index = query_int(query, "node", low=0, high=1_000_000) or 0
    return {c.REPLICATED_JOB_NAME_LABEL: role, c.JOB_COMPLETION_INDEX: str(index)}


# What may go into a selector sent to the worker: a pod's name (a DNS subdomain) and a label
# value; anything else is refused before it is sent.


def pick_pod(pods: list[Dict], query: Mapping[str, str]) -> Dict:
    """The pod a log request means: `pod` by name, else the newest of `replicatedJob`
    (default the trainer nodes, `node`) at completion index `node` (default 0)."""
    name = query.get("pod")
    if name:
        for pod in pods:
            if pod["metadata"]["name"] == name:
                return pod
        raise Refusal(404, f"pod {name!r} is not one of this TrainJob's pods")
    role = query.get("replicatedJob") or c.NODE_REPLICATED_JOB
    index = query_int(query, "node", low=0, high=1_000_000) or 0
    found = [
        p
        for p in pods
        if _labels(p).get(c.REPLICATED_JOB_NAME_LABEL) == role
        and _labels(p).get(c.JOB_COMPLETION_INDEX, "0") == str(index)
    ]
    if not found:
        raise Refusal(
            404,
            f"no pod of replicated job {role!r} with index {index} (pods are removed once a "
            "finished TrainJob is cleaned up)",
        )
    return max(found, key=lambda p: p["metadata"].get("creationTimestamp") or "")


def log_query(pod: Dict, query: Mapping[str, str]) -> dict[str, Any]:
    """What to ask the worker's API server for (`GET pods/NAME/log`); ValueError naming a
    parameter that is wrong."""
    containers = [x.get("name") for x in (pod.get("spec") or {}).get("containers") or []]
    container = query.get("container") or (
        c.NODE_CONTAINER if c.NODE_CONTAINER in containers else (containers or [None])[0]
    )
    if container not in containers:
        raise ValueError(f"container={container!r} is not one of the pod's {containers}")
    return {
        "container": container,
        "follow": "true" if query_bool(query, "follow") else None,
        "previous": "true" if query_bool(query, "previous") else None,
        "timestamps": "true" if query_bool(query, "timestamps") else None,
        "tailLines": query_int(query, "tailLines", low=0, high=MAX_TAIL_LINES),
        "sinceSeconds": query_int(query, "sinceSeconds", low=1, high=10 * 365 * 86400),
        "limitBytes": query_int(query, "limitBytes", low=1, high=1 << 40),
    }


# The labels a pod's readers look at (the story, a log's choice of pod, the tails).
POD_LABELS = (c.JOBSET_NAME_LABEL, c.REPLICATED_JOB_NAME_LABEL, c.JOB_COMPLETION_INDEX)


def job_seen(job: Dict) -> Dict:
    """What the readers read of a Job: its names, its UID and its controller, all in its
    metadata (none of its pod template, which is its tenant's to size: Jobs are listed as
    their metadata alone). A page of Jobs is cut down to this as it comes: anyone who may
    create Jobs in the namespace may label them as the TrainJob's, and its labels and
    annotations are theirs to size too."""
    meta = job.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}
    return {"metadata": {**kept, "ownerReferences": _controller_refs(job)}}


def _controller_refs(obj: Dict) -> list[Dict]:
    """An object's controller reference (the API server allows one), the only owner its
    readers read, its fields only; none when it has none."""
    ref = controller_ref(obj)
    keys = ("apiVersion", "kind", "name", "uid", "controller")
    return [{k: ref.get(k) for k in keys}] if ref is not None else []


# Containers a read keeps of one pod, and of its statuses (a tenant's pod may have thousands)
MAX_CONTAINERS_SEEN = 64


def pod_seen(pod: Dict) -> Dict:
    """What the story, the logs and the tails read of a pod, and nothing its tenant sizes:
    its names, the few labels read, its owners and times; its containers' names and node;
    its status (the kubelet's: bounded). A page of pods is cut down to this as it comes, so
    a read holds one page of whole pods at a time, never all of them (a pod's env is the
    tenant's, up to the 1.5 MiB etcd stores)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    labels = meta.get("labels") or {}
    kept_meta = {k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp") if k in meta}
    kept_meta["ownerReferences"] = _controller_refs(pod)
    kept_meta["labels"] = {k: labels[k] for k in POD_LABELS if k in labels}
    kept_spec: Dict = {
        key: [
            {"name": x.get("name")} for x in spec[key][:MAX_CONTAINERS_SEEN] if isinstance(x, dict)
        ]
        for key in ("initContainers", "containers")
        if isinstance(spec.get(key), list)
    }
    if spec.get("nodeName"):
        kept_spec["nodeName"] = spec["nodeName"]
    return {"metadata": kept_meta, "spec": kept_spec, "status": _status_seen(pod)}


def _status_seen(pod: Dict) -> Dict:
    """A pod's status as its readers read it: the phase and times, and per container its
    name, readiness, restarts and state's reason and exit code, each message cut to 1 KiB
    (the kubelet repeats the image, the tenant's, in a waiting container's)."""
    status = pod.get("status") or {}
    kept: Dict = {k: status[k] for k in ("phase", "reason", "startTime") if k in status}
    for key in ("initContainerStatuses", "containerStatuses"):
        found = status.get(key)
        if isinstance(found, list):
            seen = found[:MAX_CONTAINERS_SEEN]
            kept[key] = [_container_seen(s) for s in seen if isinstance(s, dict)]
    return kept


def _container_seen(status: Dict) -> Dict:
    kept: Dict = {k: status[k] for k in ("name", "ready", "restartCount", "started") if k in status}
    for key in ("state", "lastState"):
        state = status.get(key)
        if isinstance(state, dict):
            kept[key] = {
                name: {
                    k: str(v)[:1024] if k == "message" else v
                    for k, v in detail.items()
                    if k in ("reason", "exitCode", "message", "startedAt", "finishedAt")
                }
                for name, detail in state.items()
                if isinstance(detail, dict)
            }
    return kept


def read(
    remote: RemoteCluster,
    namespace: str,
    name: str,
    copy_uid: str,
    narrow: Mapping[str, str] | None = None,
    until: float | None = None,
) -> tuple[list[Dict], list[Dict]]:
    """Our copy's Jobs and pods on `remote` (listed by the TrainJob's own label, kept by
    owner), at most MAX_PODS pods; `narrow`: the pods' list narrowed further (more labels,
    or `metadata.name`); `until`: a time.monotonic() all its reads end by. ApiException or
    TransportError when the worker cannot say."""
    jobs, pods, _ = read_some(remote, namespace, name, copy_uid, narrow, until=until)
    return jobs, pods


def read_some(
    remote: RemoteCluster,
    namespace: str,
    name: str,
    copy_uid: str,
    narrow: Mapping[str, str] | None = None,
    most: int = MAX_PODS,
    until: float | None = None,
) -> tuple[list[Dict], list[Dict], bool]:
    """`read` of at most `most` pods, and whether the worker has more of them."""
    selector = f"{c.JOBSET_NAME_LABEL}={name}"
    # their metadata alone: a Job's pod template is its tenant's to size (up to 1.5 MiB)
    jobs, _ = list_some(
        remote,
        c.JOB.path(namespace, None),
        MAX_JOBS,
        keep=job_seen,
        until=until,
        accept=METADATA_LIST,
        labelSelector=selector,
    )
    query: dict[str, str] = {"labelSelector": selector}
    for key, value in (narrow or {}).items():
        if key == "metadata.name":
            query["fieldSelector"] = f"metadata.name={value}"
        else:
            query["labelSelector"] += f",{key}={value}"
    pods, more = list_some(
        remote, POD.path(namespace, None), most, keep=pod_seen, until=until, **query
    )
    owners = {copy_uid}
    if jobset_controller(jobs, name):
        owners |= _our_jobset(remote, namespace, name, copy_uid, until)
    owned_jobs, owned_pods = ours(owners, jobs, pods)
    return owned_jobs, owned_pods, more


def _our_jobset(
    remote: RemoteCluster, namespace: str, name: str, copy_uid: str, until: float | None = None
) -> set[str]:
    """The UID of the JobSet `name` when our copy controls it (as Trainer makes it); none when
    it is another's, gone, or our identity there may not read JobSets."""
    try:
        jobset = remote.cluster.api.get_json(
            JOBSET.object_path(namespace, name), timeout=_read_timeout(until)
        )
    except ApiException as exc:
        if exc.status in (403, 404):
            return set()
        raise
    if not isinstance(jobset, dict) or controller_uid(jobset) != copy_uid:
        return set()
    uid = (jobset.get("metadata") or {}).get("uid")
    return {str(uid)} if uid else set()


def usage(
    remote: RemoteCluster,
    namespace: str,
    name: str,
    pods: Iterable[Dict],
    until: float | None = None,
) -> tuple[dict[str, PodUsage], str | None]:
    """The CPU and memory the worker's metrics API last measured for `pods` (ours, listed
    before; at most MAX_PODS read), by pod name, and why there are none when the worker
    cannot say: it serves no metrics API, or our identity there may not read it. Asked only
    while a pod runs."""
    running = {
        str(p["metadata"]["name"])
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
    }
    if not running:
        return {}, None
    try:
        items, _ = list_some(
            remote,
            POD_METRICS.path(namespace, None),
            MAX_PODS,
            until=until,
            labelSelector=f"{c.JOBSET_NAME_LABEL}={name}",
        )
    except ApiException as exc:
        if exc.status == 404:
            return (
                {},
                "the worker serves no metrics API (metrics.k8s.io); see docs/users/web-view.md",
            )
        return {}, f"the worker's metrics API: {exc}"
    except TransportError as exc:
        return {}, f"the worker's metrics API is unreachable: {exc}"
    return measured(items, running), None


def measured(items: Iterable[Any], pods: set[str]) -> dict[str, PodUsage]:
    """The usage of each of `pods` (by name) in a PodMetrics list; any other item, or one of
    an unexpected shape, is left out."""
    found = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            continue
        pod = str(item["metadata"].get("name"))
        summary = pod_usage(item) if pod in pods else None
        if summary is not None:
            found[pod] = summary
    return found


def _read_timeout(until: float | None) -> float:
    """One read's timeout: READ_SECONDS, or what is left before `until` (TransportError when
    nothing is)."""
    if until is None:
        return READ_SECONDS
    left = until - time.monotonic()
    if left <= 0:
        raise TransportError(pycurl.E_OPERATION_TIMEDOUT, "no time left for this read")
    return min(READ_SECONDS, left)


def list_some(
    remote: RemoteCluster,
    path: str,
    most: int,
    keep: Callable[[Dict], Dict] | None = None,
    until: float | None = None,
    accept: str = JSON,
    **query: Any,
) -> tuple[list[Dict], bool]:
    """`list_pages` of a list on a worker."""
    return list_pages(remote.cluster.api, path, most, keep, until, accept, **query)


def list_pages(
    api: ApiClient,
    path: str,
    most: int,
    keep: Callable[[Dict], Dict] | None = None,
    until: float | None = None,
    accept: str = JSON,
    **query: Any,
) -> tuple[list[Dict], bool]:
    """At most `most` items of a list, read in pages of PAGE (each item cut down by `keep`
    as its page comes), and whether there are more; every page by `until` (a
    time.monotonic(); TransportError past it). `accept` METADATA_LIST: the items' metadata
    alone (PartialObjectMetadata), none of what else the objects hold."""
    items: list[Dict] = []
    token = None
    while True:
        want = min(PAGE, most - len(items))
        data = api.request(
            "GET",
            path,
            query={**query, "limit": want, "continue": token},
            timeout=_read_timeout(until),
            accept=accept,
        )
        # each item cut down as it is decoded, a large page an item at a time
        page = decode_list(data, lambda i: keep(i) if keep and isinstance(i, dict) else i)
        del data
        items += [i for i in page["items"] if isinstance(i, dict)]
        token = (page.get("metadata") or {}).get("continue")
        del page  # not held while the next page comes
        if len(items) >= most or not token:
            # a server that ignores `limit` (metrics-server's PodMetrics) sends all at once
            return items[:most], len(items) > most or bool(token)
