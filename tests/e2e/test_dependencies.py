"""A TrainJob's Secrets and ConfigMaps follow it to the worker that runs it (manager + 2 workers
of the bed, the workers' identity given deploy/worker/with-dependencies as an operator would):
copied before its TrainJob, owned by its Workload copy and removed by the worker's own garbage
collector, updated while it runs, never written over a foreign object, held back while one
is missing. A pod reading them on a real node: tests/real/test_real_nodes.py."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.config import REPO_ROOT
from clusters.helpers.waiting import stays_false, wait_for
from clusters.kube import (
    Applier,
    api_client,
    load_manifests,
    service_account_token,
    write_token_kubeconfig,
)
from tests.support.multikueue import (
    HELD_SECONDS,
    TRAINER,
    MultiKueue,
    node_container,
    nothing_sent,
)

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]
LABEL = "trainjob.dev/copy-dependencies"
ACCESS = REPO_ROOT / "deploy" / "worker" / "with-dependencies" / "dependencies-rbac.yaml"
ENV = [
    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
    {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "train-config", "key": "lr"}}},
]


@contextlib.contextmanager
def dependencies_access(bed: Bed, workers: list[str]) -> Iterator[None]:
    """The manager's identity on `workers` may write Secrets and ConfigMaps (the component
    deploy/worker/with-dependencies), for the test's length."""
    objects = load_manifests(ACCESS.read_text())
    for worker in workers:
        Applier(bed.api(worker)).apply_all(objects)
    try:
        yield
    finally:
        for worker in workers:
            Applier(bed.api(worker)).delete_all(objects)


def _secret(value: str) -> Dict:
    data = {"token": base64.b64encode(value.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "data": data}


def opted_in(mk: MultiKueue, token: str = "s3cr3t", with_secret: bool = True) -> client.CoreV1Api:
    """The test namespace on the manager labelled by its admin, with the job's ConfigMap and
    (unless told otherwise) its Secret."""
    core = client.CoreV1Api(mk.bed.api(mk.manager))
    core.patch_namespace(mk.ns, {"metadata": {"labels": {LABEL: "true"}}})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "train-config"}}
    core.create_namespaced_config_map(mk.ns, {**config, "data": {"lr": "0.1"}})
    if with_secret:
        core.create_namespaced_secret(mk.ns, _secret(token))
    return core


def copies(mk: MultiKueue, worker: str) -> dict[str, Any]:
    """The Secrets and ConfigMaps of ours (by origin label) on `worker`, by Kind/name."""
    core = client.CoreV1Api(mk.bed.api(worker))
    ours = "kueue.x-k8s.io/multikueue-origin"
    found = {}
    for obj in core.list_namespaced_secret(mk.ns, label_selector=ours).items:
        found[f"Secret/{obj.metadata.name}"] = obj
    for obj in core.list_namespaced_config_map(mk.ns, label_selector=ours).items:
        found[f"ConfigMap/{obj.metadata.name}"] = obj
    return found


def test_the_jobs_secret_and_config_map_run_with_it_and_go_with_its_workload(bed: Bed) -> None:
    mk = MultiKueue(bed)
    with dependencies_access(bed, mk.workers):
        opted_in(mk)
        mk.submit("deps", run="20s", env=ENV)
        worker = mk.started_on("deps")
        got = copies(mk, worker)
        assert sorted(got) == ["ConfigMap/train-config", "Secret/hf-token"], sorted(got)
        token = got["Secret/hf-token"]
        assert base64.b64decode(token.data["token"]) == b"s3cr3t"
        owners = [(o.kind, o.name) for o in token.metadata.owner_references]
        wl = mk.remote_workloads(worker)[0]
        assert owners == [("Workload", wl["metadata"]["name"])]
        other = next(w for w in mk.workers if w != worker)
        assert copies(mk, other) == {}, "only the worker that runs it holds them"

        # Rotated on the manager while the job runs: the copy follows.
        core = client.CoreV1Api(bed.api(mk.manager))
        core.replace_namespaced_secret("hf-token", mk.ns, _secret("rotated"))
        wait_for(
            lambda: (
                base64.b64decode(
                    client.CoreV1Api(bed.api(worker))
                    .read_namespaced_secret("hf-token", mk.ns)
                    .data["token"]
                )
                == b"rotated"
            ),
            30,
            what="the rotated Secret on the worker",
        )
        mk.wait_until("deps", "Complete", timeout=120)

        # The TrainJob deleted: its copies go, and the worker's garbage collector takes the
        # dependencies with the Workload copy that owns them.
        mk.custom().delete_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", mk.ns, "trainjobs", "deps"
        )
        wait_for(lambda: copies(mk, worker) == {}, 90, what="the copies gone from the worker")


