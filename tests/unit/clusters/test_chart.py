"""The Helm chart: it lints, deploy/ is its rendering, and its values do what they say."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from clusters import builds, chart
from clusters.config import REPO_ROOT
from clusters.errors import BedError
from clusters.kube import SAFE_LOADER
from dispatcher.settings import DispatcherSettings
from release import manifests
from tests.support.metrics import served_series
from worker_controller.settings import WorkerSettings

Dict = dict[str, Any]


def _by_kind(docs: list[Dict]) -> dict[tuple[str, str], Dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _container(docs: list[Dict]) -> Dict:
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "values",
    [
        {"role": "manager"},
        {"role": "worker"},
        {
            "role": "manager",
            "manager": {"mode": "Coexist"},
            "certificates": {"mode": "cert-manager"},
        },
        {
            "role": "worker",
            "metrics": {"serviceMonitor": {"enabled": True}},
            "worker": {"multikueueIdentity": {"viewAccess": True, "kueueMultiKueueAccess": True}},
            "image": {"digest": "sha256:" + "a" * 64},
        },
    ],
)
def test_the_chart_lints_strictly(values: Dict) -> None:
    out = chart.lint(values)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_deploy_is_the_charts_rendering() -> None:
    """Every file of deploy/ that the chart renders is what it renders now."""
    assert manifests.main(["--check"]) == 0


def test_a_missing_or_unknown_role_is_refused_by_name() -> None:
    for values in ({}, {"role": "both"}):
        with pytest.raises(BedError, match=r"/role.*'manager', 'worker'"):
            chart.template(values)


def test_the_webhooks_leave_kube_system_and_the_release_namespace_alone() -> None:
    for role in ("manager", "worker"):
        docs = chart.template({"role": role}, namespace="ml-platform")
        hooks = [
            hook
            for d in docs
            if d["kind"].endswith("WebhookConfiguration")
            for hook in d["webhooks"]
        ]
        assert hooks
        for hook in hooks:
            (expr,) = hook["namespaceSelector"]["matchExpressions"]
            assert expr["operator"] == "NotIn"
            assert expr["values"] == ["kube-system", "ml-platform"]
            assert hook["clientConfig"]["service"]["namespace"] == "ml-platform"


def test_the_workers_identity_for_the_manager_reads_what_the_story_reads_unless_told_not_to(
    tmp_path: Path,
) -> None:
    """By default the manager's identity on a worker may read what a TrainJob's story reads
    there, with those verbs only (no write, no Secret); viewAccess=false, or kustomize's
    without-view-access component, leaves it out."""

    def granted(docs: list[Dict]) -> set[tuple[str, str, str]]:
        return {
            (group, resource, verb)
            for (kind, name), doc in _by_kind(docs).items()
            if kind == "ClusterRole" and name.startswith("trainjob-multikueue")
            for rule in doc["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }

    story = {
        ("", "pods", "list"),
        ("", "pods/log", "get"),
        ("", "events", "list"),
        ("", "events", "watch"),
        ("batch", "jobs", "list"),
        ("jobset.x-k8s.io", "jobsets", "get"),
        ("metrics.k8s.io", "pods", "list"),
    }
    default = granted(chart.template({"role": "worker"}))
    assert story <= default
    assert not [g for g in default if g[1] in ("pods", "pods/log", "events") and g not in story]
    assert not [g for g in default if g[1] == "secrets"]
    off = granted(
        chart.template({"role": "worker", "worker": {"multikueueIdentity": {"viewAccess": False}}})
    )
    assert not story & off and off == default - story

    import shutil
    import subprocess

    from clusters import builds

    copy = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "deploy", copy / "deploy")
    shutil.copytree(REPO_ROOT / "crds", copy / "crds")
    overlay = copy / "deploy" / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../worker]\ncomponents: [../worker/without-view-access]\n"
    )
    out = subprocess.run(
        [str(builds.binary("kubectl")), "kustomize", str(overlay)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    without = [d for d in yaml.safe_load_all(out) if d]
    assert granted(without) == off
    kept = _by_kind(without)
    assert ("ClusterRole", "trainjob-multikueue-view") not in kept
    assert ("ClusterRoleBinding", "trainjob-multikueue-view") not in kept
    assert ("ClusterRoleBinding", "trainjob-multikueue") in kept  # the rest is untouched


def test_a_worker_that_runs_trainer_gets_the_managers_identity_and_nothing_else(
    tmp_path: Path,
) -> None:
    """worker.controller.enabled=false (deploy/worker-identity): the identity the manager
    reaches the worker as, with the same rights as beside our worker controller, and no
    controller, webhook, Service or role of ours that Trainer's release already has."""
    full = _by_kind(chart.template({"role": "worker"}))
    only = _by_kind(
        chart.template({"role": "worker", "worker": {"controller": {"enabled": False}}})
    )
    identity = {key for key in full if key[1].startswith("trainjob-multikueue")}
    assert identity and set(only) == identity  # not our CRDs either: Trainer's are there
    assert all(only[key] == full[key] for key in identity)
    assert not [k for k in only if k[0] in ("Deployment", "ValidatingWebhookConfiguration")]
    rendered = (REPO_ROOT / "deploy" / "worker-identity" / "manifests.yaml").read_text()
    assert {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(rendered) if d} == {
        (kind, name) for kind, name in identity
    }
    # and the worker's role is still required
    with pytest.raises(BedError, match=r"role"):
        chart.template({"worker": {"controller": {"enabled": False}}})


