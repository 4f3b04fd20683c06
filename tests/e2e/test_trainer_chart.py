"""Kubeflow Trainer's own Helm chart (v2.3, packaged as its release packages it, with JobSet's
and LeaderWorkerSet's charts inside) on a manager, then ours beside it, as
docs/operators/operations.md's migration says: its release gives the CRDs up (step 2's blocks,
run as written), ours takes them over, and every TrainJob and runtime stays through both
releases' upgrades and uninstalls.

The cluster is a bed of its own (clusters.config.lone_manager_bed_config): one manager with
nothing of ours. A manager has no nodes, so neither release's pods run and their webhooks
have nothing behind them; the TrainJobs and runtimes are made before Trainer's release takes
the CRDs over (`--take-ownership`, the state its own install leaves), and nothing is written
to them afterwards. What is under test is what Helm and the API server do to the CRDs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters import builds, chart, peer
from clusters.bed import Bed
from clusters.config import REPO_ROOT, lone_manager_bed_config
from clusters.helpers.waiting import wait_for
from clusters.kube import Applier, load_manifests
from tests.support.runbook import FENCE

pytestmark = [pytest.mark.bed]
Dict = dict[str, Any]
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
CRDS = [f"{p}.{GROUP}" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]
TRAINER_RELEASE, TRAINER_NS = "kubeflow-trainer", "kubeflow-system"
OPERATIONS = REPO_ROOT / "docs" / "operators" / "operations.md"
STEP = "2. **Trainer's Helm release gives its CRDs up**"


@pytest.fixture(scope="module")
def lone() -> Iterator[Bed]:
    """The one-manager bed, or the running one $TJ_LONE_BED_STATE_DIR names (kept up)."""
    bed = Bed(lone_manager_bed_config())
    reuse = bool(os.environ.get("TJ_LONE_BED_STATE_DIR")) and bed.is_up()
    if not reuse:
        bed.up()
    try:
        yield bed
    finally:
        if not reuse and not os.environ.get("TJ_BED_KEEP"):
            bed.down()


def migration_blocks() -> list[str]:
    """Step 2's shown blocks (fenced `sh`, with placeholders) and its uninstall line."""
    page = OPERATIONS.read_text()
    start = page.index(STEP)
    step = page[start : page.index("\n3. **", start)]
    blocks = [
        body for lang, _, body in FENCE.findall(re.sub(r"(?m)^   ", "", step)) if lang == "sh"
    ]
    (uninstall,) = re.findall(r"`(helm uninstall [^`]*--no-hooks)`", step)
    return [*blocks, uninstall]


def run(script: str, env: dict[str, str], what: str, show: bool = True) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    print(f"--- {what}\n{script}\n{done.stdout if show else ''}{done.stderr}", file=sys.stderr)
    assert done.returncode == 0, f"{what} failed (exit {done.returncode}):\n{done.stderr}"
    return done.stdout


def crd_owners(api: client.ApiClient) -> dict[str, tuple[str, str, str]]:
    """Each CRD's uid, the release that holds it and the project its labels name."""
    ext = client.ApiextensionsV1Api(api)
    out = {}
    for name in CRDS:
        meta = ext.read_custom_resource_definition(name).metadata
        out[name] = (
            meta.uid,
            (meta.annotations or {}).get("meta.helm.sh/release-name", ""),
            (meta.labels or {}).get("app.kubernetes.io/part-of")
            or (meta.labels or {}).get("app.kubernetes.io/name", ""),
        )
    return out


