"""How the worker controller recognises Kubeflow Trainer's controller: by its webhooks, as
Trainer v2.3's own manifests name them (read from its module, not copied)."""

from __future__ import annotations

from pathlib import Path

import yaml

from clusters import builds
from tests.support.files import YAML_LOADER
from trainjob.crd import missing_status_fields, trainer_controller_problem
from trainjob_api.views import ObjectView

REPO = Path(__file__).resolve().parents[2]


def _trainer_webhook_configurations() -> list[dict[str, object]]:
    trainer = builds.module_source_dir(
        "trainer", f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"
    )
    docs = yaml.safe_load_all((trainer / "manifests/base/webhook/manifests.yaml").read_text())
    return [d for d in docs if d and d["kind"].endswith("WebhookConfiguration")]


def test_trainers_own_webhook_configurations_are_recognised_by_name() -> None:
    configurations = _trainer_webhook_configurations()
    assert configurations
    problem = trainer_controller_problem(configurations)
    assert problem is not None
    assert "validator.trainjob.trainer.kubeflow.org" in problem
    assert "defaulter.trainjob.trainer.kubeflow.org" in problem
    assert "reconciles nothing until" in problem


def test_ours_kueues_and_none_are_not_trainers() -> None:
    ours = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "trainjob-worker-controller"},
        "webhooks": [{"name": "suspend-queued.worker-controller.trainjob.dev"}],
    }
    kueue = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kueue-mutating-webhook-configuration"},
        "webhooks": [{"name": "mtrainjob.kb.io"}, {"name": "mworkload.kb.io"}],
    }
    assert trainer_controller_problem([ours, kueue, {"metadata": {"name": "empty"}}]) is None
    assert trainer_controller_problem([]) is None


def test_trainers_own_crd_lacks_our_status_fields_and_ours_has_them() -> None:
    trainer = builds.module_source_dir(
        "trainer", f"{builds.TRAINER_PACKAGE}@{builds.TRAINER_API_VERSION}"
    )
    theirs = yaml.load(
        (trainer / "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml").read_text(),
        Loader=YAML_LOADER,
    )
    ours = yaml.load(
        (REPO / "crds/trainer.kubeflow.org_trainjobs.yaml").read_text(), Loader=YAML_LOADER
    )
    assert missing_status_fields(ObjectView(theirs)) == ["clusterName"]
    assert missing_status_fields(ObjectView(ours)) == []
    assert missing_status_fields(ObjectView({"spec": {"versions": [{"name": "v2"}]}})) is None
