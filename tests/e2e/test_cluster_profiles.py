"""A worker named by a ClusterProfile (the Cluster Inventory API) instead of a kubeconfig Secret,
as Kueue 0.19 connects one: the profile's access provider gives the endpoint, an exec credential
plugin of the operator's configuration gives the token. The plugin here is the test's own (it
hands over the MultiKueue identity's token of the bed's first worker); everything else is the
real manager and worker, with the ClusterProfile CRD of the module Kueue builds with."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier
from clusters.kueue import cluster_profile_crd
from kubecontrol.exec_credentials import EXEC_EXTENSION
from tests.support.multikueue import KUEUE, MultiKueue, dispatcher_with, fleet

pytestmark = [pytest.mark.bed, pytest.mark.disruptive]
Dict = dict[str, Any]
PROFILES = ("multicluster.x-k8s.io", "v1alpha1")
NAMES = "kueue.x-k8s.io/multikueue-cluster-names"
V1 = "client.authentication.k8s.io/v1"


def _plugin(tmp_path: Path, token: str) -> Path:
    """An exec credential plugin that records what it was told and answers with `token`."""
    (tmp_path / "token").write_text(token)
    script = tmp_path / "fleet-token"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib\n"
        f"here = pathlib.Path({str(tmp_path)!r})\n"
        "(here / 'told').write_text(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({'apiVersion': json.loads(os.environ['KUBERNETES_EXEC_INFO'])"
        "['apiVersion'], 'kind': 'ExecCredential', "
        "'status': {'token': (here / 'token').read_text()}}))\n"
    )
    script.chmod(0o755)
    return script


def _active(mk: MultiKueue, name: str) -> Dict | None:
    obj = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueclusters", name)
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Active"),
        None,
    )


def _wait_reason(mk: MultiKueue, name: str, reason: str) -> Dict:
    return wait_for(
        lambda: (cond := _active(mk, name)) and cond["reason"] == reason and cond,
        60,
        what=f"{name}'s Active condition to say {reason}",
    )


@contextlib.contextmanager
def _in_place_of(mk: MultiKueue, worker: str, profiled: list[str]) -> Iterator[None]:
    """The worker's own MultiKueueCluster out of the fleet for the block (two for one cluster
    would each take the other's copies for leftovers), `profiled` in its place in the config."""
    custom = mk.custom()
    saved = custom.get_cluster_custom_object(*KUEUE, "multikueueclusters", worker)
    config = custom.get_cluster_custom_object(*KUEUE, "multikueueconfigs", "multikueue")
    before = list(config["spec"]["clusters"])
    custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", worker)
    after = [c for c in before if c != worker] + profiled
    custom.patch_cluster_custom_object(
        *KUEUE, "multikueueconfigs", "multikueue", {"spec": {"clusters": after}}
    )
    try:
        yield
    finally:
        for name in profiled:
            with contextlib.suppress(client.ApiException):
                custom.delete_cluster_custom_object(*KUEUE, "multikueueclusters", name)
        custom.patch_cluster_custom_object(
            *KUEUE, "multikueueconfigs", "multikueue", {"spec": {"clusters": before}}
        )
        meta = {k: saved["metadata"][k] for k in ("name", "labels") if k in saved["metadata"]}
        body = {"apiVersion": saved["apiVersion"], "kind": saved["kind"], "metadata": meta}
        custom.create_cluster_custom_object(
            *KUEUE, "multikueueclusters", {**body, "spec": saved["spec"]}
        )
        _wait_reason(mk, worker, "Active")


