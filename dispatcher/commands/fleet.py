"""Join a worker to the fleet, or drain and remove one, in one command each, run by a platform
engineer with the manager's kubeconfig:

    trainjob-fleet join --name worker3 --worker-kubeconfig <(kubectl config view --raw \\
        --minify --context worker3) --server https://worker3.example.com:6443
    trainjob-fleet remove --name worker3
    trainjob-fleet list

`join` makes the worker's Secret on the manager (as `trainjob-worker-secret` does: a token of
the identity deploy/worker installs there), its MultiKueueCluster naming that Secret, adds it to
the MultiKueueConfig (`--config`, `multikueue` as the runbook names it; made with this worker
when there is none), then waits until the dispatcher reaches it (`Active`). With
`--cluster-profile NAME` instead of a kubeconfig, the MultiKueueCluster names that
ClusterProfile and no Secret is made. Run again, it changes nothing that is already so.

`remove` takes the worker out of the MultiKueueConfig first: it gets nothing new, and what runs
there runs to its end (the dispatcher watches a Workload's worker until it is done). It waits
until no Workload on the manager runs there, then deletes the MultiKueueCluster and the Secret.
Objects it did not make (a Secret or MultiKueueCluster without its label) are named and left
alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from kubernetes import client, config

from dispatcher.commands.worker_secret import LABEL, SecretError, add_worker_arguments, make_secret
from kubebase.objects import Dict

KUEUE = ("kueue.x-k8s.io", "v1beta2")
SAY_EVERY = 10.0  # seconds between progress lines while waiting
DRAIN_POLL = 10.0  # seconds between looks at what still runs on a worker being removed
PAGE = 500  # Workloads listed at a time
MAX_CLUSTERS = 20  # a MultiKueueConfig's clusters, as Kueue's CRD allows
MEMBER = "trainjob.dev/fleet-worker"  # on a MultiKueueCluster `join` made: the worker's name


class FleetError(Exception):
    """Why a command stopped; said on stderr, exit status 1."""


def _say(message: str) -> None:
    print(f"[fleet] {message}", file=sys.stderr, flush=True)


class Manager:
    """The manager cluster's objects a fleet change touches."""

    def __init__(self, api: client.ApiClient, namespace: str, config_name: str) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.namespace, self.config_name = namespace, config_name

    def cluster(self, name: str) -> Dict | None:
        try:
            found: Dict = self.custom.get_cluster_custom_object(*KUEUE, "multikueueclusters", name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def find_config(self) -> Dict | None:
        try:
            found: Dict = self.custom.get_cluster_custom_object(
                *KUEUE, "multikueueconfigs", self.config_name
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def config(self) -> Dict:
        found = self.find_config()
        if found is None:
            raise FleetError(f"MultiKueueConfig {self.config_name} not found (--config names it)")
        return found

    def create_config(self, clusters: list[str]) -> bool:
        """The MultiKueueConfig, made with `clusters`; False when someone made it meanwhile."""
        body = {
            "apiVersion": "/".join(KUEUE),
            "kind": "MultiKueueConfig",
            "metadata": {"name": self.config_name},
            "spec": {"clusters": clusters},
        }
        try:
            self.custom.create_cluster_custom_object(*KUEUE, "multikueueconfigs", body)
        except client.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def set_clusters(
        self, change: Callable[[list[str]], list[str]], create: bool = False
    ) -> list[str]:
        """Change the MultiKueueConfig's clusters, guarded by its resourceVersion (tried again
        when someone wrote it meanwhile); the list as written. `create`: make the config when
        there is none."""
        for _ in range(5):
            found = self.find_config() if create else self.config()
            if found is None:
                want = change([])
                if self.create_config(want):
                    return want
                continue
            have = list(found["spec"].get("clusters") or [])
            want = change(have)
            if want == have:
                return have
            if len(want) > MAX_CLUSTERS:
                raise FleetError(
                    f"MultiKueueConfig {self.config_name} has {len(have)} clusters, Kueue's "
                    f"most: remove one, or give this worker's queues a config of their own"
                )
            body = {
                "metadata": {"resourceVersion": found["metadata"]["resourceVersion"]},
                "spec": {"clusters": want},
            }
            try:
                self.custom.patch_cluster_custom_object(
                    *KUEUE, "multikueueconfigs", self.config_name, body
                )
                return want
            except client.ApiException as exc:
                if exc.status != 409:
                    raise FleetError(
                        f"MultiKueueConfig {self.config_name}: {exc.status} {_message(exc)}"
                    ) from exc
        raise FleetError(f"MultiKueueConfig {self.config_name} kept changing; run again")

    def running_on(self, worker: str) -> list[str]:
        """The manager Workloads dispatched to `worker` and not finished (read a page at a
        time: a manager may hold many)."""
        found, token = [], None
        while True:
            page = self.custom.list_cluster_custom_object(
                *KUEUE, "workloads", limit=PAGE, _continue=token
            )
            found += [
                f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
                for wl in page["items"]
                if (wl.get("status") or {}).get("clusterName") == worker and not _finished(wl)
            ]
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return found


def _finished(wl: Dict) -> bool:
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (wl.get("status") or {}).get("conditions") or []
    )


def _message(exc: client.ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)


def _active(cluster: Dict | None) -> Dict:
    for cond in ((cluster or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Active":
            return dict(cond)
    return {}


def _wait(what: str, done: Callable[[], str | None], timeout: float, every: float = 1.0) -> None:
    """Until `done` returns None (asked every `every` s); it returns what is still awaited,
    said every SAY_EVERY s."""
    deadline = time.monotonic() + timeout
    said = 0.0
    while (left := done()) is not None:
        if time.monotonic() > deadline:
            raise FleetError(f"{what}: not within {timeout:.0f}s: {left}")
        if time.monotonic() - said >= SAY_EVERY:
            _say(f"{what}: {left}")
            said = time.monotonic()
        time.sleep(every)


def join(
    manager: Manager, secret: Dict | None, name: str, timeout: float, profile: str | None = None
) -> None:
    """`secret` (a worker reached by kubeconfig) or `profile` (by a ClusterProfile)."""
    source = (
        {"clusterProfileRef": {"name": profile}}
        if secret is None
        else {"kubeConfig": {"locationType": "Secret", "location": secret["metadata"]["name"]}}
    )
    if secret is not None:
        _join_secret(manager, secret, name)
    # 2. The MultiKueueCluster, naming that Secret or profile.
    found = manager.cluster(name)
    if found is None:
        manager.custom.create_cluster_custom_object(
            *KUEUE,
            "multikueueclusters",
            {
                "apiVersion": "/".join(KUEUE),
                "kind": "MultiKueueCluster",
                "metadata": {"name": name, "labels": {MEMBER: name}},
                "spec": {"clusterSource": source},
            },
        )
        _say(f"MultiKueueCluster {name}: made")
    elif (found.get("spec") or {}).get("clusterSource") != source:
        raise FleetError(
            f"MultiKueueCluster {name} exists with another source "
            f"({(found.get('spec') or {}).get('clusterSource')}): left alone"
        )
    # 3. In the MultiKueueConfig, last (the Incremental strategy tries workers in its order).
    clusters = manager.set_clusters(
        lambda have: have if name in have else [*have, name], create=True
    )
    _say(f"MultiKueueConfig {manager.config_name}: {', '.join(clusters)}")

    # 4. Until the dispatcher reaches it.
    def not_active() -> str | None:
        cond = _active(manager.cluster(name))
        if cond.get("status") == "True":
            return None
        return f"{cond.get('reason', 'no condition yet')}: {cond.get('message', '')}".strip()

    _wait(f"MultiKueueCluster {name} Active", not_active, timeout)
    _say(f"{name} joined: TrainJobs on queues with the MultiKueue check may go there now")


def _join_secret(manager: Manager, secret: Dict, name: str) -> None:
    # 1. The Secret: ours (our label, for this worker) or none yet.
    meta = secret["metadata"]
    try:
        have = manager.core.read_namespaced_secret(meta["name"], manager.namespace)
        if (have.metadata.labels or {}).get(LABEL) != name:
            raise FleetError(
                f"Secret {manager.namespace}/{meta['name']} exists and is not this worker's "
                f"(no label {LABEL}={name}): left alone; remove it or choose another --name"
            )
        version = have.metadata.resource_version
        body = {**secret, "metadata": {**meta, "resourceVersion": version}}
        manager.core.replace_namespaced_secret(meta["name"], manager.namespace, body)
        _say(f"Secret {manager.namespace}/{meta['name']}: token renewed")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        manager.core.create_namespaced_secret(manager.namespace, secret)
        _say(f"Secret {manager.namespace}/{meta['name']}: made")


def remove(manager: Manager, name: str, timeout: float) -> None:
    # 1. Nothing new goes there.
    def without(have: list[str]) -> list[str]:
        rest = [c for c in have if c != name]
        if not rest and have:
            raise FleetError(
                f"{name} is the only cluster of MultiKueueConfig {manager.config_name} "
                "(Kueue wants one at least): join another first"
            )
        return rest

    clusters = manager.set_clusters(without)
    _say(f"MultiKueueConfig {manager.config_name}: {', '.join(clusters)} ({name} gets nothing new)")

    # 2. What runs there runs to its end.
    def running() -> str | None:
        left = manager.running_on(name)
        return f"{len(left)} still running there: {', '.join(left[:5])}" if left else None

    _wait(f"{name} drained", running, timeout, every=DRAIN_POLL)
    # 3. Its MultiKueueCluster and Secret, if they are what `join` made.
    secret_name = f"{name}-secret"
    found = manager.cluster(name)
    source = ((found or {}).get("spec") or {}).get("clusterSource") or {}
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    # ours: labelled by `join`, or (made before the label) naming the Secret `join` makes
    ours = labels.get(MEMBER) == name or (
        (source.get("kubeConfig") or {}).get("location") == secret_name
    )
    if found is not None and ours:
        manager.custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", name)
        _say(f"MultiKueueCluster {name}: deleted")
    elif found is not None:
        _say(f"MultiKueueCluster {name} was not made by join ({source}): left alone")
    try:
        have = manager.core.read_namespaced_secret(secret_name, manager.namespace)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        have = None
    if have is not None and (have.metadata.labels or {}).get(LABEL) == name:
        manager.core.delete_namespaced_secret(secret_name, manager.namespace)
        _say(f"Secret {manager.namespace}/{secret_name}: deleted")
    elif have is not None:
        _say(f"Secret {manager.namespace}/{secret_name} is not labelled {LABEL}={name}: left alone")
    _say(f"{name} removed")


def list_workers(manager: Manager) -> None:
    clusters = manager.config()["spec"].get("clusters") or []
    for name in clusters:
        cond = _active(manager.cluster(name))
        state = "Active" if cond.get("status") == "True" else cond.get("reason") or "unknown"
        print(f"{name}\t{state}\t{len(manager.running_on(name))} running")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trainjob-fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="the manager's kubeconfig (default: as kubectl)")
    parser.add_argument("--manager-context", help="its context (default: current)")
    parser.add_argument("--config", default="multikueue", help="the MultiKueueConfig's name")
    sub = parser.add_subparsers(dest="command", required=True)
    joining = sub.add_parser("join", help="a worker into the fleet")
    add_worker_arguments(joining, required=False)
    joining.add_argument(
        "--cluster-profile",
        help="name the worker by this ClusterProfile in Kueue's namespace instead of a "
        "kubeconfig (the dispatcher's clusterProfiles setting on)",
    )
    joining.add_argument("--timeout", type=float, default=120, help="seconds to wait for Active")
    removing = sub.add_parser("remove", help="a worker out of the fleet, once drained")
    removing.add_argument("--name", required=True, help="the MultiKueueCluster's name")
    removing.add_argument("--namespace", default="kueue-system", help="Kueue's namespace")
    removing.add_argument(
        "--timeout", type=float, default=3600, help="seconds to wait for what runs there"
    )
    listing = sub.add_parser("list", help="the fleet's workers, their state, what runs there")
    listing.add_argument("--namespace", default="kueue-system", help="Kueue's namespace")
    args = parser.parse_args(argv)
    if args.command == "join" and bool(args.worker_kubeconfig) == bool(args.cluster_profile):
        parser.error("join: give --worker-kubeconfig or --cluster-profile (one of them)")
    try:
        api = config.new_client_from_config(
            config_file=args.kubeconfig, context=args.manager_context
        )
    except Exception as exc:
        print(f"error: the manager's kubeconfig: {exc}", file=sys.stderr)
        return 2
    manager = Manager(api, args.namespace, args.config)
    try:
        if args.command == "join" and args.cluster_profile:
            join(manager, None, args.name, args.timeout, profile=args.cluster_profile)
        elif args.command == "join":
            join(manager, make_secret(args), args.name, args.timeout)
        elif args.command == "remove":
            remove(manager, args.name, args.timeout)
        else:
            list_workers(manager)
    except SecretError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except FleetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except client.ApiException as exc:
        print(f"error: the manager answered {exc.status}: {_message(exc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
