"""The product installed with the Helm chart instead of deploy/, with values that are not the
defaults, runs a TrainJob manager -> worker -> back; then deploy/ is installed again for the
tests that follow."""

from __future__ import annotations

import pytest
from kubernetes import client

from clusters import setup
from clusters.bed import Bed
from clusters.install import DISPATCHER, WORKER_CONTROLLER
from tests.support.multikueue import LOST_TIMEOUT, MultiKueue

pytestmark = [pytest.mark.bed, pytest.mark.disruptive]

VALUES = {
    "replicas": 1,
    "webhook": {"excludedNamespaces": ["kube-system", "not-for-trainjobs"]},
    "config": {"workers": 4},
}


def test_the_chart_installs_a_product_that_runs_trainjobs(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    setup.stop_controllers(bed, controllers)
    charted: list[setup.Controller] = []
    try:
        charted = setup.start_controllers(
            bed, worker_lost_timeout=LOST_TIMEOUT, chart_values=VALUES
        )
        assert sorted((c.cluster, c.name) for c in charted) == sorted(
            [(w.name, WORKER_CONTROLLER) for w in bed.config.workers]
            + [(bed.config.managers[0].name, DISPATCHER)]
        )  # one replica each, as the values say
        manager = bed.config.managers[0].name
        # The chart's objects, labelled as Helm labels them (the bed applies the rendering).
        config = client.CoreV1Api(bed.api(manager)).read_namespaced_config_map(
            "trainjob-dispatcher-config", "trainjob-system"
        )
        assert config.metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
        assert "workers: 4" in config.data["config.yaml"]
        hook = client.AdmissionregistrationV1Api(
            bed.api(manager)
        ).read_mutating_webhook_configuration("trainjob-dispatcher")
        (expr,) = hook.webhooks[0].namespace_selector.match_expressions
        assert expr.values == ["kube-system", "not-for-trainjobs", "trainjob-system"]

        mk = MultiKueue(bed)
        made = mk.submit("charted")
        assert made["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        mk.wait_until("charted", "Complete", timeout=90)
    finally:
        setup.stop_controllers(bed, charted)
        # deploy/ again, in the session's list, for the tests that follow.
        controllers[:] = setup.start_controllers(bed, worker_lost_timeout=LOST_TIMEOUT)
