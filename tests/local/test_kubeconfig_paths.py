"""Kueue's rules for MultiKueueCluster kubeconfig files (locationType Path), on real files."""

from __future__ import annotations

from pathlib import Path

from dispatcher.workers.kubeconfigs import kubeconfig_path_problem


def test_only_absolute_paths_that_resolve_under_the_prefix_are_allowed(tmp_path: Path) -> None:
    prefix = tmp_path / "kubeconfigs"
    (prefix / "team").mkdir(parents=True)
    inside = prefix / "team" / "w1.yaml"
    inside.write_text("x")
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("x")
    (prefix / "link.yaml").symlink_to(outside)
    sibling = tmp_path / "kubeconfigs-other"
    sibling.mkdir()
    (sibling / "w.yaml").write_text("x")

    assert kubeconfig_path_problem(str(inside), str(prefix)) == (str(inside.resolve()), None)
    cases = {
        "": "must not be empty",
        "team/w1.yaml": "must be absolute",
        f"{prefix}/team/../../elsewhere.yaml": "is not under",
        f"{prefix}/../kubeconfigs/team/w1.yaml": "",  # normalised first: inside after all
        str(prefix / "link.yaml"): "is not under",  # a symlink out is followed, then refused
        str(sibling / "w.yaml"): "is not under",  # a common string prefix is not enough
        str(prefix / "missing.yaml"): "does not exist",
    }
    for raw, fragment in cases.items():
        path, why = kubeconfig_path_problem(raw, str(prefix))
        if not fragment:
            assert path == str(inside.resolve()) and why is None, raw
        else:
            assert path is None and why is not None and fragment in why, (raw, why)
    assert "no such directory" in str(kubeconfig_path_problem(str(inside), "/nope")[1])