def test_every_user_may_read_cluster_runtimes_unless_told_not_to() -> None:
    """ClusterTrainingRuntimes are cluster-scoped: a namespace's `view` cannot grant them, so
    every authenticated user gets get/list/watch on them alone, on either role."""
    for role in ("manager", "worker"):
        docs = _by_kind(chart.template({"role": role}))
        name = "trainjob-dispatcher" if role == "manager" else "trainjob-worker-controller"
        reader = docs[("ClusterRole", f"{name}-cluster-runtimes-reader")]
        assert reader["rules"] == [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "resources": ["clustertrainingruntimes"],
                "verbs": ["get", "list", "watch"],
            }
        ]
        binding = docs[("ClusterRoleBinding", f"{name}-cluster-runtimes-reader")]
        assert binding["roleRef"]["name"] == f"{name}-cluster-runtimes-reader"
        assert binding["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:authenticated",
            }
        ]
        off = _by_kind(chart.template({"role": role, "clusterRuntimesReadable": False}))
        assert not [k for k in off if k[1].endswith("-cluster-runtimes-reader")]


def test_the_manager_says_which_trainer_api_it_serves_to_every_user_as_trainer_does() -> None:
    """kubeflow-trainer-public, as Trainer's manifests make it: the version of the Trainer API
    (the one our CRDs are typed as), readable by every authenticated user, that one
    ConfigMap only; on the manager only, and off when asked."""
    docs = _by_kind(chart.template({"role": "manager"}))
    public = docs[("ConfigMap", "kubeflow-trainer-public")]
    assert public["metadata"]["namespace"] == "trainjob-system"
    assert public["data"] == {"kubeflow_trainer_version": builds.TRAINER_API_VERSION}
    assert docs[("Role", "kubeflow-trainer-public")]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get"],
        }
    ]
    binding = docs[("RoleBinding", "kubeflow-trainer-public")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "kubeflow-trainer-public",
    }
    assert binding["metadata"]["namespace"] == "trainjob-system"
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]
    off = chart.template({"role": "manager", "manager": {"trainerPublic": {"enabled": False}}})
    worker = chart.template({"role": "worker"})
    for other in (off, worker):
        assert not [k for k in _by_kind(other) if k[1] == "kubeflow-trainer-public"]


