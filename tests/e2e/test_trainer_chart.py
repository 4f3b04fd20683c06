"""Kubeflow Trainer's own Helm chart (v2.3, packaged as its release packages it, with JobSet's
and LeaderWorkerSet's charts inside) on a manager, then ours, as docs/operators/operations.md's
migration says: its release gives the CRDs up (step 2's blocks, run as written with the
placeholders filled in), ours takes them over (with our chart, or with the runbook's apply),
and the TrainJob and runtime made before keep their UIDs through both releases' upgrades and
uninstalls. Without the page's keep annotation, the same upgrade deletes them (the page's
warning, shown).

The cluster is a bed of its own (clusters.config.lone_manager_bed_config): one manager with
nothing of ours. A manager has no nodes, so neither release's pods run and their webhooks
have nothing behind them: Trainer's release is installed with its webhooks' failure policy
`Ignore` (a value of its chart), so that each test can make its TrainJob and runtime.
Trainer's runtimes are off (its chart's default), so its hooks render nothing here. What is
under test is what Helm and the API server do to the CRDs."""

from __future__ import annotations

import contextlib
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
from clusters.helpers.waiting import stays_false, wait_for
from tests.support.runbook import FENCE

pytestmark = [pytest.mark.bed]
Dict = dict[str, Any]
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
CRDS = [f"{p}.{GROUP}" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]
TRAINER_RELEASE, TRAINER_NS = "kubeflow-trainer", "kubeflow-system"
OURS, OURS_NS = "trainjob", "trainjob-system"
OPERATIONS = REPO_ROOT / "docs" / "operators" / "operations.md"
STEP = "2. **Trainer's Helm release gives its CRDs up**"
# A value Trainer's release was installed with that is not its chart's default, which step 2's
# upgrade must keep: its webhooks' failure policy (here, where nothing serves them, what lets
# the test make its TrainJob and runtime through them).
PLATFORM_VALUE = ("webhook.failurePolicy", "Ignore")


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


