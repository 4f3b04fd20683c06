"""Carry out a reconcile Plan against one cluster: apply, create-once secrets, status, Events."""

from __future__ import annotations

import logging
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster
from trainjob.naming import owner_of
from worker_controller import builders
from worker_controller.decide import Plan

Dict = dict[str, Any]


def _ssh_secret(name: str, namespace: str, owner: Dict, trainjob: str) -> Dict:
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


def execute(cluster: Cluster, trainjob: Dict, plan: Plan) -> None:
    meta = trainjob["metadata"]
    where = f"[{cluster.name}] {meta['namespace']}/{meta['name']}"
    for obj in plan.apply:
        try:
            cluster.apply(obj)
            log.debug("%s: applied %s %s", where, obj["kind"], obj["metadata"]["name"])
        except ApiException as exc:
            if exc.status in (409, 422):
                log.warning(
                    "%s: cannot apply %s %s: %s",
                    where,
                    obj["kind"],
                    obj["metadata"]["name"],
                    exc.reason,
                )
                continue
            raise
    if plan.ssh_secret:
        try:
            cluster.create(
                _ssh_secret(
                    plan.ssh_secret,
                    meta["namespace"],
                    owner_of(trainjob),
                    meta["name"],
                )
            )
        except ApiException as exc:
            if exc.status != 409:  # 409: it exists already, keep its keys
                raise
    if plan.status is not None:
        try:
            cluster.patch_status(trainjob, plan.status)
        except ApiException as exc:
            if exc.status == 409:  # a newer version exists; its watch event reconciles again
                log.debug("%s: status conflict, will retry on the next event", where)
                return
            if exc.status == 404:
                return
            raise
    for event in plan.events:
        cluster.post_event(trainjob, event.type, event.reason, event.message)
        say = log.warning if event.type == "Warning" else log.info
        say("%s: %s: %s", where, event.reason, event.message)
