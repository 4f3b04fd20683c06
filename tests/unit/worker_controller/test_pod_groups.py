"""Gang scheduling on a worker: what the pass decides with and without the PodGroup API a
runtime's podGroupPolicy asks for (the PodGroups themselves: the plugins' tables beside
trainjob/runtime/podgroups/; no cluster here, the bed's tests/e2e/test_pod_groups.py installs
the CRDs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import OWNER, edit, make_trainjob
from tests.support.worker_plans import OUR_SERVICE, Dict, as_made, conditions, job, observe
from tests.unit.trainjob.runtime.podgroups import GROUP_NAMED_BY, RESOURCES, gang_runtime
from tests.unit.trainjob.runtime.podgroups import gang_trainjob as trainjob


def pod_meta(obj: Dict) -> Dict:
    return obj["spec"]["template"]["metadata"]


@pytest.mark.parametrize(("policy", "field", "key"), GROUP_NAMED_BY)
def test_where_the_api_is_served_the_group_comes_before_the_jobs_and_every_pod_names_it(
    policy: str, field: str, key: str
) -> None:
    runtime = gang_runtime({policy: {}})
    plan = observe(trainjob(), runtime, services=[OUR_SERVICE], pod_group_apis=frozenset({policy}))
    made = [(o["kind"], o["metadata"]["name"]) for o in plan.create]
    assert made[0] == ("PodGroup", "tj") and {k for k, _ in made[1:]} == {"Job"}
    group = plan.create[0]
    assert group["metadata"]["ownerReferences"] == [OWNER]
    assert group["metadata"]["labels"]["trainjob.dev/trainjob-name"] == "tj"
    for obj in plan.create[1:]:
        assert pod_meta(obj)[field][key] == "tj"
    assert "PodGroupPolicyIgnored" not in conditions(plan)
    # The other scheduler's API served instead: ungrouped, and said.
    other = "volcano" if policy == "coscheduling" else "coscheduling"
    plan = observe(trainjob(), runtime, services=[OUR_SERVICE], pod_group_apis=frozenset({other}))
    assert all(o["kind"] == "Job" for o in plan.create)
    assert all(key not in (pod_meta(o).get(field) or {}) for o in plan.create)
    assert conditions(plan)["PodGroupPolicyIgnored"] == ("True", "PodGroupPolicyIgnored")
    message = plan.status["conditions"][0]["message"]  # type: ignore[index]
    assert f"podGroupPolicy.{policy}" in message and "does not serve" in message


def named(name: str, labels: Dict | None = None, **state: Any) -> Dict:
    """A Job of `trainjob(1)` on the gang runtime, its pods as made (their labels as given)."""
    out = job(name, **state)
    made = {o["metadata"]["name"]: o for o in as_made(trainjob(1), gang_runtime({}))}
    template = {
        "metadata": {"labels": labels or {}},
        "spec": made[name]["spec"]["template"]["spec"],
    }
    return edit(out).spec(template=template).obj()


def test_jobs_keep_what_they_were_made_with_when_the_api_comes_or_goes() -> None:
    """A pod template is never changed on a live Job: a CRD installed while the job runs does
    not group its pods (they are not relabelled), nor does one removed ungroup them."""
    runtime = gang_runtime({"coscheduling": {}})
    served = frozenset({"coscheduling"})
    tj = trainjob(1)
    first = observe(tj, runtime, services=[OUR_SERVICE])
    edit(tj).status(first.status)
    ungrouped = [named("tj-launcher-0", active=1), named("tj-node-0", active=1)]
    plan = observe(tj, runtime, jobs=ungrouped, services=[OUR_SERVICE], pod_group_apis=served)
    assert plan.create == [] and plan.patch == []
    assert conditions(plan)["PodGroupPolicyIgnored"] == ("True", "PodGroupPolicyIgnored")
    assert not plan.events  # said once

    group = {"scheduling.x-k8s.io/pod-group": "tj"}
    grouped = [named("tj-launcher-0", group, active=1), named("tj-node-0", group, active=1)]
    plan = observe(trainjob(1), runtime, jobs=grouped, services=[OUR_SERVICE])
    assert plan.create == [] and plan.patch == []
    assert "PodGroupPolicyIgnored" not in conditions(plan)
    # Suspended (Kueue evicts it): the Jobs are suspended as they were made, label and all
    # (a write of spec.suspend alone).
    suspended = make_trainjob(suspend=True, trainer={"numNodes": 1, "resourcesPerNode": RESOURCES})
    plan = observe(suspended, runtime, jobs=grouped, services=[OUR_SERVICE])
    assert sorted(o["metadata"]["name"] for o in plan.patch) == ["tj-launcher-0", "tj-node-0"]
    assert all(o["spec"] == {"suspend": True} for o in plan.patch)
