"""A runtime's failurePolicy on the bed (manager + 2 workers, the worker controller running the
copies; the Job controller and Kueue real): jobs sent through MultiKueue whose pods exit 1
(backoffLimit 0: the first failed pod fails its Job, BackoffLimitExceeded).

- `maxRestarts: 1`, pods failing on the first attempt only: one restart, then Complete on the
  manager with `status.restarts: 1` (brought back from the worker), JobSet's Warning there.
- A rule that fails fast on that reason and the Job controller's message (FailJobSet, an RE2
  pattern), after a rule whose pattern does not match it: Failed at once, no restart.
- Pods that always fail under `maxRestarts: 1`: Failed with JobSet's `ReachedMaxRestarts`
  after one restart."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.kube import Applier, load_manifests
from tests.support.multikueue import MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]


def runtime_with(mk: MultiKueue, name: str, policy: Dict) -> str:
    """torch-distributed with backoffLimit 0 and `policy`, on every cluster."""
    example = setup.REPO / "examples" / "runtimes" / "torch-distributed.yaml"
    runtime = load_manifests(example.read_text())[0]
    runtime["metadata"]["name"] = name
    spec = runtime["spec"]["template"]["spec"]
    spec["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    spec["failurePolicy"] = policy
    for cluster in [mk.manager, *mk.workers]:
        Applier(mk.bed.api(cluster)).apply(runtime)
    return name


def test_failure_policies_restart_fail_fast_and_run_out(bed: Bed) -> None:
    mk = MultiKueue(bed)
    once = runtime_with(mk, "restart-once", {"maxRestarts": 1})
    fast = runtime_with(
        mk,
        "fail-fast",
        {
            "maxRestarts": 3,
            "rules": [
                {
                    "name": "oom",
                    "action": "RestartJobSetAndIgnoreMaxRestarts",
                    "onJobFailureMessagePatterns": ["OOMKilled"],
                },
                {
                    "name": "backoff",
                    "action": "FailJobSet",
                    "onJobFailureReasons": ["BackoffLimitExceeded"],
                    # The Job controller says "Job has reached the specified backoff limit".
                    "onJobFailureMessagePatterns": ["(?i)reached the specified BACKOFF limit$"],
                },
            ],
        },
    )
    first_only = {"bed.trainjob.dev/failing-attempts": "1"}
    mk.submit("flaky", runtime=once, exit_code=1, run="1s", pod_annotations=first_only)
    mk.submit("doomed", runtime=fast, exit_code=1, run="1s")
    mk.submit("stubborn", runtime=once, exit_code=1, run="1s")

    mk.wait_until("flaky", "Complete", timeout=120)
    flaky = mk.get("flaky") or {}
    assert flaky["status"]["restarts"] == 1, flaky["status"]
    assert flaky["status"]["restartsCountTowardsMax"] == 1
    worker = flaky["status"]["clusterName"]
    there = client.CoreV1Api(bed.api(worker)).list_namespaced_event(
        mk.ns, field_selector="involvedObject.name=flaky"
    )
    assert "RestartJobSetFailurePolicyAction" in [e.reason for e in there.items]

    doomed = mk.wait_until("doomed", "Failed", timeout=120)
    assert doomed["reason"] == "FailJobSetFailurePolicyAction", doomed
    assert "BackoffLimitExceeded" in doomed["message"], doomed
    assert "restarts" not in ((mk.get("doomed") or {}).get("status") or {})

    stubborn = mk.wait_until("stubborn", "Failed", timeout=120)
    assert stubborn["reason"] == "ReachedMaxRestarts", stubborn
    assert "(first failed job: stubborn-node-0)" in stubborn["message"], stubborn
    assert (mk.get("stubborn") or {})["status"]["restarts"] == 1
