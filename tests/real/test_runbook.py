"""docs/operators/install.md run as written on a mixed fleet, from a bed with nothing of ours
(and no Kueue; worker2 running Kubeflow Trainer v2.3 and JobSet from Trainer's Helm chart, named
in TRAINER_WORKERS) to a TrainJob Complete on the manager; then docs/operators/operations.md's
upgrade of Kueue under the product (Kueue's release manifests applied again through
`trainjob-kueue-config`), after which a TrainJob runs once more on each kind of worker with one
Workload; then docs/operators/operations.md's uninstall, which keeps the CRDs and the
TrainJobs.

The blocks run in bash with kubectl contexts named manager, worker1 and worker2 (the bed's
admin kubeconfigs, merged) and this repository's commands on PATH. The bed's own Kueue is taken
out first and brought back after: step 1 installs Kueue from its release manifests, rendered
from its module as its release renders them, with the image of Kueue the bed builds from that
module. What is substituted: the manifests' URL by that file, their `imagePullPolicy: Always` by
`IfNotPresent` (no registry is reachable), each worker's address as the manager's pods reach
it, and the release's URL by a directory of the assets `python -m release.assets` builds as the
release workflow does, the image named by the tag the bed loads (all in the runbook's copy of
examples/install/fleet.env, the one place that names the workers and the release).
Blocks fenced `sh` are shown to readers, not run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters import builds, images, nodes, peer
from clusters.bed import Bed
from clusters.config import REPO_ROOT
from clusters.helpers.waiting import wait_for
from clusters.kube import load_manifests
from clusters.kueue import release_manifests
from release import assets
from tests.support.runbook import clean_up, merged_kubeconfig, run_blocks, shell_blocks

pytestmark = [pytest.mark.realnodes, pytest.mark.first, pytest.mark.timeout(2100)]

DOCS = REPO_ROOT / "docs"
KUEUE_RELEASES = "https://github.com/kubernetes-sigs/kueue/releases/download"
KUEUE_MANIFESTS = f"{KUEUE_RELEASES}/{builds.KUEUE_VERSION}/manifests.yaml"
OUR_RELEASES = "https://github.com/trainjob-dev/trainjob-multicluster/releases/download"


FLEET_ENV = "examples/install/fleet.env"  # the runbook's one list of clusters
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
# The fleet is mixed: this worker runs Kubeflow Trainer v2.3 and JobSet, installed with
# Trainer's own Helm chart before the runbook starts, and is named in TRAINER_WORKERS.
TRAINER_WORKER = "worker2"
TRAINER_CRDS = [
    f"{p}.{GROUP}" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
]


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
        "KUBECONFIG": str(merged_kubeconfig(real_bed, tmp_path / "kubeconfig")),
        "PATH": os.pathsep.join(
            [
                str(Path(sys.executable).parent),
                str(builds.binary("kubectl").parent),
                os.environ["PATH"],
            ]
        ),
    }
    runbook = (DOCS / "operators" / "install.md").read_text()
    fleet_env = (REPO_ROOT / FLEET_ENV).read_text()
    for worker in workers:
        placeholder = f"https://{worker}.example.com:6443"
        assert placeholder in fleet_env
        fleet_env = fleet_env.replace(placeholder, real_bed.pod_server(worker))
    assert 'TRAINER_WORKERS=""\n' in fleet_env
    fleet_env = fleet_env.replace('TRAINER_WORKERS=""\n', f'TRAINER_WORKERS="{TRAINER_WORKER}"\n')
    release = f"{OUR_RELEASES}/v{assets.chart_version()}"
    assert f"RELEASE={release}\n" in fleet_env
    assets.build(tmp_path / "release", assets.DEFAULT_IMAGE)
    fleet_env = fleet_env.replace(release, str(tmp_path / "release"))
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
        with _trainer_on(real_bed, TRAINER_WORKER, env, tmp_path):
            try:
                took = run_blocks(shell_blocks(runbook), env, "docs/operators/install.md")
                print(
                    "runbook: a mixed fleet without Kueue -> TrainJob Complete on the manager "
                    f"in {took:.0f} s",
                    file=sys.stderr,
                )
                _kueue_upgraded_under_the_product(real_bed, runbook, offline, tmp_path, env)
                _the_trainjob_ran_and_the_uninstall_keeps_it(
                    real_bed, workers, env, tmp_path / "fleet.env"
                )
            finally:
                clean_up(real_bed)
    finally:
        real_bed.bring_back_kueue(load_manifests(kueue))


@contextlib.contextmanager
def _trainer_on(bed: Bed, worker: str, env: dict[str, str], tmp_path: Path) -> Iterator[None]:
    """Kubeflow Trainer v2.3 and JobSet on `worker` as a platform installs them: Trainer's Helm
    chart with its defaults (JobSet its subchart), the images its release and JobSet's name,
    built from their modules and held by the node (JobSet's chart, from its module, names its
    development image: the release's is given). The bed serves our CRDs everywhere; they make
    way for Trainer's, and come back when the release is uninstalled."""
    node = bed.node(worker)
    assert node is not None
    for image in (images.TRAINER, images.JOBSET):
        nodes.import_image(node, image)
    api = bed.api(worker)
    ext = client.ApiextensionsV1Api(api)

    def trainer_crds_gone() -> None:
        for name in TRAINER_CRDS:
            with contextlib.suppress(client.ApiException):
                ext.delete_custom_resource_definition(name)
        wait_for(
            lambda: (
                not {c.metadata.name for c in ext.list_custom_resource_definition().items}
                & set(TRAINER_CRDS)
            ),
            60,
            what=f"{worker}: the TrainJob CRDs to go",
        )

    trainer_crds_gone()
    helm = [str(builds.binary("helm")), "--kube-context", worker]
    try:
        chart = peer.trainer_chart(bed.config, tmp_path)
        jobset_image, jobset_tag = images.JOBSET.name.rsplit(":", 1)
        _helm(
            [*helm, "install", "kubeflow-trainer", str(chart), "-n", "kubeflow-system",
             "--create-namespace", "--set", f"jobset.image.repository={jobset_image}",
             "--set", f"jobset.image.tag={jobset_tag}",
             "--set", "jobset.image.pullPolicy=IfNotPresent", "--wait", "--timeout", "5m"],
            env,
        )  # fmt: skip
        yield
    finally:
        # Each step whatever the one before did: the bed's CRDs come back for the next tests.
        _helm(
            [*helm, "uninstall", "kubeflow-trainer", "-n", "kubeflow-system", "--wait",
             "--ignore-not-found"],
            env,
            check=False,
        )  # fmt: skip
        core = client.CoreV1Api(api)
        with contextlib.suppress(client.ApiException):
            core.delete_namespace("kubeflow-system")
        with contextlib.suppress(client.ApiException):  # JobSet's chart keeps its CRD (crds/)
            ext.delete_custom_resource_definition("jobsets.jobset.x-k8s.io")
        trainer_crds_gone()
        bed.put_back_crds(worker)


def _helm(argv: list[str], env: dict[str, str], check: bool = True) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    print(f"--- {' '.join(argv[1:])}\n{done.stdout}{done.stderr}", file=sys.stderr)
    if check:
        assert done.returncode == 0, f"{' '.join(argv[1:])} failed:\n{done.stderr}"


def _kueue_upgraded_under_the_product(
    real_bed: Bed, runbook: str, offline: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """Kueue's manifests applied again as docs/operators/operations.md says (the same version: what
    matters is its ConfigMap coming back with Kueue's defaults); the restarted Kueue loaded our
    change (install.md's check), and a TrainJob runs with the one Workload the dispatcher
    made: Kueue's own TrainJob integration, back on, would make a second."""
    operations = (DOCS / "operators" / "operations.md").read_text()
    operations = operations.replace(f". {FLEET_ENV}\n", f". {tmp_path / 'fleet.env'}\n")
    assert KUEUE_MANIFESTS in operations
    operations = operations.replace(KUEUE_MANIFESTS, offline.as_uri())
    upgrade = shell_blocks(operations, "Upgrade", "Kueue's own upgrade")
    assert len(upgrade) == 1
    took = run_blocks(upgrade, env, "docs/operators/operations.md, Kueue's own upgrade")
    (check,) = [b for b in shell_blocks(runbook) if "Configuration loaded" in b]
    run_blocks([check], env, "docs/operators/install.md, Kueue's check, after its upgrade")
    print(f"[figure] Kueue's upgrade block on three clusters: {took:.0f} s", file=sys.stderr)
    # One TrainJob on each kind of worker: the other worker's ClusterQueue held meanwhile.
    for worker in sorted(w.name for w in real_bed.config.workers):
        _runs_on(real_bed, worker, f"after-kueue-upgrade-{worker}")


def _held(real_bed: Bed, cluster: str) -> bool:
    """The runbook's ClusterQueue on `cluster` is inactive (Kueue's answer to its Hold)."""
    queue = client.CustomObjectsApi(real_bed.api(cluster)).get_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cluster-queue"
    )
    conditions = (queue.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "False" for c in conditions)


def _runs_on(real_bed: Bed, worker: str, name: str) -> None:
    """The runbook's TrainJob, as `name`, runs to Complete on `worker` (every other worker's
    ClusterQueue on Hold, as Kueue stops a queue), with the one Workload the dispatcher made."""
    others = [w.name for w in real_bed.config.workers if w.name != worker]

    def hold(policy: str | None) -> None:
        for other in others:
            client.CustomObjectsApi(real_bed.api(other)).patch_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", "cluster-queue",
                {"spec": {"stopPolicy": policy}},
            )  # fmt: skip

    custom = client.CustomObjectsApi(real_bed.api("manager"))
    trainjob = yaml.safe_load((REPO_ROOT / "examples" / "install" / "trainjob.yaml").read_text())
    trainjob["metadata"]["name"] = name
    hold("Hold")
    try:
        for other in others:  # Kueue has stopped the queue before the job comes
            wait_for(partial(_held, real_bed, other), 60, what=f"{other}'s ClusterQueue held")
        custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob)

        def complete() -> Any:
            found = custom.get_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", name)
            conditions = (found.get("status") or {}).get("conditions") or []
            done = {c["type"] for c in conditions if c.get("status") == "True"}
            assert "Failed" not in done, conditions
            return found if "Complete" in done else None

        found = wait_for(complete, 300, what=f"{name} Complete on {worker}")
    finally:
        hold(None)
    assert found["status"]["clusterName"] == worker, found["status"]
    workloads = custom.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "team-a", "workloads",
        label_selector=f"kueue.x-k8s.io/job-uid={found['metadata']['uid']}",
    )["items"]  # fmt: skip
    owned = [
        w["metadata"]["name"]
        for w in custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "team-a", "workloads"
        )["items"]
        if any(
            ref.get("uid") == found["metadata"]["uid"]
            for ref in w["metadata"].get("ownerReferences") or []
        )
    ]
    assert len(workloads) == 1 and owned == [workloads[0]["metadata"]["name"]], owned
    reasons = {c["type"]: c.get("reason") for c in found["status"]["conditions"]}
    print(f"[figure] {name} Complete on {worker}: {reasons}", file=sys.stderr)


