"""Carrying out dispatch plans: remote creates/deletes, check states, status back, GC."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import kopf

from dispatcher.clusters import Registry
from dispatcher.dispatch import DispatchPlan
from trainjob import constants as c
from trainjob.kube import ApiException, Cluster
from trainjob.models import parse_trainjob
from trainjob.queueing import expected_workload_name
from trainjob.workload import KUEUE_API

Dict = dict[str, Any]
log = logging.getLogger("dispatcher")


def _where(obj: Dict) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def execute_dispatch(
    manager: Cluster, registry: Registry, wl: Dict, trainjob: Dict, check: str, plan: DispatchPlan
) -> None:
    for action in plan.remote:
        remote = registry.get(action.cluster)
        if remote is None:
            continue
        meta = action.obj["metadata"]
        key = (
            action.cluster,
            action.verb,
            action.obj["kind"],
            meta.get("namespace", ""),
            meta["name"],
        )
        if not registry.first_time(key):
            continue
        try:
            if action.verb == "create":
                remote.cluster.create(action.obj)
            else:
                remote.cluster.delete(
                    action.obj["apiVersion"],
                    action.obj["kind"],
                    meta["name"],
                    meta.get("namespace"),
                )
            log.info(
                "[%s] %s %s %s", action.cluster, action.verb, action.obj["kind"], _where(action.obj)
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning(
                    "[%s] cannot %s %s %s: %s",
                    action.cluster,
                    action.verb,
                    action.obj["kind"],
                    _where(action.obj),
                    exc.reason,
                )
        except Exception as exc:  # an unreachable worker must not stop the others
            log.warning(
                "[%s] cannot %s %s: %s", action.cluster, action.verb, _where(action.obj), exc
            )
    name, ns = wl["metadata"]["name"], wl["metadata"]["namespace"]
    status_patch: Dict = {}
    if plan.cluster_name is not None:
        # Kueue accepts clusterName only from the nominated ones, and never both at once.
        status_patch["clusterName"] = plan.cluster_name
        status_patch["nominatedClusterNames"] = None
    elif plan.nominated is not None:
        status_patch["nominatedClusterNames"] = plan.nominated or None
    if plan.check_state is not None:
        state, message = plan.check_state
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        checks = []
        for entry in (wl.get("status") or {}).get("admissionChecks") or []:
            if entry.get("name") == check:
                changed = entry.get("state") != state
                entry = {**entry, "state": state, "message": message[:32768]}
                if changed or not entry.get("lastTransitionTime"):
                    entry["lastTransitionTime"] = now
            checks.append(entry)
        status_patch["admissionChecks"] = checks
        if state == "Retry":
            status_patch["clusterName"] = None
    if status_patch:
        try:
            manager.patch(
                KUEUE_API,
                "Workload",
                name,
                ns,
                {
                    "metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]},
                    "status": status_patch,
                },
                subresource="status",
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
    if plan.trainjob_status is not None:
        try:
            manager.patch_status(trainjob, plan.trainjob_status)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
    for etype, reason, message in plan.events:
        manager.post_event(trainjob, etype, reason, message)
        log.info("[%s] %s: %s: %s", manager.name, _where(trainjob), reason, message)


def delete_remotes(registry: Registry, trainjob: Dict, origin: str) -> list[str]:
    """Delete a manager TrainJob's remote TrainJob and Workload everywhere; the clusters that
    could not be reached are returned (the caller retries)."""
    meta = trainjob["metadata"]
    try:
        wl_name = expected_workload_name(parse_trainjob(trainjob))
    except Exception:
        wl_name = None
    pending = []
    for name, remote in list(registry.remotes.items()):
        if not remote.connected:
            pending.append(name)
            continue
        try:
            remote.cluster.delete(
                f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}",
                "TrainJob",
                meta["name"],
                meta["namespace"],
            )
            if wl_name:
                remote.cluster.delete(KUEUE_API, "Workload", wl_name, meta["namespace"])
        except Exception as exc:  # treat as unreachable: retried later
            log.warning("[%s] cannot delete remote objects of %s: %s", name, _where(trainjob), exc)
            pending.append(name)
    return pending


def collect_garbage(
    registry: Registry, trainjobs: kopf.Index[Any, Dict], workloads: kopf.Index[Any, Dict]
) -> None:
    """Remote Workloads and TrainJobs with our origin whose manager object is gone."""
    for name, remote in list(registry.remotes.items()):
        if not remote.connected:
            continue
        for kind, index in (("TrainJob", trainjobs), ("Workload", workloads)):
            for obj in remote.items(kind):
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                if index.get(key):
                    continue
                try:
                    remote.cluster.delete(
                        obj.get("apiVersion")
                        or (
                            KUEUE_API
                            if kind == "Workload"
                            else f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}"
                        ),
                        kind,
                        key[1],
                        key[0],
                    )
                    log.info("[%s] garbage-collected orphan %s %s/%s", name, kind, *key)
                except Exception as exc:
                    log.warning("[%s] cannot collect %s %s/%s: %s", name, kind, *key, exc)
