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
from dispatcher.commands.kueue_setup import EXTERNAL, KUEUE_TRAINJOB, change, documents, main

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


# A worker that runs Kubeflow Trainer and JobSet: Kueue's own TrainJob integration stays on, ours
# is not there (Kueue refuses a configuration where both name TrainJob).


def _trainer_workers(before: Dict) -> Dict:
    """A configuration (a worker's of ours, or any) as a Trainer worker's: Kueue's integration
    in `frameworks`, ours out of `externalFrameworks`, everything else as it was."""
    after = copy.deepcopy(before)
    integrations = after["integrations"]
    frameworks = integrations.get("frameworks") or ["batch/job"]
    if KUEUE_TRAINJOB not in frameworks:
        integrations["frameworks"] = [*frameworks, KUEUE_TRAINJOB]
    if "externalFrameworks" in integrations:
        integrations["externalFrameworks"] = [
            f for f in integrations["externalFrameworks"] if f != EXTERNAL
        ]
    return after


def test_kueues_shipped_configuration_is_already_a_trainer_workers(kueue: Path) -> None:
    text = _shipped_config(kueue)
    assert change(text, role="trainer-worker") == (text, [])


def test_a_worker_of_ours_turned_trainer_worker_gets_kueues_integration_back(kueue: Path) -> None:
    ours, _ = change(_shipped_config(kueue), role="worker")
    out, said = change(ours, role="trainer-worker")
    assert yaml.safe_load(out) == _trainer_workers(yaml.safe_load(ours))
    assert said == [
        f"integrations.externalFrameworks: removed {EXTERNAL}",
        f"integrations.frameworks: added {KUEUE_TRAINJOB}",
    ]
    comments = [line.strip() for line in ours.splitlines() if line.strip().startswith("#")]
    assert [line.strip() for line in out.splitlines() if line.strip().startswith("#")] == comments
    assert change(out, role="trainer-worker") == (out, [])
    # And back: the worker's configuration again, for a worker that moves to our controller.
    back, _ = change(out, role="worker")
    assert yaml.safe_load(back) == yaml.safe_load(ours)


@pytest.mark.parametrize("frameworks", ["", "  frameworks: []\n"])
def test_a_trainer_workers_file_without_frameworks_gets_kueues_default(frameworks: str) -> None:
    """No frameworks, or an empty list (Kueue's defaulting takes both as its default)."""
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n"
        f"{frameworks}  externalFrameworks:\n  - {EXTERNAL}\n  - Foo.v1.example.com\n"
    )
    out, said = change(text, role="trainer-worker")
    assert yaml.safe_load(out)["integrations"] == {
        "externalFrameworks": ["Foo.v1.example.com"],
        "frameworks": ["batch/job", KUEUE_TRAINJOB],
    }
    assert len(said) == 3
    assert change(out, role="trainer-worker") == (out, [])


@pytest.mark.parametrize(
    ("role", "listed", "key", "name"),
    [
        ("trainer-worker", "externalFrameworks", "externalFrameworks", EXTERNAL),
        ("worker", "frameworks", "frameworks", KUEUE_TRAINJOB),
    ],
)
def test_an_entry_named_twice_is_removed_twice(role: str, listed: str, key: str, name: str) -> None:
    """Kueue refuses a configuration that names the TrainJob kind twice: every copy goes."""
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n"
        f"  {listed}:\n  - {name}\n  - batch/job\n  - {name}\n"
    )
    out, said = change(text, role=role)
    assert yaml.safe_load(out)["integrations"][key] == ["batch/job"]  # the rest kept
    assert [line for line in said if "removed" in line] == [f"integrations.{key}: removed {name}"]
    assert change(out, role=role) == (out, [])


def test_a_trainer_workers_configmap_keeps_its_name_and_drops_what_the_server_owns(
    kueue: Path,
) -> None:
    ours, _ = change(_shipped_config(kueue), role="worker")
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system", "uid": "0b7e"},
        "data": {"controller_manager_config.yaml": ours},
    }
    out, said = change(yaml.safe_dump(config_map), role="trainer-worker")
    got = yaml.safe_load(out)
    assert got["metadata"] == {"name": "kueue-manager-config", "namespace": "kueue-system"}
    inner = yaml.safe_load(got["data"]["controller_manager_config.yaml"])
    assert inner == _trainer_workers(yaml.safe_load(ours))
    assert len(said) == 2


def test_a_trainer_workers_helm_values_give_only_the_configuration(kueue: Path) -> None:
    values = yaml.safe_load((kueue / "charts/kueue/values.yaml").read_text())
    key = "controllerManagerConfigYaml"
    ours, _ = change(values["managerConfig"][key], role="worker")
    values["managerConfig"][key] = ours
    values["controllerManager"]["featureGates"] = [{"name": "MultiKueue", "enabled": True}]
    out, said = change(yaml.safe_dump(values), role="trainer-worker")
    got = yaml.safe_load(out)
    assert set(got) == {"managerConfig"}  # a worker's gates are left as they are
    after = yaml.safe_load(got["managerConfig"][key])
    assert after == _trainer_workers(yaml.safe_load(ours))
    assert len(said) == 2


def test_kueues_release_manifests_for_a_trainer_worker() -> None:
    """Kueue's manifests.yaml, as shipped, is already a Trainer worker's; a stream changed for our
    worker comes back with only its ConfigMap changed again."""
    from clusters.kueue import release_manifests

    shipped = release_manifests("registry.k8s.io/kueue/kueue:" + builds.KUEUE_VERSION)
    assert change(shipped, role="trainer-worker") == (shipped, [])
    ours, _ = change(shipped, role="worker")
    out, said = change(ours, role="trainer-worker")
    assert len(said) == 2
    pieces, our_pieces = documents(out), documents(ours)
    (i,) = [n for n, (a, b) in enumerate(zip(pieces, our_pieces, strict=True)) if a != b]
    config = yaml.safe_load(yaml.safe_load(pieces[i])["data"]["controller_manager_config.yaml"])
    our_config = yaml.safe_load(
        yaml.safe_load(our_pieces[i])["data"]["controller_manager_config.yaml"]
    )
    assert config == _trainer_workers(our_config)


def test_check_for_a_trainer_worker_names_what_is_missing_and_passes_once_changed(
    kueue: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ours, _ = change(_shipped_config(kueue), role="worker")
    monkeypatch.setattr("sys.stdin", io.StringIO(ours))
    assert main(["--role", "trainer-worker", "--check"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"would change integrations.externalFrameworks: removed {EXTERNAL}" in err
    assert f"would change integrations.frameworks: added {KUEUE_TRAINJOB}" in err

    theirs, _ = change(ours, role="trainer-worker")
    monkeypatch.setattr("sys.stdin", io.StringIO(theirs))
    assert main(["--role", "trainer-worker", "--check"]) == 0
    assert capsys.readouterr() == ("", "trainjob-kueue-config: configured for the trainer-worker\n")
    # A Trainer worker's configuration is not one for our worker controller, nor a manager's.
    for role in ("worker", "manager"):
        monkeypatch.setattr("sys.stdin", io.StringIO(theirs))
        assert main(["--role", role, "--check"]) == 1
        assert f"removed {KUEUE_TRAINJOB}" in capsys.readouterr().err


def test_an_unknown_role_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="trainer-worker"):
        change("kind: Configuration\n", role="trainer")
