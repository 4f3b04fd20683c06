"""A ClusterProfile's access providers -> the kubeconfig a worker is reached with (Kueue 0.19's
rules, the Cluster Inventory API's choice of provider)."""

from __future__ import annotations

import pytest

from dispatcher.settings import DispatcherSettings, kueue_multikueue_settings
from dispatcher.workers.cluster_profiles import Problem, kubeconfig_for
from kubecontrol.credentials import credentials_from_kubeconfig
from kubecontrol.exec_credentials import EXEC_EXTENSION

V1 = "client.authentication.k8s.io/v1"
TOKEN = {"apiVersion": V1, "command": "/bin/token", "args": ["--fleet"], "provideClusterInfo": True}
OTHER = {"apiVersion": V1, "command": "/bin/other"}


def profile(*providers: tuple[str, str], deprecated: tuple[str, str] | None = None) -> dict:
    def entry(name: str, server: str) -> dict:
        return {
            "name": name,
            "cluster": {
                "server": server,
                "certificate-authority-data": "Q0E=",
                "tls-server-name": "ignored.example",  # the access library keeps no such field
                "extensions": [{"name": EXEC_EXTENSION, "extension": {"audience": "w1"}}],
            },
        }

    status: dict = {"accessProviders": [entry(n, s) for n, s in providers]}
    if deprecated:
        status["credentialProviders"] = [entry(*deprecated)]
    return {"metadata": {"name": "w1", "namespace": "kueue-system"}, "status": status}


def test_the_first_configured_provider_the_profile_offers_is_used() -> None:
    made = kubeconfig_for(
        profile(("other", "https://10.0.0.2"), ("token", "https://w1.example:6443")),
        "w1",
        "kueue-system",
        [("missing", OTHER), ("token", TOKEN), ("other", OTHER)],
    )
    assert not isinstance(made, Problem)
    assert made["clusters"][0]["cluster"] == {
        "server": "https://w1.example:6443",
        "certificate-authority-data": "Q0E=",
        "extensions": [{"name": EXEC_EXTENSION, "extension": {"audience": "w1"}}],
    }
    assert made["users"][0]["user"]["exec"] == {**TOKEN, "interactiveMode": "Never"}
    creds = credentials_from_kubeconfig(made)  # what the worker's client is made from
    assert creds.server == "https://w1.example:6443" and creds.ca_pem == "CA"
    assert creds.exec_plugin is not None and creds.exec_plugin.args == ("--fleet",)
    assert '"audience": "w1"' in (creds.exec_plugin.cluster_info or "")


def test_access_providers_win_over_the_deprecated_credential_providers() -> None:
    made = kubeconfig_for(
        profile(("token", "https://10.0.0.9"), deprecated=("token", "https://10.0.0.1")),
        "w1",
        "kueue-system",
        [("token", TOKEN)],
    )
    assert not isinstance(made, Problem)
    assert made["clusters"][0]["cluster"]["server"] == "https://10.0.0.9"


@pytest.mark.parametrize(
    ("found", "providers", "reason", "said"),
    [
        (None, [("token", TOKEN)], "BadClusterProfile", '"w1" not found in kueue-system'),
        (
            profile(("other", "https://10.0.0.2")),
            [("token", TOKEN)],
            "BadClusterProfile",
            "no matching cluster accessor found for cluster profile 'w1' (it offers other; "
            "the dispatcher's providers: token)",
        ),
        (profile(("token", "https://10.0.0.2")), [], "BadClusterProfile", "none configured"),
        (
            profile(("token", "https://bad_host:1")),
            [("token", TOKEN)],
            "BadRestConfig",
            "untrusted server endpoint",
        ),
        (
            profile(("token", "http://10.0.0.2")),
            [("token", TOKEN)],
            "BadRestConfig",
            "an https URL",
        ),
    ],
)
def test_what_cannot_be_used_is_said_with_kueues_reason(
    found: dict | None, providers: list, reason: str, said: str
) -> None:
    made = kubeconfig_for(found, "w1", "kueue-system", providers)
    assert isinstance(made, Problem)
    assert made.reason == reason and said in made.message, made


def test_kueues_configuration_turns_profiles_on_with_its_providers() -> None:
    cfg = {
        "featureGates": {"MultiKueueClusterProfile": True},
        "multiKueue": {
            "clusterProfile": {"accessProviders": [{"name": "token", "execConfig": TOKEN}]}
        },
    }
    below = kueue_multikueue_settings(cfg)
    settings = DispatcherSettings(**below)  # type: ignore[arg-type]
    assert settings.cluster_profiles is True
    assert [(p.name, p.exec_config) for p in settings.cluster_profile_providers] == [
        ("token", TOKEN)
    ]
    deprecated = {"multiKueue": {"clusterProfile": {"credentialsProviders": [
        {"name": "old", "execConfig": OTHER}
    ]}}}  # fmt: skip
    assert kueue_multikueue_settings(deprecated)["cluster_profile_providers"] == [
        {"name": "old", "execConfig": OTHER}
    ]
    assert DispatcherSettings().cluster_profiles is False  # Kueue's gate: alpha, off
