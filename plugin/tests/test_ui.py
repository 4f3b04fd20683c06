"""What the web view's server passes on to the manager (plugin/kubectl_trainjob/ui.py's
allow-list)."""

from __future__ import annotations

import asyncio

import pytest

from kubectl_trainjob.ui import ALLOWED, LINE_LIMIT, Lines, LineSplitter, group


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


def test_a_long_line_in_many_pieces_is_joined_once() -> None:
    """A 4 MiB watch event in 4 KiB pieces: before, each piece joined and split everything
    held so far again (the review's quadratic join: ~2 GB copied for that one line)."""
    split = LineSplitter(LINE_LIMIT)
    line = b"x" * (LINE_LIMIT - 10)
    pieces = [line[i : i + 4096] for i in range(0, len(line), 4096)]
    got: list[bytes] = []
    for piece in pieces:
        got += split.feed(piece)
    assert got == []
    assert split._size == len(line)  # held as the pieces came, not joined yet
    assert len(split._pending) == len(pieces)
    got += split.feed(b"\n{}\nhalf")
    assert got == [line, b"{}"]
    assert split.feed(b"-done\n") == [b"half-done"]
    with pytest.raises(OverflowError):
        LineSplitter(10).feed(b"0123456789ab")
    with pytest.raises(OverflowError):
        LineSplitter(10).feed(b"0123456789abc\n")


def test_the_lines_waiting_for_a_page_are_bounded_in_bytes() -> None:
    async def run() -> list[str]:
        lines = Lines(10)
        seen: list[str] = []

        async def writer() -> None:
            for item in (b"aaaaaaaa", b"bbbbbbbb", b"c" * 30):
                await lines.put((item, False))
                seen.append(f"put {item[:1].decode()}")

        task = asyncio.create_task(writer())
        await asyncio.sleep(0.05)
        assert seen == ["put a"]  # b waits: 16 bytes would be over 10
        for _ in range(3):
            line, _ = await lines.get()
            seen.append(f"got {line[:1].decode()}")
            await asyncio.sleep(0.01)
        await task
        return seen

    # one line over the bound still goes, alone
    assert asyncio.run(run()) == ["put a", "got a", "put b", "got b", "put c", "got c"]

    async def drained() -> None:  # what is taken out no longer counts
        lines = Lines(10)
        await lines.put((b"c" * 30, False))
        await lines.get()
        await asyncio.wait_for(lines.put((b"aaaa", False)), 1)
        await asyncio.wait_for(lines.put((b"bbbb", False)), 1)

    asyncio.run(drained())


@pytest.mark.parametrize(
    ("viewer", "path", "share"),
    [
        ("user:system:serviceaccount:team-a:bot", "/apis/x/v1/namespaces/team-b/y", "team-a"),
        ("user:system:serviceaccount:team-a:bot", "/apis/x/v1/clusterqueues", "team-a"),
        ("user:alice", "/apis/x/v1/namespaces/team-b/trainjobs", "team-b"),
        ("token:ab12", "/apis/x/v1/namespaces/team-b/trainjobs", "team-b"),
    ],
)
def test_a_read_counts_to_a_namespaces_share(viewer: str, path: str, share: str) -> None:
    """A ServiceAccount's reads count to its own namespace whatever they name (a tenant's
    ServiceAccounts share one namespace's share); anyone else's to the namespace read."""
    assert group(viewer, path) == f"namespace {share}"


def test_a_read_of_no_namespace_counts_to_its_viewer_alone() -> None:
    assert group("user:alice", "/apis/x/v1/clusterqueues") != group(
        "user:bob", "/apis/x/v1/clusterqueues"
    )