def test_two_replicas_a_pdb_and_a_spread_by_default() -> None:
    for role in ("manager", "worker"):
        docs = _by_kind(chart.template({"role": role}))
        name = "trainjob-dispatcher" if role == "manager" else "trainjob-worker-controller"
        dep = docs[("Deployment", name)]
        assert dep["spec"]["replicas"] == 2
        assert docs[("PodDisruptionBudget", name)]["spec"]["maxUnavailable"] == 1
        (spread,) = dep["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
        assert spread["whenUnsatisfiable"] == "ScheduleAnyway"


def test_scheduling_and_image_values_reach_the_pod() -> None:
    values = {
        "role": "manager",
        "image": {"registry": "registry.example.com", "repository": "ml/tj", "tag": "1.2.3"},
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "podDisruptionBudget": {"enabled": False},
        "extraArgs": ["--workers=4"],
        "config": {"strategy": "Incremental", "leaderElect": True},
    }
    docs = _by_kind(chart.template(values))
    pod = docs[("Deployment", "trainjob-dispatcher")]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    container = _container(list(docs.values()))
    assert container["image"] == "registry.example.com/ml/tj:1.2.3"
    assert container["args"] == ["--workers=4"]
    assert ("PodDisruptionBudget", "trainjob-dispatcher") not in docs
    cron = docs[("CronJob", "trainjob-worker-secret-renewal")]
    (renew,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert renew["image"] == "registry.example.com/ml/tj:1.2.3"
    assert renew["command"][:2] == ["trainjob-worker-secret", "renew"]
    config = yaml.safe_load(
        docs[("ConfigMap", "trainjob-dispatcher-config")]["data"]["config.yaml"]
    )
    assert config["strategy"] == "Incremental"


@pytest.mark.parametrize(
    "values",
    [
        {"role": "manager"},
        {"role": "manager", "manager": {"mode": "Coexist"}, "kueueNamespace": "kueue"},
        {"role": "worker"},
        {"role": "worker", "certificates": {"mode": "cert-manager"}},
    ],
)
def test_the_rendered_config_is_one_the_controller_accepts(values: Dict, tmp_path: Path) -> None:
    """Every key the chart writes is a setting of the controller it configures."""
    docs = _by_kind(chart.template(values))
    model = DispatcherSettings if values["role"] == "manager" else WorkerSettings
    name = "trainjob-dispatcher" if values["role"] == "manager" else "trainjob-worker-controller"
    path = tmp_path / "config.yaml"
    path.write_text(docs[("ConfigMap", f"{name}-config")]["data"]["config.yaml"])
    argv = ["--config", str(path)]
    if values.get("certificates"):  # the mounted certificate's files must exist: stand-ins
        for key in ("cert", "key"):
            (tmp_path / key).write_text("")
            argv += [f"--webhook-{key}", str(tmp_path / key)]
    settings, _ = model.from_argv(argv, name, None)
    assert settings.leader_elect
    assert settings.leader_election_id == name
    if values["role"] == "manager":
        assert isinstance(settings, DispatcherSettings)
        assert settings.namespace == values.get("kueueNamespace", "kueue-system")
        assert settings.mode == values.get("manager", {}).get("mode", "Replace")


def test_an_image_digest_wins_over_the_tag() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    docs = chart.template({"role": "worker", "image": {"tag": "9.9.9", "digest": digest}})
    assert _container(docs)["image"] == f"ghcr.io/trainjob-dev/trainjob-multicluster@{digest}"
    with pytest.raises(BedError, match="/image/digest"):
        chart.template({"role": "worker", "image": {"digest": "latest"}})


def test_cert_manager_mode_issues_the_certificate_and_the_controller_keeps_none() -> None:
    docs = _by_kind(chart.template({"role": "worker", "certificates": {"mode": "cert-manager"}}))
    name = "trainjob-worker-controller"
    cert = docs[("Certificate", f"{name}-webhook")]
    assert cert["spec"]["dnsNames"][0] == f"{name}-webhook.trainjob-system.svc"
    hook = docs[("MutatingWebhookConfiguration", name)]
    assert hook["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"trainjob-system/{name}-webhook"
    }
    config = yaml.safe_load(docs[("ConfigMap", f"{name}-config")]["data"]["config.yaml"])
    assert config["webhookCertSecret"] == ""
    assert config["webhookCert"] == "/var/run/trainjob/cert-manager/tls.crt"
    role_rules = docs[("Role", name)]["rules"]
    assert not [r for r in role_rules if "secrets" in r["resources"]]


def test_a_service_monitor_only_when_asked() -> None:
    assert not [d for d in chart.template({"role": "manager"}) if d["kind"] == "ServiceMonitor"]
    docs = chart.template({"role": "manager", "metrics": {"serviceMonitor": {"enabled": True}}})
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("metrics", "https")
    plain = chart.template(
        {"role": "manager", "metrics": {"port": 0, "serviceMonitor": {"enabled": True}}}
    )
    (monitor,) = [d for d in plain if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["port"] == "http"


def test_metrics_are_served_over_https_to_callers_the_api_server_vouches_for() -> None:
    for role in ("manager", "worker"):
        docs = _by_kind(chart.template({"role": role}))
        name = "trainjob-dispatcher" if role == "manager" else "trainjob-worker-controller"
        config = yaml.safe_load(docs[("ConfigMap", f"{name}-config")]["data"]["config.yaml"])
        assert config["metricsPort"] == 8443
        ports = {p["name"]: p["containerPort"] for p in _container(list(docs.values()))["ports"]}
        assert ports["metrics"] == 8443
        service = docs[("Service", f"{name}-webhook")]
        assert {"name": "metrics", "port": 8443, "targetPort": "metrics"} in service["spec"][
            "ports"
        ]
        rules = docs[("ClusterRole", name)]["rules"]
        assert {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        } in rules
        assert {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        } in rules
        reader = docs[("ClusterRole", f"{name}-metrics-reader")]
        assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_the_crds_come_with_the_chart_and_helm_labels_say_who_manages() -> None:
    docs = chart.template({"role": "worker"})
    crds = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert crds == {
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    dep = _by_kind(docs)[("Deployment", "trainjob-worker-controller")]
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    for doc in chart.for_kubectl(docs):
        assert "app.kubernetes.io/managed-by" not in (doc["metadata"].get("labels") or {})


@pytest.mark.parametrize("role", ["manager", "worker"])
def test_the_crds_are_templates_that_upgrade_with_the_chart_and_stay_behind(role: str) -> None:
    """The chart renders crds/ itself (templates, which `helm upgrade` upgrades, never Helm's
    once-only crds/ directory), each CRD exactly as the file holds it, labelled for Helm and
    kept on uninstall and rollback; crds.keep=false drops the keep, crds.enabled=false them."""
    files = {
        doc["metadata"]["name"]: doc
        for path in sorted((REPO_ROOT / "crds").glob("trainer.kubeflow.org_*.yaml"))
        for doc in [yaml.load(path.read_text(), Loader=SAFE_LOADER)]
    }
    assert not (chart.CHART / "crds").exists()  # Helm would install those once, and never again
    rendered = {
        d["metadata"]["name"]: d
        for d in chart.template({"role": role})
        if d["kind"] == "CustomResourceDefinition"
    }
    assert set(rendered) == set(files) and len(files) == 3
    for name, crd in rendered.items():
        meta = crd["metadata"]
        assert meta.pop("annotations") == {"helm.sh/resource-policy": "keep"}, name
        labels = meta.pop("labels")
        assert labels["app.kubernetes.io/managed-by"] == "Helm", name
        assert labels["app.kubernetes.io/part-of"] == "trainjob-multicluster", name
        assert crd == files[name]  # spec and all, from the chart's JSON copy through toYaml
    unkept = chart.template({"role": role, "crds": {"keep": False}})
    assert all(
        "helm.sh/resource-policy" not in (d["metadata"].get("annotations") or {})
        for d in unkept
        if d["kind"] == "CustomResourceDefinition"
    )
    off = chart.template({"role": role, "crds": {"enabled": False}})
    assert not [d for d in off if d["kind"] == "CustomResourceDefinition"]
    assert len(off) == len(chart.template({"role": role})) - 3


# The API server holds a Secret to 1 MiB, and Helm keeps a release in one. A quarter of it is
# left for what grows: Trainer's schemas in a later version, more templates, users' values.
RELEASE_BUDGET = 3 * 2**20 // 4


@pytest.mark.parametrize("role", ["manager", "worker"])
def test_a_release_of_the_chart_fits_helms_secret_with_a_quarter_to_spare(role: str) -> None:
    stored = chart.stored_release_bytes({"role": role})
    assert stored < RELEASE_BUDGET, (
        f"a {role} release would take {stored:,} bytes of Helm's Secret (budget "
        f"{RELEASE_BUDGET:,} of 1,048,576): make the chart's files smaller (release/crd_schema.py)"
    )


def test_a_network_policy_lets_in_only_the_controllers_ports() -> None:
    """Each port a rule of its own: the webhooks (admission, the view API) from webhookFrom,
    a worker's progress port (the trainer pods report there, never on the admission port)
    from anywhere, the probes from probesFrom, /metrics from metricsFrom."""
    anywhere = {"ports": [{"port": "webhook", "protocol": "TCP"}]}
    probes = {"ports": [{"port": "http", "protocol": "TCP"}]}
    metrics = {
        "ports": [{"port": "metrics", "protocol": "TCP"}],
        "from": [{"namespaceSelector": {}}],
    }
    progress = {"ports": [{"port": "progress", "protocol": "TCP"}]}
    for role, ingress in (
        ("manager", [anywhere, probes, metrics]),
        ("worker", [anywhere, progress, probes, metrics]),
    ):
        (policy,) = [d for d in chart.template({"role": role}) if d["kind"] == "NetworkPolicy"]
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/name"].startswith("trainjob-")
        assert spec["ingress"] == ingress, role
    monitoring = [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]
    docs = chart.template({"role": "manager", "networkPolicy": {"metricsFrom": monitoring}})
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][2]["from"] == monitoring
    off = chart.template({"role": "manager", "networkPolicy": {"enabled": False}})
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]
    nodes = [{"ipBlock": {"cidr": "10.0.0.0/16"}}]
    control_plane = [{"ipBlock": {"cidr": "10.1.0.0/24"}}]
    values = {"probesFrom": nodes, "webhookFrom": control_plane}
    docs = chart.template({"role": "worker", "networkPolicy": values})
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][:3] == [
        {**anywhere, "from": control_plane},
        progress,  # the trainer pods, wherever they run
        {**probes, "from": nodes},
    ]
    quiet = chart.template({"role": "worker", "config": {"progressReports": False}})
    (policy,) = [d for d in quiet if d["kind"] == "NetworkPolicy"]
    assert progress not in policy["spec"]["ingress"]
    docs = _by_kind(quiet)
    deployment = docs[("Deployment", "trainjob-worker-controller")]["spec"]["template"]["spec"]
    (container,) = deployment["containers"]
    assert "progress" not in {p["name"] for p in container["ports"]}
    service = docs[("Service", "trainjob-worker-controller-webhook")]["spec"]
    assert "progress" not in {p["name"] for p in service["ports"]}


def test_a_worker_takes_progress_reports_on_a_port_of_their_own() -> None:
    docs = _by_kind(chart.template({"role": "worker"}))
    deployment = docs[("Deployment", "trainjob-worker-controller")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["progress"] == 9444 and ports["webhook"] == 9443
    service = docs[("Service", "trainjob-worker-controller-webhook")]["spec"]
    assert {"name": "progress", "port": 9444, "targetPort": "progress"} in service["ports"]
    config = yaml.safe_load(
        docs[("ConfigMap", "trainjob-worker-controller-config")]["data"]["config.yaml"]
    )
    assert config["progressPort"] == 9444 and "progressUrl" not in config  # the Service's name
    # With cert-manager's certificate there is no webhookService setting to build it from.
    managed = _by_kind(chart.template({"role": "worker", "certificates": {"mode": "cert-manager"}}))
    managed_config = yaml.safe_load(
        managed[("ConfigMap", "trainjob-worker-controller-config")]["data"]["config.yaml"]
    )
    assert managed_config["progressUrl"] == (
        "https://trainjob-worker-controller-webhook.trainjob-system.svc:9444"
    )
    manager = _by_kind(chart.template({"role": "manager"}))
    (container,) = manager[("Deployment", "trainjob-dispatcher")]["spec"]["template"]["spec"][
        "containers"
    ]
    assert "progress" not in {p["name"] for p in container["ports"]}


def test_the_job_story_api_and_the_roles_aggregated_to_the_built_in_ones() -> None:
    manager = _by_kind(chart.template({"role": "manager"}))
    service = manager[("APIService", "v1alpha1.view.trainjob.dev")]["spec"]["service"]
    assert (service["name"], service["port"]) == ("trainjob-dispatcher-webhook", 443)
    binding = manager[("RoleBinding", "trainjob-dispatcher-front-proxy")]
    assert binding["metadata"]["namespace"] == "kube-system"
    assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    view = manager[("ClusterRole", "trainjob-dispatcher-view")]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert any(
        r["apiGroups"] == ["view.trainjob.dev"] and "trainjobs/log" in r["resources"]
        for r in view["rules"]
    )
    edit = manager[("ClusterRole", "trainjob-dispatcher-edit")]
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in edit["metadata"]["labels"]
    assert "create" in edit["rules"][0]["verbs"]
    config = yaml.safe_load(
        manager[("ConfigMap", "trainjob-dispatcher-config")]["data"]["config.yaml"]
    )
    assert config["apiServices"] == ["v1alpha1.view.trainjob.dev"]

    worker = _by_kind(chart.template({"role": "worker"}))
    assert not [k for k in worker if k[0] == "APIService"]
    worker_view = worker[("ClusterRole", "trainjob-worker-controller-view")]
    assert all(r["apiGroups"] == ["trainer.kubeflow.org"] for r in worker_view["rules"])


def test_the_job_story_api_can_be_left_out() -> None:
    docs = chart.template({"role": "manager", "manager": {"jobStoryApi": {"enabled": False}}})
    found = _by_kind(docs)
    assert not [k for k in found if k[0] == "APIService" or k[1].endswith("-front-proxy")]
    config = yaml.safe_load(
        found[("ConfigMap", "trainjob-dispatcher-config")]["data"]["config.yaml"]
    )
    assert config["jobStoryApi"] is False and "apiServices" not in config
    rules = [r for (kind, _), d in found.items() if kind == "ClusterRole" for r in d["rules"]]
    assert not [r for r in rules if "view.trainjob.dev" in r.get("apiGroups", [])]
    assert not [r for r in rules if "apiservices" in r.get("resources", [])]
    assert ("ClusterRole", "trainjob-dispatcher-edit") in found  # TrainJobs for `edit` still


def test_a_misspelt_or_unknown_value_is_refused_by_name() -> None:
    for values, named in (
        ({"role": "worker", "replica": 3}, "replica"),
        ({"role": "worker", "metrics": {"prot": 9000}}, "prot"),
        ({"role": "worker", "resources": {"worker": {"request": {}}}}, "request"),
        ({"role": "worker", "podLabels": {"team": 7}}, "team"),
    ):
        with pytest.raises(BedError, match=named):
            chart.template(values)


def test_pull_secrets_pod_labels_annotations_and_resources_reach_the_pod() -> None:
    values = {
        "role": "worker",
        "imagePullSecrets": [{"name": "registry-creds"}],
        "podLabels": {"team": "ml-platform"},
        "podAnnotations": {"example.com/owner": "ml"},
        "resources": {"worker": {"requests": {"cpu": "200m"}, "limits": {"memory": "3Gi"}}},
    }
    docs = _by_kind(chart.template(values))
    template = docs[("Deployment", "trainjob-worker-controller")]["spec"]["template"]
    assert template["spec"]["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert template["metadata"]["labels"]["team"] == "ml-platform"
    assert template["metadata"]["annotations"]["example.com/owner"] == "ml"
    assert _container(list(docs.values()))["resources"] == {  # merged over the defaults
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"memory": "3Gi"},
    }


def test_the_manager_and_a_worker_as_two_releases_on_one_cluster_share_no_object() -> None:
    """Each role names its own cluster-scoped objects (the metrics readers included); the
    CRDs are one release's: the second sets crds.enabled=false, as values.yaml says."""
    manager = chart.template({"role": "manager"}, release="manager")
    worker = chart.template({"role": "worker", "crds": {"enabled": False}}, release="worker")

    def names(docs: list[Dict]) -> set[tuple[str, str, str]]:
        return {
            (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs
        }

    assert names(manager) & names(worker) == set()
    both = names(chart.template({"role": "worker"}, release="worker")) & names(manager)
    assert {kind for kind, _, _ in both} == {"CustomResourceDefinition"}
    assert ("ClusterRole", "", "trainjob-dispatcher-metrics-reader") in names(manager)
    assert ("ClusterRole", "", "trainjob-worker-controller-metrics-reader") in names(worker)


# Series of kube-state-metrics the renewal alerts read (the CronJob's and its Jobs').
KUBE_STATE_SERIES = {"kube_job_status_failed", "kube_cronjob_status_last_successful_time"}


def _series_served() -> set[str]:
    """Every series name the controllers serve, as Prometheus stores them."""
    names = set()
    for name, (kind, _) in served_series().items():
        suffixes = ("_bucket", "_sum", "_count") if kind == "histogram" else ("",)
        names |= {name + suffix for suffix in suffixes}
    return names


def _series_in(expr: str) -> set[str]:
    """The series a PromQL expression reads; a syntax error fails as Prometheus would."""
    import promql_parser

    tree = promql_parser.parse(expr)
    return set(re.findall(r'VectorSelector \{\s*name: Some\(\s*"([^"]+)"', repr(tree)))


def test_the_alerts_parse_and_read_only_series_that_exist() -> None:
    served = _series_served() | KUBE_STATE_SERIES
    version = yaml.safe_load((REPO_ROOT / "charts/trainjob-multicluster/Chart.yaml").read_text())[
        "appVersion"
    ]
    alerts = {}
    for role in ("manager", "worker"):
        docs = _by_kind(
            chart.template(
                {"role": role, "metrics": {"prometheusRule": {"enabled": True}}},
                namespace="tj-system",
            )
        )
        name = "trainjob-dispatcher" if role == "manager" else "trainjob-worker-controller"
        rule = docs[("PrometheusRule", name)]
        (group,) = rule["spec"]["groups"]
        for item in group["rules"]:
            read = _series_in(item["expr"])
            assert read and read <= served, (item["alert"], read - served)
            if not read <= KUBE_STATE_SERIES:  # the controller's own: this release's scrape
                assert f'job="{name}-webhook"' in item["expr"], item
                assert 'namespace="tj-system"' in item["expr"], item
            assert item["labels"]["severity"] in ("warning", "critical")
            # Its runbook: this version's operations guide, at the alert's own row.
            page = f"https://github.com/trainjob-dev/trainjob-multicluster/blob/v{version}"
            want = f"{page}/docs/operators/operations.md#alert-{item['alert'].lower()}"
            assert item["annotations"]["runbook_url"] == want
        alerts[role] = {item["alert"] for item in group["rules"]}
    common = {"TrainJobControllerNoLeader", "TrainJobControllerAPIErrors",
              "TrainJobControllerQueueBacklog"}  # fmt: skip
    assert alerts["worker"] == common
    assert alerts["manager"] == common | {
        "TrainJobWorkerInactive",
        "TrainJobWorkerSecretRenewalFailed",
        "TrainJobWorkerSecretRenewalStale",
    }
    # Every alert is explained in the operations guide, in the row its runbook_url names.
    guide = (REPO_ROOT / "docs" / "operators" / "operations.md").read_text()
    for alert in alerts["manager"]:
        assert f'| <a id="alert-{alert.lower()}"></a>`{alert}` |' in guide, alert
    # A base of the platform's own (a wiki, an internal mirror of the docs).
    rule = _by_kind(
        chart.template(
            {
                "role": "worker",
                "metrics": {
                    "prometheusRule": {"enabled": True, "runbookBaseUrl": "https://wiki/tj"}
                },
            }
        )
    )[("PrometheusRule", "trainjob-worker-controller")]
    urls = [r["annotations"]["runbook_url"] for r in rule["spec"]["groups"][0]["rules"]]
    assert urls[0] == "https://wiki/tj#alert-trainjobcontrollernoleader"


def test_the_dashboard_reads_only_series_that_exist() -> None:
    served = _series_served()
    docs = _by_kind(
        chart.template({"role": "manager", "metrics": {"dashboard": {"enabled": True}}})
    )
    config_map = docs[("ConfigMap", "trainjob-dispatcher-dashboard")]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    (body,) = config_map["data"].values()
    dashboard = json.loads(body)
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    read = set().union(*(_series_in(e) for e in exprs))
    assert read <= served, read - served
    # Every series a person watches (docs/operators/operations.md) has a panel, histograms by
    # buckets.
    wanted = {"trainjob_leader", "trainjob_remote_cluster_active", "trainjob_api_errors_total",
              "workqueue_depth", "trainjob_dispatch_latency_seconds_bucket",
              "trainjob_progress_reports_total"}  # fmt: skip
    assert wanted <= read, wanted - read
    assert all('namespace="$namespace"' in e for e in exprs)


def test_extra_volumes_are_mounted_into_the_controller() -> None:
    volume = {"name": "kubeconfigs", "secret": {"secretName": "worker-kubeconfigs"}}
    mount = {"name": "kubeconfigs", "mountPath": "/etc/multikueue/kubeconfigs", "readOnly": True}
    docs = chart.template(
        {"role": "manager", "extraVolumes": [volume], "extraVolumeMounts": [mount]}
    )
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    assert volume in dep["spec"]["template"]["spec"]["volumes"]
    assert mount in _container(docs)["volumeMounts"]
    with pytest.raises(BedError, match="mountPath"):
        chart.template({"role": "manager", "extraVolumeMounts": [{"name": "x"}]})


def test_one_file_names_the_image_for_every_kustomize_install(tmp_path: Path) -> None:
    """deploy/image/kustomization.yaml, set once, changes the image in every deploy/ variant."""
    import shutil
    import subprocess

    from clusters import builds

    copy = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "deploy", copy / "deploy")
    shutil.copytree(REPO_ROOT / "crds", copy / "crds")
    component = copy / "deploy/image/kustomization.yaml"
    component.write_text(
        component.read_text() + '  newName: registry.example.com/ml/trainjob\n  newTag: "9.9.9"\n'
    )
    variants = [p.parent for p in (copy / "deploy").rglob("kustomization.yaml")]
    variants = [v for v in variants if v.name in ("manager", "worker")]
    assert len(variants) == 6, variants
    for variant in variants:
        out = subprocess.run(
            [str(builds.binary("kubectl")), "kustomize", str(variant)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        found = set(re.findall(r"image: (\S+)", out))
        assert found == {"registry.example.com/ml/trainjob:9.9.9"}, (variant, found)


def test_the_web_view_behind_a_proxy_only_when_asked_and_with_no_credential() -> None:
    assert not [d for d in chart.template({"role": "manager"}) if "ui" in d["metadata"]["name"]]
    ui = {"enabled": True, "publicHosts": ["trainjobs.example.com"], "namespaces": ["a", "b"]}
    found = _by_kind(chart.template({"role": "manager", "manager": {"ui": ui}}))
    pod = found[("Deployment", "trainjob-ui")]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    (container,) = pod["containers"]
    command = container["command"]
    assert command[:3] == ["kubectl-trainjob", "ui", "--behind-proxy"]
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert flags["--public-host"] == "trainjobs.example.com" and flags["--namespaces"] == "a,b"
    assert flags["--certificate-authority"] == "/var/run/trainjob-ui/ca.crt"
    assert pod["volumes"] == [{"name": "cluster-ca", "configMap": {"name": "kube-root-ca.crt"}}]
    service = found[("Service", "trainjob-ui")]["spec"]
    assert service["selector"] == {"app.kubernetes.io/name": "trainjob-ui"}
    proxy = [{"podSelector": {"matchLabels": {"app": "oauth2-proxy"}}}]
    docs = chart.template({"role": "manager", "manager": {"ui": {**ui, "from": proxy}}})
    policy = _by_kind(docs)[("NetworkPolicy", "trainjob-ui")]
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "http", "protocol": "TCP"}], "from": proxy}
    ]
    with pytest.raises(BedError, match="publicHosts"):
        chart.template({"role": "manager", "manager": {"ui": {"enabled": True}}})
    worker = chart.template({"role": "worker", "manager": {"ui": ui}})
    assert not [d for d in worker if "ui" in d["metadata"]["name"]]


@pytest.mark.parametrize("role", ["manager", "worker"])
def test_each_controller_may_list_and_watch_every_kind_it_watches(role: str) -> None:
    """The ClusterRoles the chart gives a controller's ServiceAccount grant `list` and
    `watch` on each kind of its watch table (a missing grant: a cache that never fills, and
    readiness that never comes)."""
    from dispatcher.controller import watches as dispatcher_watches
    from worker_controller import watches as worker_watches

    controller, settings = {
        "manager": (dispatcher_watches, DispatcherSettings()),
        "worker": (worker_watches, WorkerSettings()),
    }[role]
    table = controller.watches(SimpleNamespace(settings=settings))
    docs = chart.template({"role": role})
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    roles = {
        binding["roleRef"]["name"]
        for binding in docs
        if binding["kind"] == "ClusterRoleBinding"
        and any(s.get("name") == account for s in binding.get("subjects") or [])
    }
    granted = {
        (group, resource, verb)
        for doc in docs
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] in roles
        for rule in doc.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }
    missing = {
        (w.kind.group, w.kind.plural, verb)
        for w in table
        for verb in ("list", "watch")
        if (w.kind.group, w.kind.plural, verb) not in granted
    }
    assert roles and not missing, (roles, missing)
