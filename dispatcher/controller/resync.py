"""The safety net: every resync period (sooner when a worker came or went, or this replica
began to lead), the TrainJob CRD checked, every TrainJob in flight queued again, our
MultiKueueClusters and AdmissionChecks looked at, and, every GC interval, the orphan sweep
(planned by removal.orphans from the workers' watch caches, carried out by execute.sweep)."""

from __future__ import annotations

import logging
import time

from dispatcher.controller import execute, placements_io
from dispatcher.controller.admissionchecks import queue_checks, queue_cluster
from dispatcher.controller.context import Context
from dispatcher.decisions import removal
from dispatcher.decisions.removal import Held
from dispatcher.workers import log_tails
from dispatcher.workers.remote import RemoteCluster
from kubebase.objects import Dict
from kubecontrol.schema_bounds import version_schema
from trainjob import jobframework
from trainjob.caches import Caches
from trainjob.crd import TRAINJOB_CRD, crd_problem
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, TrainJobView

log = logging.getLogger("dispatcher")


def _settled(ctx: Context, tj: TrainJobView) -> bool:
    """Finished, its Workload finished, and nothing of it left on any worker: no pass can
    change anything, so periodic resyncs skip it (its own events still queue it)."""
    if tj.deleting or not tj.finished:
        return False
    ns = tj.namespace
    wl_name = jobframework.expected_workload_name(tj)
    wl = ctx.caches.workload(ns, wl_name)
    if wl is not None and not wl.finished:
        return False
    return not any(
        remote.get("TrainJob", ns, tj.name) or remote.get("Workload", ns, wl_name)
        for remote in list(ctx.workers.remotes.values())
    )


def check_trainjob_crd(ctx: Context) -> None:
    """Read the TrainJob CRD and keep what is wrong with it (trainjob/crd.py) in the context,
    logged once when it appears and when it is mended."""
    try:
        found = ctx.manager.get_or_none(c.CUSTOM_RESOURCE_DEFINITION, TRAINJOB_CRD)
    except Exception as exc:  # unreadable (a network blip, RBAC): judge again next pass
        log.debug(
            "TrainJob CRD not read", extra={"cluster": ctx.settings.cluster_name, "error": str(exc)}
        )
        return
    problem = crd_problem(None if found is None else ObjectView(found))
    ctx.trainjob_schema = version_schema(found, c.TRAINER_VERSION)
    if problem != ctx.crd_problem:
        if problem:
            log.error(
                "TrainJob CRD not ours",
                extra={"cluster": ctx.settings.cluster_name, "why": problem},
            )
        else:
            log.info(
                "TrainJob CRD carries our status again",
                extra={"cluster": ctx.settings.cluster_name},
            )
    ctx.crd_problem = problem


def resync_loop(ctx: Context) -> None:
    """Level-based safety net, each resync period (sooner when a worker's connection changed):
    every worker connected as its MultiKueueCluster says, and every MultiKueueCluster, our
    AdmissionChecks and every TrainJob in flight queued; plus the orphan sweep on the
    workers."""
    last_gc = time.monotonic()
    while not ctx.stop.is_set():
        ctx.resync_now.wait(ctx.settings.resync_seconds)
        ctx.resync_now.clear()
        if ctx.stop.is_set():
            continue
        check_trainjob_crd(ctx)  # every replica: each one answers the webhooks
        if not ctx.synced.is_set() or not ctx.leads():
            continue
        ctx.queue.log_stats(ctx.settings.cluster_name)
        caches = ctx.caches
        try:
            for mkc in caches.clusters():
                try:  # one broken MultiKueueCluster must not hold up the others, or the pass
                    ctx.workers.connect(mkc)
                except Exception:
                    log.exception(
                        "MultiKueueCluster not connected",
                        extra={"cluster": ctx.settings.cluster_name, "worker": mkc.name},
                    )
                queue_cluster(ctx, mkc.name)
            queue_checks(ctx)
            for key in caches.trainjob_keys():
                tj = caches.trainjob(*key)
                if tj is not None and tj.multikueue and not _settled(ctx, tj):
                    ctx.queue.resync(key)
            if ctx.settings.gc_interval and time.monotonic() - last_gc >= ctx.settings.gc_interval:
                last_gc = time.monotonic()
                deleted = execute.sweep(ctx.workers, removal.orphans(_held(ctx), caches))
                if deleted:
                    log.info(
                        "orphan copies deleted",
                        extra={"cluster": ctx.settings.cluster_name, "count": deleted},
                    )
                sweep_records(ctx, caches)
        except Exception:  # keep resyncing whatever one pass hit
            log.exception("resync pass failed", extra={"cluster": ctx.settings.cluster_name})


def _held(ctx: Context) -> list[Held]:
    """Each worker's copies as its watch caches show them (none of a worker not connected)."""
    return [
        Held(name, remote.connected, _copies(remote) if remote.connected else ())
        for name, remote in list(ctx.workers.remotes.items())
    ]


def _copies(remote: RemoteCluster) -> tuple[Dict, ...]:
    return (*remote.items("TrainJob"), *remote.items("Workload"))


def sweep_records(ctx: Context, caches: Caches) -> None:
    """The records the leader keeps of TrainJobs go with them, and beyond their bounds: the
    log tails, then the records of runs (one per TrainJob sent back; a namespace keeps its
    newest placements_per_namespace)."""
    log_tails.sweep(ctx.manager, caches, log_tails.bounds(ctx.settings))
    per_namespace = ctx.settings.placements_per_namespace
    bounds = log_tails.Bounds(1_000_000, per_namespace=per_namespace)
    log_tails.sweep(ctx.manager, caches, bounds, placements_io.RECORDS)
