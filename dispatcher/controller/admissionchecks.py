"""Our AdmissionChecks and MultiKueueClusters: which checks are ours, the MultiKueueConfig
each names, and the `Active` conditions of both, with Kueue's reasons.

Their status is reconciled through the work queue, each under a key of its own
(`StatusKey`): a watch event, a worker's connection change and the resync loop only queue
keys, and a failed write is tried again with the queue's backoff."""

from __future__ import annotations

from typing import TypeVar

from dispatcher.controller.context import Context
from dispatcher.decisions.keys import StatusKey
from dispatcher.workers.connections import manager_runtimes
from dispatcher.workers.kueue_status import set_active_condition
from kubebase.objects import Dict
from kubecontrol.admission import Getter
from trainjob.caches import Caches
from trainjob.queues import AdmissionCheckView, ClusterQueueView, MultiKueueConfigView
from trainjob_api import constants as c
from trainjob_api.views import ObjectView


def our_checks(ctx: Context, caches: Caches) -> dict[str, AdmissionCheckView]:
    return {
        ac.name: ac for ac in caches.checks() if ac.controller_name == ctx.settings.controller_name
    }


def config_of(
    check: AdmissionCheckView, caches: Caches
) -> tuple[MultiKueueConfigView | None, str | None]:
    """The MultiKueueConfig an AdmissionCheck's parameters name, or why there is none."""
    params = check.parameters
    problem = parameters_problem(params)
    if problem:
        return None, problem
    config = caches.config(str(params.get("name")))
    if config is None:
        return None, f"MultiKueueConfig {params.get('name')!r} not found"
    return config, None


def config_clusters(check: AdmissionCheckView, caches: Caches) -> list[str] | None:
    config = config_of(check, caches)[0]
    return config.clusters if config is not None else None


def queue_checks(ctx: Context) -> None:
    """Queue the status of each of our AdmissionChecks (a config, a cluster or a worker's
    connection changed: any of them may be affected)."""
    for name in our_checks(ctx, ctx.caches):
        ctx.queue.add(StatusKey("AdmissionCheck", name))


def queue_cluster(ctx: Context, name: str) -> None:
    ctx.queue.add(StatusKey("MultiKueueCluster", name))


def sync_status(ctx: Context, key: StatusKey) -> None:
    """One pass for a status key: the object from the cache, its conditions written when they
    changed (by the leader: the queue runs only there)."""
    caches = ctx.caches
    if key.kind == "AdmissionCheck":
        check = our_checks(ctx, caches).get(key.name)
        if check is not None:
            report_check(ctx, caches, check)
        return
    mkc = caches.cluster(key.name)
    if mkc is not None:
        runtimes = manager_runtimes(caches) if ctx.settings.check_runtimes else None
        ctx.workers.report(mkc, runtimes)


def report_check(ctx: Context, caches: Caches, check: AdmissionCheckView) -> None:
    """AdmissionCheck Active, with Kueue's reasons: BadConfig, NoUsableClusters or
    SomeActiveClusters (naming the missing and the inactive clusters), Active."""
    config, problem = config_of(check, caches)
    states: dict[str, bool | None] = {}
    for name in config.clusters if config is not None else []:
        exists = caches.cluster(name) is not None
        states[name] = _usable(ctx, caches, name) if exists else None
    set_active_condition(ctx.manager, check.raw, *check_active(problem, states))


def _usable(ctx: Context, caches: Caches, cluster: str) -> bool:
    """Connected, or not known to be down: a cluster still being connected after start-up
    counts as it was, so a restart does not turn the check (and its ClusterQueues) inactive."""
    remote = ctx.workers.get(cluster)
    if remote is not None and (remote.connected or remote.connecting):
        return True
    mkc = caches.cluster(cluster)
    return remote is None and mkc is not None and mkc.is_true("Active")


V = TypeVar("V", bound=ObjectView)


def cq_has_our_check(ctx: Context, cq_name: str, caches: Caches, get: Getter | None = None) -> bool:
    return our_check_on_cq(ctx, cq_name, caches, get) is not None


def our_check_on_cq(
    ctx: Context, cq_name: str, caches: Caches, get: Getter | None = None
) -> str | None:
    """The name of an admission check of ours a ClusterQueue uses, if any."""
    if not cq_name:
        return None
    get = get or ctx.manager.get_or_none
    cq = caches.cluster_queue(cq_name) or _view(
        ClusterQueueView, get(c.CLUSTER_QUEUE, cq_name, None)
    )
    if cq is None:
        return None
    for name in sorted(cq.admission_checks):
        # asked of the API only for a check made moments ago, not cached yet
        check = caches.check(name) or _view(AdmissionCheckView, get(c.ADMISSION_CHECK, name, None))
        if check is not None and check.controller_name == ctx.settings.controller_name:
            return name
    return None


def _view(view: type[V], found: Dict | None) -> V | None:
    return None if found is None else view(found)


def parameters_problem(params: Dict) -> str | None:
    """What is wrong with an AdmissionCheck's `spec.parameters` for MultiKueue, if anything."""
    if not params.get("name"):
        return "spec.parameters must name a MultiKueueConfig"
    if params.get("apiGroup") != c.KUEUE_GROUP or params.get("kind") != c.MULTIKUEUE_CONFIG_KIND:
        return (
            "spec.parameters must reference a kueue.x-k8s.io MultiKueueConfig, not "
            f"{params.get('apiGroup')!r}/{params.get('kind')!r}"
        )
    return None


def check_active(problem: str | None, clusters: dict[str, bool | None]) -> tuple[bool, str, str]:
    """(active, reason, message) of a MultiKueue AdmissionCheck, Kueue's way: the parameters'
    problem, else the config's clusters by name -> usable (None: no such MultiKueueCluster).
    Partly usable keeps it active (SomeActiveClusters) and names the others."""
    if problem is not None:
        return False, "BadConfig", f"Cannot load the AdmissionChecks parameters: {problem}"
    missing = [name for name, ok in clusters.items() if ok is None]
    inactive = [name for name, ok in clusters.items() if ok is False]
    if not missing and not inactive and clusters:
        return True, "Active", "The admission check is active"
    parts = []
    if missing:
        parts.append(f"Missing clusters: {missing}")
    if inactive:
        parts.append(f"Inactive clusters: {inactive}")
    if not clusters:
        parts.append("the MultiKueueConfig names no clusters")
    if len(missing) + len(inactive) < len(clusters):
        return True, "SomeActiveClusters", ", ".join(parts)
    return False, "NoUsableClusters", ", ".join(parts)
