"""The vetting of a worker kubeconfig before any library loads it
(dispatcher/workers/kubeconfigs.py)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dispatcher.workers.kubeconfigs import check_kubeconfig
from tests.support.kubeconfigs import CA_DATA, kubeconfig

Dict = dict[str, Any]


def test_a_good_kubeconfig_passes() -> None:
    cfg, problem = check_kubeconfig(kubeconfig(), "s")
    assert problem is None and cfg is not None


@pytest.mark.parametrize(
    ("cluster", "user", "reason", "fragment"),
    [
        (
            {"server": "https://1.2.3.4", "insecure-skip-tls-verify": True},
            None,
            "InsecureKubeConfig",
            "insecure-skip-tls-verify",
        ),
        (
            {"server": "https://1.2.3.4", "certificate-authority": "/ca.crt"},
            None,
            "InsecureKubeConfig",
            "certificate-authority-data",
        ),
        ({"server": ""}, None, "BadKubeConfig", "no server URL"),
        ({"server": "https://bad_host!"}, None, "InsecureKubeConfig", "is not an https URL"),
        (None, {"tokenFile": "/t"}, "InsecureKubeConfig", "tokenFile"),
        (None, {"exec": {"command": "x"}}, "InsecureKubeConfig", "exec"),
        (None, {"auth-provider": {"name": "gcp"}}, "InsecureKubeConfig", "auth-provider"),
        (None, {"username": "a", "password": "b"}, "InsecureKubeConfig", "basic auth"),
    ],
)
def test_kubeconfigs_kueue_refuses_are_refused_with_the_reason(
    cluster: Dict | None, user: Dict | None, reason: str, fragment: str
) -> None:
    cfg, problem = check_kubeconfig(kubeconfig(cluster, user), "worker1-secret")
    assert cfg is None and problem is not None
    assert problem.reason == reason and fragment in problem.message
    assert "worker1-secret" in problem.message


def test_garbage_and_missing_kubeconfigs_are_bad() -> None:
    for raw in (b"", b"clusters: [", b"just a string"):
        _, problem = check_kubeconfig(raw, "s")
        assert problem is not None and problem.reason == "BadKubeConfig"


def _edited(edit: Any) -> bytes:
    cfg = yaml.safe_load(kubeconfig())
    edit(cfg)
    return yaml.safe_dump(cfg).encode()


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda k: k.update({"current-context": "elsewhere"}), "'elsewhere' names no context"),
        (lambda k: k.pop("current-context"), "current-context is not set"),
        (
            lambda k: k["clusters"][0]["cluster"].update({"certificate-authority-data": "%%"}),
            "certificate-authority-data is not base64",
        ),
        (lambda k: k.update({"clusters": ["w"]}), "clusters[0] must be a mapping with a name"),
        (lambda k: k["contexts"][0].update({"context": "w"}), "must have a `context` mapping"),
        (
            lambda k: k["contexts"][0]["context"].update({"cluster": "nope"}),
            "names cluster 'nope', which is not listed",
        ),
        (
            lambda k: k["users"][0]["user"].update({"client-key-data": "not base64!"}),
            "client-key-data is not base64",
        ),
        (  # base64, but not a certificate: no connection could be made with it
            lambda k: k["clusters"][0]["cluster"].update({"certificate-authority-data": "Q0E="}),
            "cannot connect with it (SSLError",
        ),
    ],
)
def test_malformed_kubeconfigs_are_bad_naming_the_field_never_the_data(
    edit: Any, fragment: str
) -> None:
    raw = _edited(edit)
    cfg, problem = check_kubeconfig(raw, "worker1-secret")
    assert cfg is None and problem is not None
    assert problem.reason == "BadKubeConfig" and fragment in problem.message, problem.message
    assert CA_DATA not in problem.message and "abc" not in problem.message