class Manager:
    """The lone manager as the page's reader works on it: kubectl and helm on PATH, its admin
    kubeconfig, Trainer's chart packaged in `tmp`."""

    def __init__(self, bed: Bed, tmp: Path) -> None:
        self.api = bed.api("manager")
        self.ext = client.ApiextensionsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.env = {
            **os.environ,
            "KUBECONFIG": str(bed.kubeconfig("manager")),
            "PATH": os.pathsep.join(
                [str(chart.helm().parent), str(builds.binary("kubectl").parent), os.environ["PATH"]]
            ),
        }
        self.trainer = peer.trainer_chart(bed.config, tmp)
        self.runtime = yaml.safe_load((REPO_ROOT / "examples/install/runtime.yaml").read_text())
        self.trainjob = yaml.safe_load((REPO_ROOT / "examples/install/trainjob.yaml").read_text())
        self.trainjob["spec"]["suspend"] = True

    def run(self, script: str, what: str, show: bool = True, check: bool = True) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO_ROOT, env=self.env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        out = done.stdout if show else ""
        print(f"--- {what}\n{script}\n{out}{done.stderr}", file=sys.stderr)
        if check:
            assert done.returncode == 0, f"{what} failed (exit {done.returncode}):\n{done.stderr}"
        return done.stdout + done.stderr

    def crds_gone(self) -> None:
        for name in CRDS:
            with contextlib.suppress(client.ApiException):
                self.ext.delete_custom_resource_definition(name)
        wait_for(
            lambda: (
                not {c.metadata.name for c in self.ext.list_custom_resource_definition().items}
                & set(CRDS)
            ),
            60,
            what="the TrainJob CRDs to go",
        )

    def trainers_release_holds_the_crds(self) -> tuple[str, str]:
        """From whatever an earlier test left: Trainer's release holding its CRDs (installed
        with one value of the platform's), a TrainJob and a runtime. The two objects' UIDs."""
        for release, ns in ((OURS, OURS_NS), (TRAINER_RELEASE, TRAINER_NS)):
            self.run(f"helm uninstall {release} -n {ns} --no-hooks --ignore-not-found", "reset")
        self.crds_gone()  # with whatever they held
        core = client.CoreV1Api(self.api)
        with contextlib.suppress(client.ApiException):
            core.delete_namespace("team-a")
        wait_for(
            lambda: "team-a" not in {n.metadata.name for n in core.list_namespace().items},
            60,
            what="team-a to go",
        )
        key, value = PLATFORM_VALUE
        self.run(
            f"helm install {TRAINER_RELEASE} {self.trainer} -n {TRAINER_NS} --create-namespace "
            f"--set {key}={value}",
            "Trainer's release",
        )
        core.create_namespace({"metadata": {"name": "team-a"}})
        # Helm returns once the CRDs are created; the API server serves their kinds a moment
        # later (until then a create is a plain 404).
        wait_for(
            lambda: (
                self.custom.list_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes")
                and self.custom.list_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs")
            ),
            60,
            what="the API server to serve the kinds of Trainer's CRDs",
        )
        self.custom.create_cluster_custom_object(
            GROUP, VERSION, "clustertrainingruntimes", self.runtime
        )
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, "team-a", "trainjobs", self.trainjob
        )
        assert {release for _, release, _ in self.crd_owners().values()} == {TRAINER_RELEASE}
        assert not self.ours_typed()
        return self.kept()

    def kept(self) -> tuple[str, str]:
        """The TrainJob's and the runtime's UIDs (404 once they are gone)."""
        tj = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, "team-a", "trainjobs", self.trainjob["metadata"]["name"]
        )
        rt = self.custom.get_cluster_custom_object(
            GROUP, VERSION, "clustertrainingruntimes", self.runtime["metadata"]["name"]
        )
        return tj["metadata"]["uid"], rt["metadata"]["uid"]

    def still_kept(self, uids: tuple[str, str]) -> None:
        """The objects are there, and are not on their way out for a few seconds (Helm does
        not wait for what it deletes)."""
        assert self.kept() == uids
        stays_false(
            lambda: self.kept() != uids, 3, what="the TrainJob or the runtime gone or made again"
        )
        self.crd_owners()  # none of the CRDs on its way out

    def crd_owners(self) -> dict[str, tuple[str, str, str]]:
        """Each CRD's uid, the release that holds it and the project its labels name; a CRD
        being deleted fails."""
        out = {}
        for name in CRDS:
            meta = self.ext.read_custom_resource_definition(name).metadata
            assert meta.deletion_timestamp is None, f"{name} is being deleted"
            labels, annotations = meta.labels or {}, meta.annotations or {}
            out[name] = (
                meta.uid,
                annotations.get("meta.helm.sh/release-name", ""),
                labels.get("app.kubernetes.io/part-of", ""),
            )
        return out

    def ours_typed(self) -> bool:
        """The TrainJob CRD is ours by its schema: our status field Trainer's lacks."""
        crd = self.ext.read_custom_resource_definition(CRDS[0])
        status = crd.spec.versions[0].schema.open_apiv3_schema.properties["status"]
        return "podsStatus" in (status.properties or {})


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


def filled(block: str, m: Manager) -> str:
    """A block with the page's placeholders as `helm list` shows this release."""
    for placeholder in ("<release>", "<namespace>"):
        assert placeholder in block, placeholder
    block = block.replace("<its chart>", str(m.trainer)).replace("<its version>", "2.3.0")
    return block.replace("<release>", TRAINER_RELEASE).replace("<namespace>", TRAINER_NS)


def gives_up(m: Manager, annotate: bool = True) -> str:
    """Step 2's first block; without the keep annotation when asked (the page's warning)."""
    block = migration_blocks()[0]
    assert "<its chart>" in block and "<its version>" in block
    if not annotate:
        lines = block.splitlines()
        first = next(i for i, line in enumerate(lines) if "helm.sh/resource-policy=keep" in line)
        block = "\n".join(lines[: first - 1] + lines[first + 1 :])
        assert "annotate" not in block
    return m.run(filled(block, m), "operations.md step 2: Trainer's release gives its CRDs up")


