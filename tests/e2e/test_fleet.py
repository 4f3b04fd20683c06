"""`trainjob-fleet` against the bed: a worker drained and removed while TrainJobs run on it,
then joined again, each in one command. Nothing is lost, nothing runs twice, and the worker
joined takes work again."""

from __future__ import annotations

import sys
import time

import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from clusters.install import worker_secret
from clusters.kube import Applier, load_manifests
from clusters.setup import multikueue_objects
from tests.support.multikueue import KUEUE, MultiKueue, dispatched_to, fleet

pytestmark = [pytest.mark.bed, pytest.mark.disruptive, pytest.mark.usefixtures("controllers")]


def _clusters(mk: MultiKueue) -> list[str]:
    config = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueconfigs", "multikueue")
    return list(config["spec"]["clusters"])


def test_a_worker_drained_removed_and_joined_again_loses_nothing_and_runs_nothing_twice(
    bed: Bed,
) -> None:
    mk = MultiKueue(bed)
    kueue_ns = bed.config.kueue_namespace
    first, leaving = mk.workers[0], mk.workers[-1]
    core = client.CoreV1Api(bed.api(mk.manager))
    try:
        # Work on the worker that leaves, and more queued behind it.
        with mk.filled(first, cpu="16"):
            for i in range(3):
                mk.submit(f"there-{i}", run="15s")
            for i in range(3):
                wait_for(lambda i=i: mk.running_on(f"there-{i}"), 60, what=f"there-{i} sent")
        assert all(mk.running_on(f"there-{i}") == [leaving] for i in range(3))

        removed = fleet(bed, "remove", "--name", leaving, "--namespace", kueue_ns)
        assert removed.returncode == 0, removed.stderr
        # it waited for what ran there, then took the worker's objects away
        assert "still running there" in removed.stderr and f"{leaving} removed" in removed.stderr
        assert _clusters(mk) == [w for w in mk.workers if w != leaving]
        assert mk.custom().list_cluster_custom_object(*KUEUE, "multikueueclusters")["items"]
        with pytest.raises(client.ApiException) as gone:
            mk.custom().get_cluster_custom_object(*KUEUE, "multikueueclusters", leaving)
        assert gone.value.status == 404
        with pytest.raises(client.ApiException) as gone:
            core.read_namespaced_secret(f"{leaving}-secret", kueue_ns)
        assert gone.value.status == 404
        # What ran there ended there, once each; nothing new goes there now.
        for i in range(3):
            mk.wait_until(f"there-{i}", "Complete", timeout=120)
            assert dispatched_to(mk, f"there-{i}") == [leaving], dispatched_to(mk, f"there-{i}")
        mk.submit("after-remove")
        mk.wait_until("after-remove", "Complete", timeout=120)
        assert dispatched_to(mk, "after-remove") == [first]

        # The last worker cannot be removed: Kueue's MultiKueueConfig needs one.
        refused = fleet(bed, "remove", "--name", first, "--namespace", kueue_ns, timeout=60)
        assert refused.returncode == 1 and "the only cluster" in refused.stderr, refused.stderr

        began = time.monotonic()
        joined = fleet(
            bed, "join", "--name", leaving, "--worker-kubeconfig", str(bed.kubeconfig(leaving)),
            "--server", bed.pod_server(leaving), "--namespace", kueue_ns,
        )  # fmt: skip
        assert joined.returncode == 0, joined.stderr
        joining = time.monotonic() - began
        assert f"{leaving} joined" in joined.stderr
        assert _clusters(mk) == mk.workers  # last again, as it was
        again = fleet(
            bed, "join", "--name", leaving, "--worker-kubeconfig", str(bed.kubeconfig(leaving)),
            "--server", bed.pod_server(leaving), "--namespace", kueue_ns,
        )  # fmt: skip
        assert again.returncode == 0 and _clusters(mk) == mk.workers, again.stderr
        listed = fleet(bed, "list", "--namespace", kueue_ns)
        assert listed.returncode == 0 and f"{leaving}\tActive" in listed.stdout, listed
        # It takes work again.
        with mk.filled(first, cpu="16"):
            submitted = time.monotonic()
            mk.submit("after-join")
            mk.wait_until("after-join", "Complete", timeout=120)
            took = time.monotonic() - submitted
            print(
                f"[figure] join: {joining:.1f} s to Active; then a 3 s TrainJob from submit "
                f"to Complete there: {took:.1f} s",
                file=sys.stderr,
            )
        assert dispatched_to(mk, "after-join") == [leaving]
    finally:  # the bed as it was for the tests after this one
        Applier(bed.api(mk.manager)).apply_all(load_manifests(worker_secret(bed, leaving)))
        Applier(bed.api(mk.manager)).apply_all(multikueue_objects(bed))


def test_join_makes_a_missing_config_and_names_what_it_will_not_touch(bed: Bed) -> None:
    mk = MultiKueue(bed)
    kueue_ns, first = bed.config.kueue_namespace, mk.workers[0]
    worker = ["--worker-kubeconfig", str(bed.kubeconfig(first)), "--server", bed.pod_server(first)]
    try:
        # A fleet's first worker: the MultiKueueConfig is made with it.
        made = fleet(bed, "--config", "fleet-new", "join", "--name", first,
                     "--namespace", kueue_ns, *worker)  # fmt: skip
        assert made.returncode == 0, made.stderr
        config = mk.custom().get_cluster_custom_object(*KUEUE, "multikueueconfigs", "fleet-new")
        assert config["spec"]["clusters"] == [first]
        # The same name by another source: the MultiKueueCluster is not ours to change.
        other = fleet(bed, "--config", "fleet-new", "join", "--name", first,
                      "--cluster-profile", "elsewhere", timeout=60)  # fmt: skip
        assert other.returncode == 1 and "exists with another source" in other.stderr, other
        # One way to reach the worker, not two, nor none.
        both = fleet(bed, "join", "--name", "w", "--cluster-profile", "p", *worker, timeout=60)
        neither = fleet(bed, "join", "--name", "w", timeout=60)
        for refused in (both, neither):
            assert refused.returncode == 2 and "one of them" in refused.stderr, refused
    finally:
        mk.custom().delete_cluster_custom_object(*KUEUE, "multikueueconfigs", "fleet-new")
