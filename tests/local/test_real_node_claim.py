"""One bed with real nodes per machine: the claim on the host side (clusters/nodes.py), on a
directory of this machine standing in for /run/tjbed."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters import nodes
from clusters.errors import BedError


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    monkeypatch.setattr(nodes, "RUN_DIR", run)
    monkeypatch.setattr(nodes, "OWNER_FILE", run / "bed")
    return run


def test_a_second_bed_is_refused_while_the_first_ones_nodes_are_up(
    run_dir: Path, tmp_path: Path
) -> None:
    real, other = tmp_path / ".bed-real", tmp_path / ".bed"
    nodes.claim(real)
    nodes.claim(real)  # again (up is idempotent): still its own
    (run_dir / "manager").mkdir()  # a node of it is up
    with pytest.raises(BedError, match=f"the bed at {real.resolve()} has real nodes up"):
        nodes.claim(other)
    # Another bed's down leaves the host side alone; the owner's takes it down.
    assert not nodes.release(other)
    assert (run_dir / "bed").read_text().strip() == str(real.resolve())
    assert nodes.release(real)
    assert not (run_dir / "bed").exists()
    nodes.claim(other)  # now free


def test_a_claim_whose_nodes_are_gone_is_taken_over(run_dir: Path, tmp_path: Path) -> None:
    nodes.claim(tmp_path / "old")  # its nodes went down without release (no node dirs)
    nodes.claim(tmp_path / "new")
    assert (run_dir / "bed").read_text().strip() == str((tmp_path / "new").resolve())
    assert nodes.release(tmp_path / "unclaimed") is False