def test_a_tenants_own_runtime_goes_with_its_job_and_a_change_asking_more_sends_it_again(
    bed: Bed,
) -> None:
    """A TrainingRuntime of the job's namespace, on the manager only, in a namespace whose
    Secrets follow its jobs: copied to the worker that runs the job (its spec, our marks).
    The tenant then changes it to ask for 2 CPUs a node instead of 1 while the job runs: the
    copy follows, the job's copy there ends out of sync (never running pods bigger than the
    quota taken), and the job is sent again from a Workload made for 2, its pods there asking
    for 2. Once the job is gone, so is the runtime's copy."""
    mk = MultiKueue(bed)
    runtime = mk.tenant_runtime("team-runtime", cpu="1")
    Applier(bed.api(mk.manager)).apply(runtime)
    on_manager = mk.custom()
    with dependencies_access(bed, mk.workers):
        opted_in(mk)
        mk.submit(
            "own", run="600s", cpu=None, runtime="team-runtime", runtime_kind="TrainingRuntime"
        )
        worker = mk.started_on("own")
        sent = mk.get("own", worker)
        assert sent is not None
        copy = _runtime_copy(mk, worker)
        assert copy is not None and copy["spec"] == _runtime_spec(mk)
        assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"]
        first = mk.manager_workload("own")
        assert first is not None and _asks(first) == "1"
        node_container(runtime)["resources"] = {"requests": {"cpu": "2"}}
        on_manager.patch_namespaced_custom_object(
            *TRAINER, mk.ns, "trainingruntimes", "team-runtime", {"spec": runtime["spec"]}
        )
        again = wait_for(
            lambda: (
                (w := mk.manager_workload("own")) is not None
                and w["metadata"]["uid"] != first["metadata"]["uid"]
                and w
            ),
            180,
            what="the job's Workload made again for what its runtime asks now",
        )
        assert _asks(again) == "2"
        # The copy sent again (another UID; the first may be where it was, going), its pods.
        worker, resent = wait_for(
            lambda: _copy_other_than(mk, "own", sent["metadata"]["uid"]), 90, what="own sent again"
        )
        pods = wait_for(
            lambda: _pods_of_copy(mk, worker, "own", resent), 60, what=f"own's pods on {worker}"
        )
        asked = {ctr.resources.requests["cpu"] for pod in pods for ctr in pod.spec.containers}
        assert asked == {"2"}, asked
        copy = _runtime_copy(mk, worker)
        assert copy is not None and copy["spec"] == _runtime_spec(mk)
        on_manager.delete_namespaced_custom_object(*TRAINER, mk.ns, "trainjobs", "own")
        for each in mk.workers:
            wait_for(
                lambda w=each: _runtime_copy(mk, w) is None,
                120,
                what=f"the runtime's copy gone from {each} with the job",
            )


def _copy_other_than(mk: MultiKueue, name: str, uid: str) -> tuple[str, str] | None:
    """(worker, UID) of a copy of the TrainJob `name` other than the one of UID `uid`."""
    for worker in mk.workers:
        found = mk.get(name, worker)
        if found is not None and found["metadata"]["uid"] != uid:
            return worker, str(found["metadata"]["uid"])
    return None


def _pods_of_copy(mk: MultiKueue, worker: str, name: str, uid: str) -> list[Any]:
    """The running pods of the Jobs the copy of UID `uid` controls (not a copy's before it)."""
    jobs = client.BatchV1Api(mk.bed.api(worker)).list_namespaced_job(mk.ns).items
    its = {
        j.metadata.uid
        for j in jobs
        if any(o.uid == uid and o.controller for o in j.metadata.owner_references or ())
    }
    return [
        p
        for p in mk.pods(worker, name)
        if any(o.uid in its for o in p.metadata.owner_references or ())
    ]