def test_trainers_release_gives_its_crds_up_and_ours_takes_them_with_every_trainjob_kept(
    lone: Bed, tmp_path: Path
) -> None:
    api = lone.api("manager")
    ext = client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    # A cluster where Trainer came first: its CRDs, not the ours the bed applied.
    for name in CRDS:
        ext.delete_custom_resource_definition(name)
    wait_for(
        lambda: (
            not {c.metadata.name for c in ext.list_custom_resource_definition().items} & set(CRDS)
        ),
        60,
        what="the bed's CRDs to go",
    )
    trainer = peer.trainer_chart(lone.config, tmp_path)
    helm = chart.helm()
    env = {
        **os.environ,
        "KUBECONFIG": str(lone.kubeconfig("manager")),
        "PATH": os.pathsep.join(
            [str(helm.parent), str(builds.binary("kubectl").parent), os.environ["PATH"]]
        ),
    }
    rendered = run(
        f"helm template {TRAINER_RELEASE} {trainer} -n {TRAINER_NS}",
        env,
        "Trainer's chart rendered",
        show=False,
    )
    applier = Applier(api)
    theirs = [d for d in load_manifests(rendered) if d["metadata"]["name"] in CRDS]
    assert len(theirs) == 3
    applier.apply_all(theirs)
    applier.wait_crds_established(CRDS)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "team-a"}})
    runtime = yaml.safe_load((REPO_ROOT / "examples" / "install" / "runtime.yaml").read_text())
    runtime_kind = runtime["kind"]
    assert runtime_kind == "ClusterTrainingRuntime"
    custom.create_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", runtime)
    trainjob = yaml.safe_load((REPO_ROOT / "examples" / "install" / "trainjob.yaml").read_text())
    trainjob["spec"]["suspend"] = True
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob)

    def kept() -> tuple[str, str]:
        tj = custom.get_namespaced_custom_object(
            GROUP, VERSION, "team-a", "trainjobs", trainjob["metadata"]["name"]
        )
        rt = custom.get_cluster_custom_object(
            GROUP, VERSION, "clustertrainingruntimes", runtime["metadata"]["name"]
        )
        return tj["metadata"]["uid"], rt["metadata"]["uid"]

    objects = kept()
    run(
        f"helm install {TRAINER_RELEASE} {trainer} -n {TRAINER_NS} --create-namespace "
        "--take-ownership",
        env,
        "Trainer's release, its defaults",
    )
    before = crd_owners(api)
    assert {release for _, release, _ in before.values()} == {TRAINER_RELEASE}, before

    give_up, take_over, uninstall = migration_blocks()
    chart_line = f"<release> <its chart> -n {TRAINER_NS}"
    assert chart_line in give_up
    give_up = give_up.replace(chart_line, f"{TRAINER_RELEASE} {trainer} -n {TRAINER_NS}")
    give_up = give_up.replace("<release>", TRAINER_RELEASE)
    counted = run(give_up, env, "operations.md step 2: Trainer's release gives its CRDs up")
    assert counted.split()[-1] == "0", counted
    assert kept() == objects
    assert {uid for uid, _, _ in crd_owners(api).values()} == {uid for uid, _, _ in before.values()}

    # Trainer stays beside the dispatcher: ours is installed with its chart, after the loop.
    run(take_over, env, "operations.md step 2: our release is given the CRDs")
    run(
        "helm install trainjob charts/trainjob-multicluster -n trainjob-system --create-namespace "
        "-f examples/install/values-manager.yaml",
        env,
        "our release (configuration.md's command for the manager)",
    )
    ours = crd_owners(api)
    assert {(release, project) for _, release, project in ours.values()} == {
        ("trainjob", "trainjob-multicluster")
    }, ours
    assert kept() == objects
    # Trainer's next upgrade leaves the CRDs ours, then its uninstall as the page says.
    run(
        f"helm upgrade {TRAINER_RELEASE} {trainer} -n {TRAINER_NS} --reuse-values",
        env,
        "Trainer's release upgraded again",
    )
    assert crd_owners(api) == ours
    run(uninstall.replace("<release>", TRAINER_RELEASE), env, "operations.md: Trainer's uninstall")
    assert crd_owners(api) == ours
    assert kept() == objects
    run("helm uninstall trainjob -n trainjob-system", env, "our release uninstalled")
    assert {uid for uid, _, _ in crd_owners(api).values()} == {uid for uid, _, _ in ours.values()}
    assert kept() == objects
