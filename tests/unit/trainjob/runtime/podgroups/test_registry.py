"""The registry picks the gang scheduler a runtime's podGroupPolicy names
(trainjob/runtime/podgroups/), and how the pods name their group for each."""

from __future__ import annotations

import pytest

from kubebase.objects import Dict
from tests.unit.trainjob.runtime.podgroups import GROUP_NAMED_BY, gang_runtime, info_of
from trainjob.models import PodGroupPolicy
from trainjob.runtime.podgroups import (
    BY_NAME,
    PLUGINS,
    ignored_message,
    mark_pods,
    names_group,
    select_plugin,
)
from trainjob_api.views import JobView


@pytest.mark.parametrize(
    ("policy", "name"),
    [
        (None, None),
        ({}, None),  # `podGroupPolicy: {}` asks for nothing
        ({"coscheduling": {}}, "coscheduling"),
        ({"volcano": {}}, "volcano"),
        ({"volcano": {"networkTopology": {"mode": "soft"}}}, "volcano"),
    ],
)
def test_the_scheduler_named_by_the_policy_applies(policy: Dict | None, name: str | None) -> None:
    parsed = None if policy is None else PodGroupPolicy.model_validate(policy)
    plugin = select_plugin(parsed)
    assert (plugin and plugin.name) == name


def test_every_plugin_has_a_name_of_its_own_and_a_kind_of_its_own() -> None:
    assert len(BY_NAME) == len(PLUGINS)
    assert len({p.kind.api_version for p in PLUGINS}) == len(PLUGINS)


@pytest.mark.parametrize(("name", "field", "key"), GROUP_NAMED_BY)
def test_every_pod_names_its_group_as_its_scheduler_reads_it(
    name: str, field: str, key: str
) -> None:
    plugin = BY_NAME[name]
    info = info_of(gang_runtime({name: {}}))
    other = next(p for p in PLUGINS if p is not plugin)
    mark_pods(info, plugin)
    for ps in info.pod_sets:
        assert ps.pod_template["metadata"][field][key] == "tj"
        job = JobView({"spec": {"template": ps.pod_template}})
        assert names_group(job, plugin, "tj")
        assert not names_group(job, plugin, "other")
        assert not names_group(job, other, "tj")
    message = ignored_message(plugin)
    assert f"podGroupPolicy.{name} asks for a PodGroup ({plugin.kind.group}/" in message
    assert f"({plugin.serves} is not installed)" in message


def test_a_pods_own_labels_and_annotations_are_kept_beside_its_group() -> None:
    for name, field, key in GROUP_NAMED_BY:
        info = info_of(gang_runtime({name: {}}))
        for ps in info.pod_sets:
            ps.pod_template.setdefault("metadata", {})[field] = {"team": "ml"}
        mark_pods(info, BY_NAME[name])
        for ps in info.pod_sets:
            assert ps.pod_template["metadata"][field] == {"team": "ml", key: "tj"}