def test_trainers_release_gives_its_crds_up_and_ours_takes_them_with_every_trainjob_kept(
    lone: Bed, tmp_path: Path
) -> None:
    m = Manager(lone, tmp_path)
    objects = m.trainers_release_holds_the_crds()
    before = m.crd_owners()
    _, take_over, uninstall = migration_blocks()

    gives_up(m)
    m.still_kept(objects)
    assert {uid for uid, _, _ in m.crd_owners().values()} == {uid for uid, _, _ in before.values()}
    values = yaml.safe_load(m.run(f"helm get values {TRAINER_RELEASE} -n {TRAINER_NS}", "values"))
    key, value = PLATFORM_VALUE
    assert values["webhook"] == {key.split(".")[1]: value}, values  # kept by the upgrade
    assert values["crds"] == {"enabled": False}, values

    # Trainer stays beside the dispatcher: ours is installed with its chart, after the loop.
    m.run(take_over, "operations.md step 2: our release is given the CRDs")
    m.run(
        f"helm install {OURS} charts/trainjob-multicluster -n {OURS_NS} --create-namespace "
        "-f examples/install/values-manager.yaml",
        "our release (configuration.md's command for the manager)",
    )
    ours = m.crd_owners()
    assert {(release, project) for _, release, project in ours.values()} == {
        (OURS, "trainjob-multicluster")
    }, ours
    assert m.ours_typed()
    m.still_kept(objects)
    # Trainer's next upgrade leaves the CRDs ours, then its uninstall as the page says.
    m.run(
        f"helm upgrade {TRAINER_RELEASE} {m.trainer} -n {TRAINER_NS} --reuse-values --no-hooks",
        "Trainer's release upgraded again",
    )
    assert m.crd_owners() == ours and m.ours_typed()
    m.run(filled(uninstall, m), "operations.md: Trainer's uninstall")
    assert m.crd_owners() == ours
    m.still_kept(objects)
    m.run(f"helm uninstall {OURS} -n {OURS_NS}", "our release uninstalled")
    assert {uid for uid, _, _ in m.crd_owners().values()} == {uid for uid, _, _ in ours.values()}
    m.still_kept(objects)


def test_after_trainers_release_the_runbooks_apply_of_our_crds_needs_force_conflicts(
    lone: Bed, tmp_path: Path
) -> None:
    """Step 4: where Trainer's release leaves, the runbook's server-side apply of our CRDs
    meets Helm's field manager; `--force-conflicts`, as the page says, takes them."""
    m = Manager(lone, tmp_path)
    objects = m.trainers_release_holds_the_crds()
    _, _, uninstall = migration_blocks()
    gives_up(m)
    m.run(filled(uninstall, m), "operations.md: Trainer's uninstall")
    m.still_kept(objects)
    refused = m.run("kubectl apply --server-side -k crds/", "the runbook's apply", check=False)
    assert 'conflict with "helm"' in refused, refused
    page = OPERATIONS.read_text()
    assert "kubectl apply --server-side --force-conflicts" in page
    m.run("kubectl apply --server-side --force-conflicts -k crds/", "operations.md step 4")
    assert m.ours_typed()
    m.still_kept(objects)


def test_without_the_keep_annotation_trainers_upgrade_deletes_every_trainjob(
    lone: Bed, tmp_path: Path
) -> None:
    """The page's warning, shown: step 2's upgrade without the annotation before it."""
    m = Manager(lone, tmp_path)
    m.trainers_release_holds_the_crds()
    gives_up(m, annotate=False)
    wait_for(
        lambda: (
            not {c.metadata.name for c in m.ext.list_custom_resource_definition().items} & set(CRDS)
        ),
        60,
        what="the CRDs, and every TrainJob with them, to go",
    )