def test_a_worker_named_by_a_cluster_profile_connects_through_its_plugin_and_runs_trainjobs(
    bed: Bed, controllers: list[setup.Controller], tmp_path: Path
) -> None:
    mk = MultiKueue(bed)
    worker, kueue_ns = mk.workers[0], bed.config.kueue_namespace
    applier = Applier(bed.api(mk.manager))
    crd = cluster_profile_crd()
    applier.apply(crd)
    applier.wait_crds_established([crd["metadata"]["name"]])
    custom = mk.custom()
    # Established is said before every API server handler serves the kind: a create may
    # still be answered 404 for a moment, so the kind is listed first until it answers.
    wait_for(
        lambda: custom.list_namespaced_custom_object(*PROFILES, kueue_ns, "clusterprofiles"),
        30,
        what="ClusterProfiles served",
    )
    core = client.CoreV1Api(bed.api(mk.manager))
    # What a fleet's access provider would say of the worker, and the token its plugin gets.
    secret = core.read_namespaced_secret(f"{worker}-secret", kueue_ns)
    kubeconfig = yaml.safe_load(base64.b64decode(secret.data["kubeconfig"]))
    endpoint = kubeconfig["clusters"][0]["cluster"]
    plugin = _plugin(tmp_path, kubeconfig["users"][0]["user"]["token"])

    def profile(name: str, provider: str) -> None:
        custom.create_namespaced_custom_object(
            *PROFILES, kueue_ns, "clusterprofiles",
            {"apiVersion": "/".join(PROFILES), "kind": "ClusterProfile",
             "metadata": {"name": name},
             "spec": {"displayName": name, "clusterManager": {"name": "bed"}}},
        )  # fmt: skip
        custom.patch_namespaced_custom_object_status(
            *PROFILES, kueue_ns, "clusterprofiles", name,
            {"status": {"accessProviders": [{"name": provider, "cluster": {
                "server": endpoint["server"],
                "certificate-authority-data": endpoint["certificate-authority-data"],
                "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": worker}}],
            }}]}},
        )  # fmt: skip

    def cluster(name: str, profile_name: str) -> None:
        custom.create_cluster_custom_object(
            *KUEUE, "multikueueclusters",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
             "metadata": {"name": name},
             "spec": {"clusterSource": {"clusterProfileRef": {"name": profile_name}}}},
        )  # fmt: skip

    providers = [
        {"name": "fleet-token",
         "execConfig": {"apiVersion": V1, "command": str(plugin), "provideClusterInfo": True}}
    ]  # fmt: skip
    try:
        profile("fleet-w1", "fleet-token")
        profile("fleet-other", "someone-elses")
        with _in_place_of(mk, worker, ["fleet-other", "fleet-missing", "fleet-w1"]):
            cluster("fleet-other", "fleet-other")
            cluster("fleet-missing", "nowhere")
            # Kueue's gate is off by default: said, nothing connected
            off = _wait_reason(mk, "fleet-other", "MultiKueueClusterProfileFeatureDisabled")
            assert off["status"] == "False" and "--cluster-profiles" in off["message"]
            flags = ["--cluster-profiles", "--cluster-profile-providers", json.dumps(providers)]
            with dispatcher_with(controllers, *flags):
                # one command joins it: the MultiKueueCluster, the config, then Active
                joined = fleet(bed, "join", "--name", "fleet-w1", "--cluster-profile", "fleet-w1")
                assert joined.returncode == 0, joined.stderr
                on = _wait_reason(mk, "fleet-w1", "Active")
                assert on["status"] == "True"
                other = _wait_reason(mk, "fleet-other", "BadClusterProfile")
                assert "no matching cluster accessor" in other["message"], other
                assert "someone-elses" in other["message"], other
                missing = _wait_reason(mk, "fleet-missing", "BadClusterProfile")
                assert '"nowhere" not found' in missing["message"], missing
                # the plugin was told which cluster, with the profile's own settings for it
                told = json.loads((tmp_path / "told").read_text())
                assert told["spec"]["cluster"]["server"] == endpoint["server"]
                assert told["spec"]["cluster"]["config"] == {"clusterName": worker}
                # a TrainJob that names the profiled cluster runs there, status brought back
                mk.submit("via-profile", run="3s", metadata={"annotations": {NAMES: "fleet-w1"}})
                mk.wait_until("via-profile", "Complete")
                assert (mk.get("via-profile") or {})["status"]["clusterName"] == "fleet-w1"
                # a token the worker refuses: the plugin is asked again, the worker lost
                (tmp_path / "token").write_text("not-a-token")
                custom.patch_namespaced_custom_object_status(
                    *PROFILES, kueue_ns, "clusterprofiles", "fleet-w1",
                    {"status": {"accessProviders": [{"name": "fleet-token", "cluster": {
                        "server": endpoint["server"],
                        "certificate-authority-data": endpoint["certificate-authority-data"],
                        "extensions": [{"name": EXEC_EXTENSION,
                                        "extension": {"clusterName": worker, "v": 2}}],
                    }}]}},
                )  # fmt: skip
                lost = _wait_reason(mk, "fleet-w1", "ClientConnectionFailed")
                assert lost["status"] == "False" and "401" in lost["message"], lost
                # and one removes it: nothing runs there, the MultiKueueCluster join made goes
                removed = fleet(bed, "remove", "--name", "fleet-w1", timeout=120)
                assert removed.returncode == 0, removed.stderr
                assert "MultiKueueCluster fleet-w1: deleted" in removed.stderr, removed.stderr
    finally:
        for name in ("fleet-w1", "fleet-other"):
            with contextlib.suppress(client.ApiException):
                custom.delete_namespaced_custom_object(*PROFILES, kueue_ns, "clusterprofiles", name)
