"""docs/install.md run as written, from a bed with nothing of ours (and no Kueue) to a TrainJob
Complete on the manager; then docs/operations.md's uninstall, which keeps the CRDs and the
TrainJobs.

The blocks run in bash with kubectl contexts named manager, worker1 and worker2 (the bed's
admin kubeconfigs, merged) and this repository's commands on PATH. The bed's own Kueue is taken
out first and brought back after: step 1 installs Kueue from its release manifests, rendered
from its module as its release renders them, with the image of Kueue the bed builds from that
module. What is substituted: the manifests' URL by that file, their `imagePullPolicy: Always` by
`IfNotPresent` (no registry is reachable), each worker's address as the manager's pods reach
it (in the runbook's copy of examples/install/fleet.env, the one place that names the workers).
Blocks fenced as `bash skip-in-test` are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from clusters import builds, images
from clusters.bed import Bed
from clusters.config import REPO_ROOT
from clusters.kube import load_manifests
from clusters.kueue import release_manifests

pytestmark = [pytest.mark.realnodes, pytest.mark.first, pytest.mark.timeout(1200)]

DOCS = REPO_ROOT / "docs"
KUEUE_RELEASES = "https://github.com/kubernetes-sigs/kueue/releases/download"
KUEUE_MANIFESTS = f"{KUEUE_RELEASES}/{builds.KUEUE_VERSION}/manifests.yaml"
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```$", re.M | re.S)


def shell_blocks(markdown: str, section: str | None = None) -> list[str]:
    """The page's bash blocks in order (those under the `## <section>` heading only, when
    given), without those fenced `bash skip-in-test`."""
    if section is not None:
        start = markdown.index(f"\n## {section}\n")
        end = markdown.find("\n## ", start + 1)
        markdown = markdown[start : end if end != -1 else None]
    return [
        body
        for lang, info, body in FENCE.findall(markdown)
        if lang == "bash" and "skip-in-test" not in info
    ]


def _merged_kubeconfig(bed: Bed, out: Path) -> Path:
    """The bed's admin kubeconfigs as one file, a context per cluster named after it."""
    merged: dict[str, list[dict[str, object]]] = {"clusters": [], "users": [], "contexts": []}
    for c in bed.config.clusters:
        cfg = yaml.safe_load(bed.kubeconfig(c.name).read_text())
        merged["clusters"].append({"name": c.name, "cluster": cfg["clusters"][0]["cluster"]})
        merged["users"].append({"name": c.name, "user": cfg["users"][0]["user"]})
        merged["contexts"].append({"name": c.name, "context": {"cluster": c.name, "user": c.name}})
    out.write_text(
        yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Config", "current-context": "manager", **merged}
        )
    )
    out.chmod(0o600)
    return out


FLEET_ENV = "examples/install/fleet.env"  # the runbook's one list of clusters