def _the_trainjob_ran_and_the_uninstall_keeps_it(
    real_bed: Bed, workers: set[str], env: dict[str, str], fleet_env: Path
) -> None:
    custom = client.CustomObjectsApi(real_bed.api("manager"))
    trainjob = custom.get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "team-a", "trainjobs", "install-check"
    )
    assert trainjob["status"]["clusterName"] in workers
    print(f"[figure] install-check ran on {trainjob['status']['clusterName']}", file=sys.stderr)

    # The upgrade from the release's files, to the files installed (nothing changes, and the
    # block runs as written), then the uninstall from them: the product goes, the namespace
    # with it; the CRDs and the TrainJobs stay.
    operations = (DOCS / "operators" / "operations.md").read_text()
    operations = operations.replace(f". {FLEET_ENV}\n", f". {fleet_env}\n")
    run_blocks(
        shell_blocks(operations, "Upgrade", "From the release's files"),
        env,
        "docs/operators/operations.md, Upgrade from the release's files",
    )
    run_blocks(
        shell_blocks(operations, "Uninstall", "From the release's files"),
        env,
        "docs/operators/operations.md, Uninstall from the release's files",
    )
    for cluster in ("manager", *workers):
        api = real_bed.api(cluster)
        assert not client.AppsV1Api(api).list_namespaced_deployment("trainjob-system").items
        names = {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}
        assert "trainjob-system" not in names, cluster  # kubectl delete waited for it
        admission = client.AdmissionregistrationV1Api(api)
        hooks = [
            *admission.list_mutating_webhook_configuration().items,
            *admission.list_validating_webhook_configuration().items,
        ]
        assert not [h.metadata.name for h in hooks if h.metadata.name.startswith("trainjob-")]
        services = client.ApiregistrationV1Api(api).list_api_service().items
        assert not [s.metadata.name for s in services if "trainjob" in s.metadata.name]
        for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
            client.ApiextensionsV1Api(api).read_custom_resource_definition(
                f"{plural}.trainer.kubeflow.org"
            )
    kept = custom.get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "team-a", "trainjobs", "install-check"
    )
    assert kept["metadata"]["uid"] == trainjob["metadata"]["uid"]
    custom.get_cluster_custom_object(  # the runtimes stay too
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "install-check"
    )
