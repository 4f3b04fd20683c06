"""Pure parts of the bed: config validation, ports, kubeconfigs, Kueue manifest rendering."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from clusters import builds
from clusters.config import BedConfig, Port, load_config
from clusters.errors import BedError
from clusters.kube import build_kubeconfig
from clusters.kueue import build_config, shipped_config


def test_default_topology_is_manager_and_two_workers() -> None:
    cfg = BedConfig()
    assert [(c.name, c.role) for c in cfg.clusters] == [
        ("manager", "manager"),
        ("worker1", "worker"),
        ("worker2", "worker"),
    ]
    assert all(c.nodes for c in cfg.workers)
    assert cfg.port("manager", Port.APISERVER) == 21002
    assert cfg.port("worker2", Port.KUEUE_WEBHOOK) == 21046


def test_ports_never_overlap_between_clusters() -> None:
    cfg = BedConfig()
    ports = [cfg.port(c.name, p) for c in cfg.clusters for p in Port]
    assert len(ports) == len(set(ports))


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bed.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": "Worker_1", "role": "worker"}]}))
    with pytest.raises(BedError, match=r"clusters\.0\.name"):
        load_config(path)
    path.write_text(
        yaml.safe_dump(
            {"clusters": [{"name": "a", "role": "worker"}, {"name": "a", "role": "worker"}]}
        )
    )
    with pytest.raises(BedError, match="repeated"):
        load_config(path)
    path.write_text(yaml.safe_dump({"base_port": 80}))
    with pytest.raises(BedError, match="base_port"):
        load_config(path)
    path.write_text("clusters: [")
    with pytest.raises(BedError, match="not valid YAML"):
        load_config(path)


def test_manager_with_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="a manager runs no pods"):
        BedConfig.model_validate(
            {"clusters": [{"name": "m", "role": "manager", "nodes": [{"count": 1}]}]}
        )


def test_kubeconfig_is_self_contained() -> None:
    kc = build_kubeconfig("w1", "https://127.0.0.1:1", b"CA", "u", b"CERT", b"KEY")
    assert kc["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:1",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
    }
    assert kc["users"][0]["user"] == {
        "client-certificate-data": base64.b64encode(b"CERT").decode(),
        "client-key-data": base64.b64encode(b"KEY").decode(),
    }
    text = yaml.safe_dump(kc)
    for forbidden in (
        "insecure-skip-tls-verify",
        "tokenFile",
        "exec",
        "auth-provider",
        "certificate-authority:",
        "client-certificate:",
    ):
        assert forbidden not in text


def test_build_keys_change_with_pins() -> None:
    etcd = builds.BUILDS["etcd"]
    other = builds.Build("etcd", "v9.9.9", etcd.packages, ["-X a.b=c"])
    assert etcd.key().startswith(f"etcd-{builds.ETCD_VERSION}-")
    assert etcd.key() != other.key()


def test_kubernetes_build_sets_real_version() -> None:
    flags = " ".join(builds.BUILDS["kubernetes"].ldflags)
    assert "k8s.io/component-base/version.gitVersion=v1.36." in flags
    assert "k8s.io/client-go/pkg/version.gitVersion=v1.36." in flags


KUEUE_ARGS = {
    "namespace": "kueue-system",
    "webhook_port": 1,
    "metrics_port": 2,
    "health_port": 3,
    "cert_dir": Path("/c"),
}


def test_kueue_config_treats_trainjob_as_external_and_gates_multikueue_on_manager() -> None:
    args = KUEUE_ARGS
    manager = build_config(**args, manager=True)  # type: ignore[arg-type]
    worker = build_config(**args, manager=False)  # type: ignore[arg-type]
    assert manager["integrations"] == {
        "frameworks": ["batch/job"],
        "externalFrameworks": ["TrainJob.v1alpha1.trainer.kubeflow.org"],
    }
    assert manager["featureGates"]["MultiKueue"] is False and "multiKueue" not in manager
    assert "MultiKueue" not in worker["featureGates"]
    # The bed's coexist mode: Kueue's own MultiKueue on the manager, Kueue's default origin.
    assert BedConfig.model_validate({"multikueue_mode": "coexist"}).multikueue_mode == "coexist"
    coexist = build_config(**args, manager=True, multikueue=True)  # type: ignore[arg-type]
    assert coexist["featureGates"]["MultiKueue"] is True
    assert coexist["multiKueue"]["origin"] == "multikueue"
    assert "MultiKueue" not in build_config(**args, manager=False, multikueue=True)["featureGates"]  # type: ignore[arg-type]
    assert manager["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/c"}
    assert manager["health"]["healthProbeBindAddress"] == "127.0.0.1:3"


def test_a_tests_feature_gates_reach_every_clusters_kueue_over_the_beds_own() -> None:
    gates = {"MultiKueueOrchestratedPreemption": True, "VisibilityOnDemand": True}
    for manager in (True, False):
        cfg = build_config(**KUEUE_ARGS, manager=manager, gates=gates)  # type: ignore[arg-type]
        assert cfg["featureGates"]["MultiKueueOrchestratedPreemption"] is True
        assert cfg["featureGates"]["VisibilityOnDemand"] is True
    plain = build_config(**KUEUE_ARGS, manager=False)  # type: ignore[arg-type]
    assert plain["featureGates"] == {"VisibilityOnDemand": False}


def test_kueue_keeps_wait_for_pods_ready_on_with_the_beds_short_times() -> None:
    config = BedConfig()
    assert config.wait_for_pods_ready.timeout_seconds == 20
    kueue = build_config(
        namespace="kueue-system",
        webhook_port=1,
        metrics_port=2,
        health_port=3,
        cert_dir=Path("/c"),
        manager=False,
        pods_ready_timeout=config.wait_for_pods_ready.timeout_seconds,
        requeue_backoff_base=config.wait_for_pods_ready.backoff_base_seconds,
    )
    assert kueue["waitForPodsReady"] == {
        "timeout": "20s",
        "requeuingStrategy": {"backoffBaseSeconds": 5},
    }
    assert "DisableWaitForPodsReady" not in kueue["featureGates"]


def test_the_peer_pipeline_runs_kueues_own_trainjob_integration_and_multikueue() -> None:
    args = KUEUE_ARGS
    manager = build_config(**args, manager=True, peer=True)  # type: ignore[arg-type]
    worker = build_config(**args, manager=False, peer=True)  # type: ignore[arg-type]
    for cfg in (manager, worker):
        assert cfg["integrations"] == {
            "frameworks": ["batch/job", "trainer.kubeflow.org/trainjob"],
            "externalFrameworks": [],
        }
    assert manager["featureGates"]["MultiKueue"] is True and "multiKueue" in manager
    assert "MultiKueue" not in worker["featureGates"]


def test_a_mixed_fleet_runs_trainer_where_asked_and_kueues_integration_on_its_workers() -> None:
    """The mixed bed: worker2 runs Trainer, JobSet and Kueue's own TrainJob integration;
    worker1 our worker controller with the external one; the manager Trainer beside the
    dispatcher, on ports the dispatcher's replicas leave free, without JobSet's controller."""
    from clusters import peer
    from clusters.config import mixed_bed_config

    config = mixed_bed_config()
    manager, ours, theirs = (config.cluster(n) for n in ("manager", "worker1", "worker2"))
    assert [config.runs_trainer(c) for c in (manager, ours, theirs)] == [True, False, True]
    assert [config.kueue_runs_trainjobs(c) for c in (manager, ours, theirs)] == [
        False,
        False,
        True,
    ]
    here = Path("/nonexistent")
    assert [c.name for c in peer.components(config, manager, here)] == ["trainer"]
    assert [c.name for c in peer.components(config, theirs, here)] == ["jobset", "trainer"]
    assert peer.components(config, ours, here) == []
    # `down` stops whatever an earlier bed ran, wherever it ran
    assert [c.name for c in peer.components(config, ours, here, every=True)] == [
        "jobset",
        "trainer",
    ]
    dispatcher_ports = range(0, 6)  # two replicas, three ports each (clusters/install.py)
    assert not set(peer.trainer_ports(manager)) & set(dispatcher_ports)
    assert Port.CONTROLLER_BASE + max(peer.trainer_ports(manager)) < config.port_stride
    worker = build_config(**KUEUE_ARGS, manager=False, trainjobs=True)  # type: ignore[arg-type]
    assert worker["integrations"]["frameworks"] == ["batch/job", "trainer.kubeflow.org/trainjob"]
    assert worker["integrations"]["externalFrameworks"] == []


def test_peer_webhooks_are_renamed_per_project_and_served_on_loopback() -> None:
    from clusters.peer import webhook_configurations

    rendered = [
        {"kind": "Service", "metadata": {"name": "webhook-service"}},
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                {
                    "name": "vjobset.kb.io",
                    "clientConfig": {
                        "service": {"name": "webhook-service", "path": "/validate-jobset"}
                    },
                }
            ],
        },
    ]
    (out,) = webhook_configurations(rendered, "jobset", "https://127.0.0.1:9", b"CA")
    assert out["metadata"] == {"name": "jobset-validating-webhook-configuration"}
    assert out["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:9/validate-jobset",
        "caBundle": "Q0E=",
    }


def test_kueue_runs_with_its_shipped_concurrency_and_client_limits_on_every_bed() -> None:
    """Kueue's release sets per-kind reconciler concurrency (Workload: 10, ...) and its API
    client's limits; both pipelines of the bed keep them."""
    shipped = shipped_config(
        builds.module_source_dir("kueue", f"sigs.k8s.io/kueue@{builds.KUEUE_VERSION}")
    )
    assert shipped["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 10
    for peer in (False, True):
        for manager in (False, True):
            cfg = build_config(**KUEUE_ARGS, manager=manager, peer=peer, shipped=shipped)  # type: ignore[arg-type]
            assert cfg["controller"] == shipped["controller"]
            assert cfg["clientConnection"] == shipped["clientConnection"]
    peer_manager = build_config(**KUEUE_ARGS, manager=True, peer=True, shipped=shipped)  # type: ignore[arg-type]
    assert peer_manager["multiKueue"] == {"origin": "multikueue"}  # Kueue's 1 min GC interval


def test_the_peers_controllers_run_with_their_shipped_concurrency_and_client_limits(
    tmp_path: Path,
) -> None:
    """Trainer's release ships TrainJob concurrency 5 and an API client of 50 qps / 100
    burst; JobSet's ships neither (its binary's defaults). The peer bed runs them so."""
    from clusters import peer

    (tmp_path / "c").write_text("cert")
    (tmp_path / "k").write_text("key")
    config = BedConfig.model_validate({"pipeline": "peer"})
    peer.write_configs(config, config.workers[0], tmp_path, tmp_path / "c", tmp_path / "k")
    trainer = yaml.safe_load((tmp_path / "trainer-config.yaml").read_text())
    assert trainer["controller"]["groupKindConcurrency"]["TrainJob.trainer.kubeflow.org"] == 5
    assert trainer["clientConnection"] == {"qps": 50, "burst": 100}
    jobset = yaml.safe_load((tmp_path / "jobset-config.yaml").read_text())
    assert "controller" not in jobset and "clientConnection" not in jobset


def test_the_peers_controllers_run_as_their_releases_service_accounts_and_are_audited() -> None:
    """Trainer's and JobSet's RBAC as their manifests ship it, bound to the ServiceAccounts
    the bed runs them as; Kueue's MultiKueue identity may manage TrainJobs and Workloads; the
    peer bed's audit policy records all three namespaces' ServiceAccounts, ours records ours."""
    from clusters import bed, peer
    from clusters.kube import render

    docs = peer.worker_rbac(render)
    bound = {
        (sub["namespace"], sub["name"])
        for doc in docs
        if doc["kind"] == "ClusterRoleBinding"
        for sub in doc["subjects"]
        if sub["kind"] == "ServiceAccount"
    }
    accounts = {
        (doc["metadata"]["namespace"], doc["metadata"]["name"])
        for doc in docs
        if doc["kind"] == "ServiceAccount"
    }
    for identity in [*peer.IDENTITIES.values(), peer.MULTIKUEUE_IDENTITY]:
        assert identity in bound and identity in accounts
    role = next(d for d in docs if d["metadata"]["name"] == "multikueue-sa-role")
    assert any(
        "trainjobs" in rule["resources"] and "create" in rule["verbs"] for rule in role["rules"]
    )
    groups = bed.audit_policy(BedConfig(pipeline="peer-lifted"))["rules"][0]["userGroups"]
    assert groups == [
        "system:serviceaccounts:jobset-system",
        "system:serviceaccounts:kubeflow-system",
        "system:serviceaccounts:kueue-system",
    ]
    ours = bed.audit_policy(BedConfig())["rules"][0]["userGroups"]
    assert ours == ["system:serviceaccounts:trainjob-system"]


def test_the_lifted_kueue_build_patches_a_copy_of_kueues_module(tmp_path: Path) -> None:
    """The patch applies to the pinned Kueue, in a copy that a `replace` points the build at;
    the module cache is untouched, and the patch is part of the build's cache key."""
    build = builds.BUILDS["kueue-lifted"]
    modfile = builds._patched_modfile(build, tmp_path)
    target = "pkg/controller/admissionchecks/multikueue/multikueuecluster.go"
    assert "restConfig.QPS = -1" in (tmp_path / "src" / target).read_text()
    source = builds.module_source_dir("kueue", build.patched)
    assert "restConfig.QPS = -1" not in (source / target).read_text()
    assert f"replace sigs.k8s.io/kueue => {tmp_path / 'src'}" in modfile.read_text()
    assert build.key() != builds.BUILDS["kueue"].key()