def _runtime_copy(mk: MultiKueue, worker: str) -> Dict | None:
    try:
        found: Dict = mk.custom(worker).get_namespaced_custom_object(
            *TRAINER, mk.ns, "trainingruntimes", "team-runtime"
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def _runtime_spec(mk: MultiKueue) -> Dict:
    found: Dict = mk.custom().get_namespaced_custom_object(
        *TRAINER, mk.ns, "trainingruntimes", "team-runtime"
    )
    return found["spec"]


def _asks(wl: Dict) -> str:
    spec = wl["spec"]["podSets"][0]["template"]["spec"]
    return str(spec["containers"][0]["resources"]["requests"]["cpu"])


def test_a_foreign_secret_of_that_name_is_left_alone_and_the_job_runs_elsewhere(bed: Bed) -> None:
    mk = MultiKueue(bed)
    first, second = mk.workers
    theirs = _secret("theirs")
    theirs["metadata"]["labels"] = {"team": "theirs"}
    client.CoreV1Api(bed.api(first)).create_namespaced_secret(mk.ns, theirs)
    with dependencies_access(bed, mk.workers):
        opted_in(mk)
        mk.set_quota(second, "0")  # the first worker admits it first
        mk.submit("foreign", env=ENV)
        wait_for(
            lambda: "is not a copy from this manager" in _messages(mk, "foreign"),
            60,
            what="the name taken on the first worker said",
        )
        mk.set_quota(second, "16")
        mk.wait_until("foreign", "Complete", timeout=120)
        assert (mk.get("foreign") or {})["status"]["clusterName"] == second
    found = client.CoreV1Api(bed.api(first)).read_namespaced_secret("hf-token", mk.ns)
    assert base64.b64decode(found.data["token"]) == b"theirs"
    assert found.metadata.labels == {"team": "theirs"} and not found.metadata.owner_references


def test_a_missing_secret_holds_the_job_naming_it_and_a_worker_without_access_says_so(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    core = opted_in(mk, with_secret=False)
    mk.submit("waiting", env=ENV)
    missing = wait_for(
        lambda: mk.condition("waiting", "DependenciesMissing"), 60, what="DependenciesMissing"
    )
    assert missing["reason"] == "DependencyMissing", missing
    assert (
        "Secret 'hf-token'" in missing["message"]
        and "env[0].valueFrom.secretKeyRef" in (missing["message"])
    )
    nothing_sent(mk, "the Secret is missing")
    # The Secret made: it goes, to workers whose identity may not write Secrets (the chart's
    # default): each says so, and nothing runs there.
    core.create_namespaced_secret(mk.ns, _secret("s3cr3t"))
    wait_for(
        lambda: "worker.multikueueIdentity.dependencies" in _messages(mk, "waiting"),
        90,
        what="the workers' refusal said",
    )
    stays_false(lambda: mk.running_on("waiting"), HELD_SECONDS, what="it runs without access")
    with dependencies_access(bed, mk.workers):
        mk.wait_until("waiting", "Complete", timeout=180)


def _messages(mk: MultiKueue, name: str) -> str:
    """The check's message on the manager Workload and the TrainJob's Events."""
    wl = mk.manager_workload(name) or {}
    checks = (wl.get("status") or {}).get("admissionChecks") or []
    events = client.CoreV1Api(mk.bed.api(mk.manager)).list_namespaced_event(
        mk.ns, field_selector=f"involvedObject.name={name}"
    )
    return " ".join(
        [*(str(a.get("message")) for a in checks), *(e.message or "" for e in events.items)]
    )


def test_the_managers_identity_writes_only_its_own_copies_and_never_a_system_namespace(
    bed: Bed, tmp_path: Path
) -> None:
    """RBAC gives the identity create and update on every Secret and ConfigMap of the worker;
    the ValidatingAdmissionPolicy beside it (the review's N14) lets through only copies that
    carry MultiKueue's origin label, and none into kube-system or the product's namespace,
    whatever a leaked kubeconfig or a bug would send."""
    mk = MultiKueue(bed)
    worker = mk.workers[0]
    with dependencies_access(bed, [worker]):
        admin = bed.api(worker)
        token = service_account_token(admin, "trainjob-system", "trainjob-multikueue")
        kubeconfig = tmp_path / "identity.kubeconfig"
        write_token_kubeconfig(bed.kubeconfig(worker), token, kubeconfig)
        identity = client.CoreV1Api(api_client(kubeconfig))
        origin = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}

        def config_map(name: str, labels: Dict | None) -> Dict:
            meta: Dict = {"name": name, **({"labels": labels} if labels else {})}
            return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "b"}}

        def refused(call: Any, *args: Any) -> str:
            with pytest.raises(client.ApiException) as denied:
                call(*args)
            assert denied.value.status in (403, 422), denied.value
            return str(denied.value.body)

        attempts = iter(range(1000))

        def foreign_refused() -> str | None:
            """The policy's refusal of a foreign ConfigMap; None while it is not enforced yet
            (the API server loads a new policy within a second or so; RBAC's refusal of a
            grant not seen yet says something else)."""
            body = config_map(f"foreign-{next(attempts)}", None)
            try:
                identity.create_namespaced_config_map(mk.ns, body)
            except client.ApiException as exc:
                return str(exc.body) if "its own copies" in str(exc.body) else None
            return None

        wait_for(foreign_refused, 30, what="the policy to refuse a foreign ConfigMap")
        made = identity.create_namespaced_config_map(mk.ns, config_map("copy", origin))
        assert made.metadata.labels == origin
        client.CoreV1Api(admin).create_namespaced_config_map(mk.ns, config_map("theirs", None))
        assert "its own copies" in refused(
            identity.replace_namespaced_config_map, "theirs", mk.ns, config_map("theirs", origin)
        )
        corefile = config_map("coredns-sneaky", origin)
        assert "this namespace" in refused(
            identity.create_namespaced_config_map, "kube-system", corefile
        )
        token_secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "minted",
                "labels": origin,
                "annotations": {"kubernetes.io/service-account.name": "default"},
            },
            "type": "kubernetes.io/service-account-token",
        }
        assert "ServiceAccount token" in refused(
            identity.create_namespaced_secret, mk.ns, token_secret
        )
        for system in ("kube-system", "trainjob-system"):
            root_ca = identity.read_namespaced_config_map("kube-root-ca.crt", system)
            root_ca.data = {"ca.crt": "not a CA"}
            assert "this namespace" in refused(
                identity.replace_namespaced_config_map, "kube-root-ca.crt", system, root_ca
            )
        labelled = {**token_secret, "type": "Opaque", "metadata": {"name": "ok", "labels": origin}}
        assert identity.create_namespaced_secret(mk.ns, labelled).metadata.labels == origin
