"""The product as installed from deploy/: least privilege, its own certificates, metrics."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from clusters import builds, setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER, WORKER_CONTROLLER, metrics_text
from clusters.kube import api_client, service_account_token, write_token_kubeconfig
from dispatcher.commands.worker_secret import token_claims
from tests.support.multikueue import MultiKueue, replica_token

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]


def _as(kubeconfig: Path | dict[str, object]) -> client.ApiClient:
    """A client with an identity of the install (a replica's token, or a worker Secret's)."""
    if isinstance(kubeconfig, dict):
        cfg = client.Configuration()
        config.load_kube_config_from_dict(kubeconfig, client_configuration=cfg)
        return client.ApiClient(cfg)
    return api_client(kubeconfig)


def _status(call: object) -> int:
    try:
        call()  # type: ignore[operator]
    except client.ApiException as exc:
        return int(exc.status)
    return 200


def test_each_identity_can_do_what_its_code_needs_and_no_more(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    manager = bed.config.managers[0].name
    dispatcher = next(c for c in controllers if c.name == DISPATCHER)
    worker_ctrl = next(c for c in controllers if c.name == WORKER_CONTROLLER)
    as_dispatcher = client.CoreV1Api(_as(Path(dispatcher.env["KUBECONFIG"])))
    # Secrets: the kubeconfigs in Kueue's namespace; elsewhere read only (a job's dependencies,
    # copyDependencies on by default: docs/operators/security.md), never written.
    assert _status(lambda: as_dispatcher.list_namespaced_secret("kueue-system")) == 200
    assert _status(lambda: as_dispatcher.list_secret_for_all_namespaces(limit=1)) == 200
    nothing = {"metadata": {"name": f"nope-{uuid.uuid4().hex[:6]}"}}
    assert _status(lambda: as_dispatcher.create_namespaced_secret("default", nothing)) == 403
    assert _status(lambda: as_dispatcher.create_namespaced_config_map("default", nothing)) == 403
    # It runs nothing on the manager itself.
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="nope"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
    )
    assert _status(lambda: as_dispatcher.create_namespaced_pod("default", pod)) == 403
    # The kept log tails: ConfigMaps of its own namespace, written there only (above).
    assert _status(lambda: as_dispatcher.list_namespaced_config_map("trainjob-system")) == 200
    # ... and the record of a TrainJob's runs there, made once and then updated
    record = {"metadata": {"name": f"placements-{uuid.uuid4()}"}, "data": {"k": "1"}}
    made = as_dispatcher.create_namespaced_config_map("trainjob-system", record)
    made.data = {"k": "2"}
    name = made.metadata.name
    assert (
        _status(lambda: as_dispatcher.replace_namespaced_config_map(name, "trainjob-system", made))
        == 200
    )
    as_dispatcher.delete_namespaced_config_map(name, "trainjob-system")
    # The worker controller creates MPI key Secrets and reads one back only by its name (to
    # see whose it is when the name is taken): it lists none, nor ConfigMaps, which it makes
    # but never watches; it records Events and never patches one.
    as_worker_ctrl = client.CoreV1Api(_as(Path(worker_ctrl.env["KUBECONFIG"])))
    assert _status(lambda: as_worker_ctrl.list_namespaced_secret("default")) == 403
    assert _status(lambda: as_worker_ctrl.read_namespaced_secret("none", "default")) == 404
    assert _status(lambda: as_worker_ctrl.list_config_map_for_all_namespaces()) == 403
    assert _status(lambda: as_worker_ctrl.patch_namespaced_event("none", "default", {})) == 403
    assert _status(lambda: as_dispatcher.patch_namespaced_event("none", "default", {})) == 403
    # It counts its pods (status.podsStatus) and makes none: the Job controller does.
    ours = "trainjob.dev/trainjob-name"
    assert _status(lambda: as_worker_ctrl.list_pod_for_all_namespaces(label_selector=ours)) == 200
    assert _status(lambda: as_worker_ctrl.create_namespaced_pod("default", pod)) == 403
    # The identity the manager holds for a worker: TrainJobs and Workloads; it reads queues
    # (capacity-aware placement), claims (data placement) and pods, their logs and Events
    # (`kubectl trainjob`), and neither reads Secrets (without `dependencies`) nor makes pods.
    worker = bed.config.workers[0].name
    secret = client.CoreV1Api(bed.api(manager)).read_namespaced_secret(
        f"{worker}-secret", bed.config.kueue_namespace
    )
    remote = _as(yaml.safe_load(base64.b64decode(secret.data["kubeconfig"])))
    assert _status(lambda: client.CoreV1Api(remote).list_secret_for_all_namespaces()) == 403
    assert _status(lambda: client.CoreV1Api(remote).read_namespaced_secret("x", "default")) == 403
    assert _status(lambda: client.CoreV1Api(remote).list_pod_for_all_namespaces()) == 200
    claims = client.CoreV1Api(remote).list_persistent_volume_claim_for_all_namespaces
    assert _status(claims) == 200  # data placement
    assert _status(lambda: client.CoreV1Api(remote).create_namespaced_pod("default", pod)) == 403
    queues = client.CustomObjectsApi(remote)
    assert (
        _status(
            lambda: queues.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        )
        == 200
    )
    trainjobs = client.CustomObjectsApi(remote)
    assert (
        _status(
            lambda: trainjobs.list_cluster_custom_object(
                "trainer.kubeflow.org", "v1alpha1", "trainjobs"
            )
        )
        == 200
    )


def test_a_deleted_certificate_secret_is_restored_and_the_webhooks_keep_working(
    bed: Bed,
) -> None:
    manager = bed.config.managers[0].name
    core = client.CoreV1Api(bed.api(manager))
    name = "trainjob-dispatcher-webhook-cert"
    before = core.read_namespaced_secret(name, "trainjob-system").data["tls.crt"]
    core.delete_namespaced_secret(name, "trainjob-system")
    restored = wait_for(
        lambda: _read_or_none(core, name), 30, what="the certificate Secret written back"
    )
    assert restored.data["tls.crt"] == before  # the same certificate: caBundle stays right
    mk = MultiKueue(bed)
    created = mk.submit("after-cert")  # through the dispatcher's mutating webhook
    assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    mk.wait_until("after-cert", "Complete", timeout=90)


def _read_or_none(core: client.CoreV1Api, name: str) -> client.V1Secret | None:
    try:
        return core.read_namespaced_secret(name, "trainjob-system")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_metrics_name_the_work_done(bed: Bed, controllers: list[setup.Controller]) -> None:
    mk = MultiKueue(bed)
    mk.submit("measured")
    mk.wait_until("measured", "Complete", timeout=90)

    def scraped() -> str:
        return "\n".join(metrics_text(ctrl) for ctrl in controllers)

    text = scraped()
    for series in (
        'workqueue_depth{name="dispatch"}',
        'workqueue_adds_total{name="reconcile"}',
        "workqueue_work_duration_seconds_bucket",
        "workqueue_queue_duration_seconds_count",
        "multikueue_workloads_dispatched_total{cluster=",
        "multikueue_workloads_admitted_total{cluster=",
        "trainjob_dispatch_latency_seconds_count",
        'trainjob_remote_cluster_active{cluster="worker1"} 1.0',
        'trainjob_api_requests_total{cluster="manager",verb="PATCH"}',
        'trainjob_leader{lease="trainjob-system/trainjob-dispatcher"} 1.0',
    ):
        assert series in text, series


def _renew(kubeconfig: Path, namespace: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "trainjob-worker-secret"),
            "renew",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _token_ends(core: client.CoreV1Api, name: str, namespace: str) -> tuple[str, int]:
    secret = core.read_namespaced_secret(name, namespace)
    kubeconfig = yaml.safe_load(base64.b64decode(secret.data["kubeconfig"]))
    token = kubeconfig["users"][0]["user"]["token"]
    return token, int(token_claims(token)["exp"])


def _reconnects(controllers: list[setup.Controller], worker: str) -> int:
    line = re.compile(rf"kubeconfig changed: reconnecting cluster={re.escape(worker)}$", re.M)
    return sum(len(line.findall(c.log.read_text())) for c in controllers if c.name == DISPATCHER)


def test_worker_secrets_are_renewed_before_expiry_by_the_renewal_identity(
    bed: Bed, controllers: list[setup.Controller], tmp_path: Path
) -> None:
    """`trainjob-worker-secret renew` as the manager's CronJob runs it (its ServiceAccount):
    tokens far from their end are kept, those near it renewed with the token itself, a Secret
    it cannot renew is named and fails the run without stopping the others, and the
    dispatcher goes on with the new tokens."""
    mk = MultiKueue(bed)  # the MultiKueueClusters naming the Secrets, every worker Active
    manager = bed.config.managers[0].name
    namespace = bed.config.kueue_namespace
    core = client.CoreV1Api(bed.api(manager))
    kubeconfig = tmp_path / "renewal.kubeconfig"
    write_token_kubeconfig(
        bed.kubeconfig(manager),
        service_account_token(
            bed.api(manager), "trainjob-system", "trainjob-worker-secret-renewal"
        ),
        kubeconfig,
    )
    secrets = [f"{w.name}-secret" for w in bed.config.workers]
    before = {name: _token_ends(core, name, namespace) for name in secrets}
    reconnects = {w.name: _reconnects(controllers, w.name) for w in bed.config.workers}

    kept = _renew(kubeconfig, namespace, "--renew-before-seconds", "3600")
    assert kept.returncode == 0, kept.stderr
    for name in secrets:
        assert f"{namespace}/{name}: kept" in kept.stdout
        assert _token_ends(core, name, namespace) == before[name]

    # The bed's tokens last 48 h: ask for renewal below 49 h, for 72 h.
    broken = "broken-secret"
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=broken, labels={"trainjob.dev/worker-kubeconfig": "broken"}
            ),
            string_data={"kubeconfig": "not: [a kubeconfig"},
        ),
    )
    try:
        renewed = _renew(
            kubeconfig,
            namespace,
            "--renew-before-seconds",
            str(49 * 3600),
            "--duration-seconds",
            str(72 * 3600),
        )
    finally:
        core.delete_namespaced_secret(broken, namespace)
    assert renewed.returncode == 1, renewed.stdout
    assert (
        f"error: {namespace}/{broken}: BadKubeConfig: Secret {broken!r} key 'kubeconfig' is not "
        "valid YAML (line 1" in renewed.stderr
    ), renewed.stderr
    for name in secrets:
        assert f"{namespace}/{name}: renewed" in renewed.stdout
        token, ends = _token_ends(core, name, namespace)
        assert token != before[name][0]
        assert ends > before[name][1] + 20 * 3600

    for w in bed.config.workers:  # the dispatcher takes the new kubeconfigs up
        wait_for(
            lambda w=w: _reconnects(controllers, w.name) > reconnects[w.name],
            30,
            what=f"the dispatcher reconnecting to {w.name}",
        )
    mk.submit("after-renewal")
    mk.wait_until("after-renewal", "Complete", timeout=90)


def test_metrics_are_served_only_to_callers_allowed_to_read_them(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """As Kueue's: /metrics over HTTPS, the caller's token reviewed by the API server
    (TokenReview) and its access to /metrics asked (SubjectAccessReview); nothing on the plain
    health port but the probes."""
    for ctrl in controllers:
        assert ctrl.metrics and ctrl.metrics_token, ctrl.identity
        assert "trainjob_leader" in metrics_text(ctrl)  # the bed's reader is allowed
        with pytest.raises(urllib.error.HTTPError) as refused:
            metrics_text(ctrl, token="not-a-token")
        assert refused.value.code == 401
        # A real identity of the cluster that is not bound to the metrics reader ClusterRole.
        with pytest.raises(urllib.error.HTTPError) as forbidden:
            metrics_text(ctrl, token=replica_token(ctrl))
        assert forbidden.value.code == 403
        assert "may not get /metrics" in forbidden.value.read().decode()
        with pytest.raises(urllib.error.HTTPError) as plain:
            urllib.request.urlopen(f"http://127.0.0.1:{ctrl.health}/metrics", timeout=5)
        assert plain.value.code == 404


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("trainjob.spec.trainer.numNodes", "numNodes is the number of training nodes."),
        ("clustertrainingruntime.spec.mlPolicy", "mlPolicy provides the ML-specific parameters"),
        ("trainjob.status.clusterName", "Extension (not in Trainer v2.3): the worker cluster"),
        # Kubernetes types, typed as Trainer's CRDs type them (release/crd_schema.py).
        ("trainjob.spec.trainer.env.valueFrom.secretKeyRef.key", "The key of the secret"),
        ("trainjob.spec.trainer.resourcesPerNode.limits", "Limits describes the maximum amount"),
        (
            "clustertrainingruntime.spec.template.spec.replicatedJobs.template.spec.template"
            ".spec.containers.readinessProbe.tcpSocket",
            "TCPSocket specifies a connection to a TCP port.",
        ),
    ],
)
def test_kubectl_explain_says_what_a_field_is(bed: Bed, field: str, said: str) -> None:
    """Our CRDs carry a description on each field Kubeflow Trainer's describe (ours where we
    added the field): `kubectl explain` answers from the schema the API server publishes."""
    done = subprocess.run(
        [str(builds.binary("kubectl")), "--kubeconfig", str(bed.kubeconfig("manager")),
         "explain", field],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert said in " ".join(done.stdout.split()), done.stdout


def test_a_field_no_schema_has_is_refused_by_name(bed: Bed, tmp_path: Path) -> None:
    """Below a Kubernetes type (an env entry here) the schema is Trainer's, typed: kubectl's
    strict field validation refuses a misspelt field by its path (the API server kept it
    before, unread), and nothing is stored."""
    name = f"typo-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"env": [{"name": "A", "valeu": "1"}]},
                },
            }
        )
    )
    done = subprocess.run(
        [str(builds.binary("kubectl")), "--kubeconfig", str(bed.kubeconfig("manager")),
         "create", "-f", str(manifest)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert 'unknown field "spec.trainer.env[0].valeu"' in done.stderr, done.stderr
    custom = client.CustomObjectsApi(bed.api("manager"))
    with pytest.raises(client.ApiException) as absent:
        custom.get_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", name
        )
    assert absent.value.status == 404
