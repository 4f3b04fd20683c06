"""The component build phase (trainjob/runtime/components.py): what a TrainJob's pods need
besides its Jobs and Service, from each plugin that asks for it, in BUILDERS' order, each
owned by the TrainJob but a claim the runtime keeps."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from tests.support.builders import edit, mpi_runtime
from tests.unit.trainjob.runtime.podgroups import gang_runtime, info_of
from trainjob.runtime.components import build
from trainjob.runtime.podgroups import BY_NAME


def claims(*retained: str, deleted: tuple[str, ...] = ()) -> list[Dict]:
    """volumeClaimPolicies: one policy for the kept templates, one for those deleted."""

    def policy(names: tuple[str, ...], when: str | None) -> Dict:
        out: Dict = {"templates": [{"metadata": {"name": n}, "spec": {}} for n in names]}
        if when:
            out["retentionPolicy"] = {"whenDeleted": when}
        return out

    return [policy(retained, None), policy(deleted, "Delete")]


def with_claims(runtime: Dict, policies: list[Dict]) -> Dict:
    return edit(runtime).template_spec(volumeClaimPolicies=policies).obj()


def grouped_by(runtime: Dict, scheduler: str) -> Dict:
    return edit(runtime).spec(podGroupPolicy={scheduler: {}}).obj()


@pytest.mark.parametrize(
    ("runtime", "grouped", "made"),
    [
        (gang_runtime(None), None, []),
        (gang_runtime({"coscheduling": {}}), None, []),  # asked, not served: not grouped
        (gang_runtime({"coscheduling": {}}), "coscheduling", [("PodGroup", "tj", True)]),
        (gang_runtime({"volcano": {}}), "volcano", [("PodGroup", "tj", True)]),
        (mpi_runtime(), None, [("ConfigMap", "tj-mpi-hostfile", True)]),
        (
            grouped_by(mpi_runtime(), "coscheduling"),
            "coscheduling",
            [("PodGroup", "tj", True), ("ConfigMap", "tj-mpi-hostfile", True)],
        ),
        (
            with_claims(gang_runtime({"volcano": {}}), claims("data", deleted=("scratch",))),
            "volcano",
            [
                ("PodGroup", "tj", True),
                ("PersistentVolumeClaim", "data-tj", False),  # Retain, the default: kept
                ("PersistentVolumeClaim", "scratch-tj", True),
            ],
        ),
        (
            with_claims(mpi_runtime(), claims(deleted=("scratch",))),
            None,
            [("ConfigMap", "tj-mpi-hostfile", True), ("PersistentVolumeClaim", "scratch-tj", True)],
        ),
    ],
)
def test_each_plugin_gives_what_it_asks_for_in_order(
    runtime: Dict, grouped: str | None, made: list[tuple[str, str, bool]]
) -> None:
    info = info_of(runtime, nodes=2)
    parts = build(info, None if grouped is None else BY_NAME[grouped])
    assert [(p.obj["kind"], p.obj["metadata"]["name"], p.owned) for p in parts] == made
    assert all(p.obj["metadata"]["namespace"] == "ns" for p in parts)
