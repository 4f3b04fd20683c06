"""Carrying out a worker pass's plan (plan.py), the one module that writes for a pass: the
Kueue integration's writes, the hold of a TrainJob with no queue, then the TrainJob's objects,
its Jobs' patches, its status and Events."""

from __future__ import annotations

import logging

import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubebase.objects import Dict, OwnerReference
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster, guarded_write
from trainjob.jobframework_io import execute_queue_plan
from trainjob.naming import owner_of
from trainjob.ownership import made_for_trainjob
from trainjob_api import constants as c
from trainjob_api.views import TrainJobView
from worker_controller import builders
from worker_controller.context import Context
from worker_controller.decide import Blocked, Plan
from worker_controller.plan import Hold, PassPlan


def _ssh_secret(name: str, namespace: str, owner: OwnerReference, trainjob: str) -> Dict:
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return builders.build_extra_object(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/ssh-auth",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"ssh-privatekey": private, "ssh-publickey": public},
        },
        owner,
        trainjob,
    )


log = logging.getLogger("worker_controller")


# Kinds the controller watches: whether one is there is the cache's to say, every pass (one
# deleted is made again); the others are remembered as made.
WATCHED = frozenset({"Job", "Service"})
BLOCKED_RETRY_SECONDS = 10.0  # a blocked TrainJob tries again after this, and on any event


def execute_pass(ctx: Context, trainjob: TrainJobView, plan: PassPlan) -> Blocked | None:
    """Carry out one pass's plan (plan.py), in order: the Kueue integration's writes, or the
    hold of a TrainJob with no queue; then the TrainJob's own part (`execute`). Returns why
    an object the TrainJob needs could not be made."""
    if plan.queue is not None:
        execute_queue_plan(ctx.cluster, trainjob.raw, plan.queue, ctx.memory)
    if plan.hold is not None:
        _hold(ctx, trainjob, plan.hold)
    if plan.trainjob is None:
        return None
    made = ctx.made.setdefault(str(trainjob.uid or ""), set())
    return execute(ctx.cluster, trainjob, plan.trainjob, made)


def _hold(ctx: Context, trainjob: TrainJobView, hold: Hold) -> None:
    """Kueue's manageJobsWithoutQueueName: a Warning says why it waits (once), and a running
    TrainJob is suspended (guarded by the version the plan saw: a pass planned from a version
    we wrote from since, or one that conflicts, waits for the watch's next)."""
    uid, (namespace, name) = str(trainjob.uid or ""), trainjob.key
    if hold.tell:
        ctx.held_told.add(uid)
        ctx.cluster.post_event(
            trainjob.raw,
            "Warning",
            c.REASON_NO_QUEUE,
            f"metadata.labels[{c.KUEUE_QUEUE_NAME_LABEL}] is not set, and Kueue's "
            "manageJobsWithoutQueueName holds such a TrainJob suspended on this cluster until it "
            "names a LocalQueue",
            name=f"{name}.{uid[:8]}.noqueuename",
        )
    if hold.suspend:
        version = str(trainjob.resource_version)
        guarded_write(
            ctx.memory,
            ("TrainJob", namespace, name),
            version,
            lambda: ctx.cluster.patch(
                c.TRAINJOB,
                name,
                namespace,
                {"metadata": {"resourceVersion": version}, "spec": {"suspend": True}},
            ),
        )


def execute(
    cluster: Cluster,
    trainjob: TrainJobView,
    plan: Plan,
    made: set[tuple[str, str]] | None = None,
) -> Blocked | None:
    """Carry out `plan`; returns why an object the TrainJob needs could not be made (then
    nothing after it is made in this pass: no Job mounts a claim that is not ours). `made`:
    the (kind, name) of unwatched objects already made (or found ours) for this TrainJob,
    which are not made again; added to as objects are made."""
    namespace = trainjob.namespace
    where = {"cluster": cluster.name, "trainjob": f"{namespace}/{trainjob.name}"}
    blocked = _make(cluster, trainjob, plan, where, set() if made is None else made)
    for obj in plan.patch:
        meta = obj["metadata"]
        try:
            cluster.patch(c.JOB, meta["name"], meta["namespace"], obj)
            log.debug("Job patched", extra={**where, "job": meta["name"]})
        except ApiException as exc:
            if exc.status == 404:  # gone since it was read: its watch event brings the next pass
                log.debug("Job gone: not patched", extra={**where, "job": meta["name"]})
                continue
            if exc.status == 409:  # written since it was read (a resume names the version it
                # was planned from): the write's watch event brings the next pass
                log.debug(
                    "Job changed since it was read: not patched",
                    extra={**where, "job": meta["name"]},
                )
                continue
            if exc.status in (400, 422):  # (422 too for another Job made under the name)
                log.warning(
                    "Job not patched",
                    extra={**where, "job": meta["name"], "error": api_message(exc)},
                )
                blocked = blocked or Blocked(
                    c.REASON_REFUSED_BY_API,
                    f"the API refuses Job {meta['name']}: {api_message(exc)}",
                )
                continue
            raise
    if plan.status is not None:
        try:
            cluster.patch_status(c.TRAINJOB, trainjob.raw, plan.status)
        except ApiException as exc:
            if exc.status == 409:  # a newer version exists; its watch event reconciles again
                log.debug("status conflict: retrying on the next event", extra=where)
                return blocked
            if exc.status == 404:
                return blocked
            raise
    for name, uid in plan.delete:  # a restart's old Jobs, or Jobs asking otherwise: pods first
        cluster.delete(c.JOB, name, namespace, propagation="Foreground", uid=uid)
        log.info(
            "Job deleted (of an earlier restart, or asking otherwise)", extra={**where, "job": name}
        )
    for event in plan.events:
        cluster.post_event(trainjob.raw, event.type, event.reason, event.message, event.name)
        say = log.warning if event.type == "Warning" else log.info
        say("Event", extra={**where, "reason": event.reason, "note": event.message})
    return blocked


