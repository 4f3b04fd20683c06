"""trainjob-kueue-config on Kueue's own shipped configuration (its v0.19.2 module): only the
keys this product needs change, comments stay, and a second run changes nothing."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import builds
from dispatcher.kueue_setup import EXTERNAL, KUEUE_TRAINJOB, change, documents, main

Dict = dict[str, Any]


@pytest.fixture(scope="module")
def kueue() -> Path:
    return builds.module_source_dir("kueue", "sigs.k8s.io/kueue")


def _shipped_config(kueue: Path) -> str:
    return (kueue / "config/components/manager/controller_manager_config.yaml").read_text()


def _expected(before: Dict, *, gate_off: bool) -> Dict:
    after = copy.deepcopy(before)
    integrations = after["integrations"]
    integrations["frameworks"] = [f for f in integrations["frameworks"] if f != KUEUE_TRAINJOB]
    integrations["externalFrameworks"] = [*integrations.get("externalFrameworks", []), EXTERNAL]
    if gate_off:
        after["featureGates"] = {**after.get("featureGates", {}), "MultiKueue": False}
    return after


@pytest.mark.parametrize(("role", "mode", "gate_off"), [
    ("worker", "Replace", False),
    ("manager", "Replace", True),
    ("manager", "Coexist", False),
])  # fmt: skip
def test_the_configuration_file_changes_by_exactly_what_we_need(
    kueue: Path, role: str, mode: str, gate_off: bool
) -> None:
    text = _shipped_config(kueue)
    out, said = change(text, role=role, mode=mode)
    assert yaml.safe_load(out) == _expected(yaml.safe_load(text), gate_off=gate_off)
    assert len(said) == 2 + gate_off
    # Every comment line of Kueue's file is still there.
    comments = [line.strip() for line in text.splitlines() if line.strip().startswith("#")]
    kept = [line.strip() for line in out.splitlines() if line.strip().startswith("#")]
    assert kept == comments
    again, said_again = change(out, role=role, mode=mode)
    assert (again, said_again) == (out, [])


def test_the_configmap_keeps_its_name_and_drops_what_the_server_owns(kueue: Path) -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kueue-manager-config",
            "namespace": "kueue-system",
            "uid": "0b7e",
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"},
        },
        "data": {"controller_manager_config.yaml": _shipped_config(kueue)},
    }
    out, _ = change(yaml.safe_dump(config_map), role="manager")
    got = yaml.safe_load(out)
    assert got["metadata"] == {
        "name": "kueue-manager-config",
        "namespace": "kueue-system",
        "resourceVersion": "42",  # apply fails if someone changed it meanwhile
        "annotations": {"a": "b"},
    }
    inner = yaml.safe_load(got["data"]["controller_manager_config.yaml"])
    assert inner == _expected(yaml.safe_load(_shipped_config(kueue)), gate_off=True)


def test_helm_values_give_only_the_changed_values(kueue: Path) -> None:
    values = yaml.safe_load((kueue / "charts/kueue/values.yaml").read_text())
    values["controllerManager"]["featureGates"] = [{"name": "PartialAdmission", "enabled": True}]
    out, said = change(yaml.safe_dump(values), role="manager")
    got = yaml.safe_load(out)
    assert set(got) == {"managerConfig", "controllerManager"}
    assert got["controllerManager"] == {
        "featureGates": [
            {"name": "PartialAdmission", "enabled": True},
            {"name": "MultiKueue", "enabled": False},
        ]
    }
    before = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    after = yaml.safe_load(got["managerConfig"]["controllerManagerConfigYaml"])
    assert after == _expected(before, gate_off=False)  # the chart's flags carry the gate
    assert said[-1] == "controllerManager.featureGates: MultiKueue disabled"


@pytest.mark.parametrize(
    "text",
    ["- a list\n", "kind: Deployment\n", "kind: ConfigMap\ndata: {}\n", "managerConfig: {}\n"],
)
def test_anything_else_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        change(text, role="worker")


@pytest.mark.parametrize("role", ["worker", "manager"])
def test_check_names_what_is_missing_and_passes_once_changed(
    kueue: Path, role: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _shipped_config(kueue)
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["--role", role, "--check"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"would change integrations.externalFrameworks: added {EXTERNAL}" in err
    assert ("featureGates.MultiKueue" in err) == (role == "manager")

    changed, _ = change(text, role=role)
    monkeypatch.setattr("sys.stdin", io.StringIO(changed))
    assert main(["--role", role, "--check"]) == 0
    assert capsys.readouterr() == ("", f"trainjob-kueue-config: configured for the {role}\n")
    # A manager's configuration is not a worker's, nor the other way round, only for the gate.
    monkeypatch.setattr("sys.stdin", io.StringIO(changed))
    other = "worker" if role == "manager" else "manager"
    assert main(["--role", other, "--check"]) == (0 if role == "manager" else 1)


@pytest.mark.parametrize(("role", "gate_off"), [("worker", False), ("manager", True)])
def test_kueues_release_manifests_start_with_the_change_and_nothing_else_moves(
    role: str, gate_off: bool
) -> None:
    """Kueue's manifests.yaml as its release renders it (clusters.kueue, from the module with
    the bed's kubectl): an upgrade piped through the command installs Kueue with our change in
    its ConfigMap from its first start, every other document byte for byte as Kueue ships it."""
    from clusters.kueue import release_manifests

    shipped = release_manifests("registry.k8s.io/kueue/kueue:" + builds.KUEUE_VERSION)
    out, said = change(shipped, role=role)
    assert len(said) == 2 + gate_off
    before = [d for d in yaml.safe_load_all(shipped) if d]
    after = [d for d in yaml.safe_load_all(out) if d]
    assert len(after) == len(before) > 50  # CRDs, RBAC, webhooks, the Deployment ...
    moved = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a != b]
    (i,) = moved
    assert (after[i]["kind"], after[i]["metadata"]["name"]) == ("ConfigMap", "kueue-manager-config")
    config = yaml.safe_load(after[i]["data"]["controller_manager_config.yaml"])
    shipped_config = yaml.safe_load(before[i]["data"]["controller_manager_config.yaml"])
    assert config == _expected(shipped_config, gate_off=gate_off)
    # The other documents as text too, and the stream once more: nothing left to change.
    pieces, shipped_pieces = documents(out), documents(shipped)
    assert len(pieces) == len(shipped_pieces)
    assert [n for n, (a, b) in enumerate(zip(pieces, shipped_pieces, strict=True)) if a != b] == [i]
    assert change(out, role=role) == (out, [])


def test_a_stream_without_kueues_configmap_is_refused_by_name() -> None:
    stream = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\nkind: Namespace\n"
    with pytest.raises(ValueError, match="one ConfigMap kueue-manager-config, found 0 among 2"):
        change(stream, role="worker")
