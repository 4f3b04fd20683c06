"""A TrainJob's record of its runs on the manager (dispatcher/decisions/placements.py): read,
written."""

from __future__ import annotations

import logging

import orjson

from dispatcher.decisions.placements import (
    KEY,
    LABEL,
    TRAINJOB_ANNOTATION,
    Ended,
    entries_of,
    name_of,
    runs,
    with_entry,
)
from dispatcher.workers import log_tails
from kubebase.kinds import CONFIG_MAP
from kubebase.objects import Dict
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from kubecontrol.controller import own_namespace
from trainjob_api.story import Run
from trainjob_api.views import ConfigMapView, TrainJobView

log = logging.getLogger(__name__)

# The records' kind, as log_tails.sweep deletes them: with their TrainJob, and a namespace's
# oldest beyond its bound (settings.placements_per_namespace).
RECORDS = log_tails.Records(LABEL, TRAINJOB_ANNOTATION)


def record(manager: Cluster, trainjob: TrainJobView, entry: Ended) -> None:
    """Add `entry` to the TrainJob's record (best effort: a failure is logged)."""
    uid = str(trainjob.uid or "")
    name, namespace = name_of(uid), own_namespace()
    try:
        found = _record(manager, name, namespace)
        entries = with_entry(entries_of(found), entry)
        if entries is None:
            return
        body: Dict = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {LABEL: uid},
                "annotations": {TRAINJOB_ANNOTATION: f"{trainjob.namespace}/{trainjob.name}"},
            },
            "data": {KEY: orjson.dumps(entries).decode()},
        }
        if found is None:
            manager.create(CONFIG_MAP, body)
        else:
            body["metadata"]["resourceVersion"] = found.resource_version
            manager.replace(CONFIG_MAP, body)
        log.info(
            "run recorded",
            extra={
                "trainjob": f"{trainjob.namespace}/{trainjob.name}",
                "worker": entry.worker,
                "reason": entry.reason,
            },
        )
    except ApiException as exc:
        log.warning(
            "placement not recorded",
            extra={"trainjob": f"{trainjob.namespace}/{trainjob.name}", "error": str(exc)},
        )


def _record(manager: Cluster, name: str, namespace: str) -> ConfigMapView | None:
    found = manager.get_or_none(CONFIG_MAP, name, namespace)
    return None if found is None else ConfigMapView(found)


def read(manager: Cluster, trainjob_uid: str) -> list[Dict]:
    return entries_of(_record(manager, name_of(trainjob_uid), own_namespace()))


def story(manager: Cluster, trainjob: TrainJobView, admitted_at: str | None) -> list[Run]:
    """`placements.runs` from the TrainJob's record."""
    return runs(read(manager, str(trainjob.uid or "")), trainjob, admitted_at)