def _make(
    cluster: Cluster,
    trainjob: TrainJobView,
    plan: Plan,
    where: dict[str, str],
    made: set[tuple[str, str]],
) -> Blocked | None:
    """Create what the plan makes and is not made yet, in order (the Jobs last), stopping at
    the first object that cannot be."""
    ssh = None
    if plan.ssh_secret and ("Secret", plan.ssh_secret) not in made:  # a key pair made once
        owner = owner_of(trainjob)
        ssh = _ssh_secret(plan.ssh_secret, trainjob.namespace, owner, trainjob.name)
    jobs = [o for o in plan.create if o["kind"] == "Job"]
    first = [o for o in plan.create if o["kind"] != "Job"]
    for obj in [*first, *([ssh] if ssh else []), *jobs]:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in made:
            continue
        blocked = _create(cluster, trainjob, obj)
        if blocked is not None:
            log.warning(
                "blocked", extra={**where, "reason": blocked.reason, "why": blocked.message}
            )
            return blocked
        if obj["kind"] not in WATCHED:
            made.add(key)
        log.debug("made", extra={**where, "kind": obj["kind"], "object": obj["metadata"]["name"]})
    return None


def _create(cluster: Cluster, trainjob: TrainJobView, obj: Dict) -> Blocked | None:
    """Create `obj`. One of that name already there is fine when we made it for this TrainJob
    (ownership.made_for_trainjob); anyone else's is a collision, never adopted or written over.
    One gone between the create's 409 and the read (a deleted claim its finalizer held) is
    created again, and one being deleted waits for the next pass: none is taken for made that
    is going or gone (the Jobs would mount nothing, and unwatched objects are made once)."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    for _ in range(2):
        try:
            cluster.create(c.kind_of(obj), obj)
            return None
        except ApiException as exc:
            if exc.status in (400, 422):
                return Blocked(
                    c.REASON_REFUSED_BY_API, f"the API refuses {kind} {name}: {api_message(exc)}"
                )
            if exc.status == 404:  # a kind the API no longer serves (a PodGroup's CRD deleted)
                return Blocked(
                    c.REASON_REFUSED_BY_API,
                    f"the API does not serve {kind} ({obj.get('apiVersion', '')}): "
                    f"{api_message(exc)}",
                )
            if exc.status != 409:
                raise
        found = cluster.get_or_none(c.kind_of(obj), name, obj["metadata"]["namespace"])
        if found is not None and (found.get("metadata") or {}).get("deletionTimestamp"):
            break  # ours or not, it goes: taken for made, nothing would make it again
        if found is not None and made_for_trainjob({"kind": kind, **found}, trainjob.raw):
            return None  # ours, made by an earlier pass
        if found is not None:
            return Blocked(
                c.REASON_NAME_TAKEN,
                f"{kind} {name!r} exists and was not made for this TrainJob; it is left as it "
                "is, and the TrainJob waits until it is renamed or deleted",
            )
    return Blocked(  # being deleted, or gone and made again meanwhile: the next pass tries
        c.REASON_NAME_TAKEN, f"{kind} {name!r} is being deleted; it is made once it is gone"
    )


def api_message(exc: ApiException) -> str:
    """The API server's own message of a refusal (its Status), else its reason."""
    try:
        message = orjson.loads(exc.body).get("message") if exc.body else None
    except (orjson.JSONDecodeError, AttributeError):
        message = None
    return str(message or exc.reason)[:1000]
