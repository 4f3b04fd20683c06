"""What the web view's server passes on to the manager (plugin/kubectl_trainjob/ui.py's
allow-list)."""

from __future__ import annotations

import pytest

from kubectl_trainjob.ui import ALLOWED


@pytest.mark.parametrize(
    "path",
    [
        "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert.v2",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/story",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/log",
        "/apis/view.trainjob.dev/v1alpha1/workers",
        "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters",
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
    ],
)
def test_the_reads_the_page_makes_pass(path: str) -> None:
    assert ALLOWED.fullmatch(path)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/secrets",
        "/api/v1/namespaces/team-a/pods",
        "/api/v1/namespaces/team-a/pods/p/exec",
        "/api/v1/namespaces/team-a/services/s/proxy",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status/../../../secrets",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status",
        "/apis/view.trainjob.dev/v1alpha1/namespaces/team-a/trainjobs/bert/exec",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/Team_A/trainjobs",
        "/apis/trainer.kubeflow.org/v1alpha1/trainjobs/",
    ],
)
def test_nothing_else_passes(path: str) -> None:
    assert not ALLOWED.fullmatch(path)