def _run_blocks(blocks: list[str], env: dict[str, str], what: str, cwd: Path = REPO_ROOT) -> float:
    start = time.monotonic()
    for number, block in enumerate(blocks, 1):
        began = time.monotonic()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        print(
            f"--- {what} block {number}/{len(blocks)} ({time.monotonic() - began:.1f} s)\n"
            f"{done.stdout}{done.stderr}",
            file=sys.stderr,
        )
        assert done.returncode == 0, (
            f"{what}, block {number} failed (exit {done.returncode}):\n{block}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    return time.monotonic() - start


def test_the_install_runbook_then_the_uninstall_keep_what_they_say(
    real_bed: Bed, tmp_path: Path
) -> None:
    managers = {c.name for c in real_bed.config.managers}
    workers = {w.name for w in real_bed.config.workers}
    assert (managers, workers) == ({"manager"}, {"worker1", "worker2"}), "the runbook's names"
    apps = client.AppsV1Api(real_bed.api("manager"))
    assert not apps.list_namespaced_deployment("trainjob-system").items, "not an empty bed"

    env = {
        **os.environ,
        "KUBECONFIG": str(_merged_kubeconfig(real_bed, tmp_path / "kubeconfig")),
        "PATH": os.pathsep.join(
            [
                str(Path(sys.executable).parent),
                str(builds.binary("kubectl").parent),
                os.environ["PATH"],
            ]
        ),
    }
    runbook = (DOCS / "install.md").read_text()
    fleet_env = (REPO_ROOT / FLEET_ENV).read_text()
    for worker in workers:
        placeholder = f"https://{worker}.example.com:6443"
        assert placeholder in fleet_env
        fleet_env = fleet_env.replace(placeholder, real_bed.pod_server(worker))
    (tmp_path / "fleet.env").write_text(fleet_env)
    assert runbook.count(f". {FLEET_ENV}\n") >= 10, "every block reads the one list"
    runbook = runbook.replace(f". {FLEET_ENV}\n", f". {tmp_path / 'fleet.env'}\n")
    kueue = release_manifests(images.KUEUE.name)
    assert kueue.count("imagePullPolicy: Always") == 1, "Kueue's Deployment, and nothing else"
    offline = tmp_path / "kueue-manifests.yaml"
    offline.write_text(kueue.replace("imagePullPolicy: Always", "imagePullPolicy: IfNotPresent"))
    assert KUEUE_MANIFESTS in runbook
    runbook = runbook.replace(KUEUE_MANIFESTS, str(offline))

    real_bed.take_out_kueue()
    try:
        took = _run_blocks(shell_blocks(runbook), env, "docs/install.md")
        print(
            f"runbook: a bed without Kueue -> TrainJob Complete on the manager in {took:.0f} s",
            file=sys.stderr,
        )
        _the_trainjob_ran_and_the_uninstall_keeps_it(real_bed, workers, env)
    finally:
        _clean_up(real_bed)
        real_bed.bring_back_kueue(load_manifests(kueue))


def _the_trainjob_ran_and_the_uninstall_keeps_it(
    real_bed: Bed, workers: set[str], env: dict[str, str]
) -> None:
    custom = client.CustomObjectsApi(real_bed.api("manager"))
    trainjob = custom.get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "team-a", "trainjobs", "install-check"
    )
    assert trainjob["status"]["clusterName"] in workers

    # Uninstall as docs/operations.md says: the product goes, the CRDs and TrainJobs stay.
    operations = (DOCS / "operations.md").read_text()
    _run_blocks(shell_blocks(operations, "Uninstall"), env, "docs/operations.md, Uninstall")
    for cluster in ("manager", *workers):
        api = real_bed.api(cluster)
        assert not client.AppsV1Api(api).list_namespaced_deployment("trainjob-system").items
        admission = client.AdmissionregistrationV1Api(api)
        assert not [
            h
            for h in admission.list_mutating_webhook_configuration().items
            if h.metadata.name.startswith("trainjob-")
        ]
        client.ApiextensionsV1Api(api).read_custom_resource_definition(
            "trainjobs.trainer.kubeflow.org"
        )
    kept = custom.get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "team-a", "trainjobs", "install-check"
    )
    assert kept["metadata"]["uid"] == trainjob["metadata"]["uid"]


def _clean_up(bed: Bed) -> None:
    """What the runbook made, so the other tests install the product their own way."""
    custom = client.CustomObjectsApi(bed.api("manager"))
    # The dispatcher is gone: its finalizer on the TrainJob goes by hand (operations.md).
    try:
        custom.patch_namespaced_custom_object(
            "trainer.kubeflow.org",
            "v1alpha1",
            "team-a",
            "trainjobs",
            "install-check",
            {"metadata": {"finalizers": None}},
        )
    except client.ApiException as exc:
        if exc.status != 404:  # a run that stopped before the TrainJob was made
            raise
    for cluster in bed.config.clusters:
        api = bed.api(cluster.name)
        try:
            client.CoreV1Api(api).delete_namespace("team-a")
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        for group, version, plural, name in (
            ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "install-check"),
            ("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cluster-queue"),
            ("kueue.x-k8s.io", "v1beta2", "admissionchecks", "multikueue"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", "multikueue"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueclusters", "worker1"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueclusters", "worker2"),
        ):
            try:
                client.CustomObjectsApi(api).delete_cluster_custom_object(
                    group, version, plural, name
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
