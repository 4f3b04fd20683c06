"""One bed with real nodes per machine: the claim on the host side (clusters/nodes.py), on
directories of this machine standing in for /run/tjbed and the cgroup hierarchies, and a
recorder for the commands it would run."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import nodes
from clusters.errors import BedError


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    ran: list[tuple[str, ...]] = []

    def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(nodes, "run", run)
    monkeypatch.setattr(nodes, "host_network_down", lambda: ran.append(("host network down",)))
    monkeypatch.setattr(
        nodes, "unmount_under", lambda *roots: ran.append(("umount under", *map(str, roots)))
    )
    monkeypatch.setattr(
        nodes, "kill_cgroup_tree", lambda node: ran.append(("kill", node.cgroup)) and 0
    )
    return ran


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: list) -> Path:
    run = tmp_path / "run"
    monkeypatch.setattr(nodes, "RUN_DIR", run)
    monkeypatch.setattr(nodes, "OWNER_FILE", run / "bed")
    monkeypatch.setattr(nodes, "CGROUP_ROOT", tmp_path / "cgroup")
    return run


def _node(run_dir: Path, cluster: str, *pids: int, age: float = 3600.0) -> None:
    """A node's run directory made `age` seconds ago, and its cgroup tree in the pids
    hierarchy holding `pids` (in a pod's cgroup below its own, as kubelet places containers)."""
    (run_dir / cluster).mkdir(parents=True)
    made = time.time() - age
    os.utime(run_dir / cluster, (made, made))
    tree = nodes.CGROUP_ROOT / "pids" / f"tjbed-{cluster}"
    (tree / "kubepods").mkdir(parents=True)
    (tree / "cgroup.procs").write_text("")
    (tree / "kubepods" / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))


@pytest.fixture
def alive() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for a node's (a claim that wrongly takes over would kill it)."""
    child = subprocess.Popen(["sleep", "300"])
    yield child
    child.kill()
    child.wait()


def test_a_second_bed_is_refused_while_the_first_ones_nodes_are_up(
    run_dir: Path, tmp_path: Path, alive: subprocess.Popen[bytes]
) -> None:
    real, other = tmp_path / ".bed-real", tmp_path / ".bed"
    nodes.claim(real)
    nodes.claim(real)  # again (up is idempotent): still its own
    _node(run_dir, "manager")  # what a node of it left, no process in it: not up
    _node(run_dir, "worker1", alive.pid)  # a node of it is up
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


def test_nodes_another_bed_left_with_no_process_are_taken_down_and_the_host_taken_over(
    run_dir: Path, tmp_path: Path, commands: list[tuple[str, ...]]
) -> None:
    # A run killed with its bed up (or a restarted machine): the claim, run directories,
    # cgroups, namespaces and mounts stay; no process does.
    killed, new = tmp_path / "killed" / ".bed-real", tmp_path / "new" / ".bed-real"
    nodes.claim(killed)
    _node(run_dir, "manager")
    _node(run_dir, "worker1")
    nodes.claim(new)
    assert (run_dir / "bed").read_text().strip() == str(new.resolve())
    assert sorted(p.name for p in run_dir.iterdir()) == ["bed"]
    for cluster in ("manager", "worker1"):
        # the killed bed's mounts, not the new one's
        left = ("umount under", str(killed.resolve() / cluster / "node"), str(run_dir / cluster))
        assert commands.index(("kill", f"tjbed-{cluster}")) < commands.index(left)
        assert ("ip", "netns", "del", f"tjbed-{cluster}") in commands
    assert commands[-1] == ("host network down",)  # after the nodes: the bridge last


def test_a_beds_own_nodes_left_with_no_process_are_taken_down_before_it_comes_up_again(
    run_dir: Path, tmp_path: Path, commands: list[tuple[str, ...]]
) -> None:
    bed = tmp_path / ".bed-real"
    nodes.claim(bed)
    _node(run_dir, "worker2")
    nodes.claim(bed)
    assert sorted(p.name for p in run_dir.iterdir()) == ["bed"]
    assert commands == [
        ("kill", "tjbed-worker2"),
        ("umount under", str(bed / "worker2" / "node"), str(run_dir / "worker2")),
        ("ip", "netns", "del", "tjbed-worker2"),
        ("host network down",),
    ]


def test_a_node_of_another_bed_coming_up_is_not_taken_for_one_left_behind(
    run_dir: Path, tmp_path: Path, commands: list[tuple[str, ...]]
) -> None:
    # Its run directory is made just before its containerd starts: no process yet.
    coming = tmp_path / "coming" / ".bed-real"
    nodes.claim(coming)
    _node(run_dir, "manager", age=5)
    with pytest.raises(BedError, match="has real nodes up"):
        nodes.claim(tmp_path / "other")
    assert commands == [] and (run_dir / "manager").is_dir()


@pytest.mark.parametrize("link", ["manager/node", "manager"])
def test_a_left_bed_whose_state_leads_elsewhere_by_a_link_keeps_its_mounts(
    run_dir: Path, tmp_path: Path, commands: list[tuple[str, ...]], link: str
) -> None:
    # The old bed's directory, gone and made again by someone: its node state a link away,
    # wherever on its path the link sits.
    old = tmp_path / "old" / ".bed-real"
    nodes.claim(old)
    (old / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "elsewhere" / "node").mkdir(parents=True)
    (old / link).symlink_to(tmp_path / "elsewhere" / ("node" if link.endswith("node") else ""))
    _node(run_dir, "manager")
    nodes.claim(tmp_path / "new")
    assert ("umount under", str(run_dir / "manager")) in commands
    assert not any(str(old) in " ".join(cmd) for cmd in commands)


def test_node_directories_no_bed_claims_are_left_alone(
    run_dir: Path, tmp_path: Path, commands: list[tuple[str, ...]]
) -> None:
    # No claim names whose they are, so no state directory to unmount under: not ours to end.
    nodes.claim(tmp_path / "was")
    assert nodes.release(tmp_path / "was")
    _node(run_dir, "worker1")
    nodes.claim(tmp_path / "new")
    assert commands == [] and (run_dir / "worker1").is_dir()
