"""The product's image is built from pinned inputs: two builds of the same checkout, with the
same SOURCE_DATE_EPOCH, give the same image digest (docs/image.md)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from clusters.config import REPO_ROOT

pytestmark = [pytest.mark.realnodes, pytest.mark.timeout(900)]


def _build(out: Path) -> str:
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "deploy/image/build.sh")],
        env={**os.environ, "OUT": str(out), "SOURCE_DATE_EPOCH": "1764028800"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"manifest (sha256:[0-9a-f]{64})", done.stderr)
    assert found, done.stderr[-2000:]
    return found[1]


def test_two_builds_of_the_image_give_the_same_digest(tmp_path: Path) -> None:
    first, second = _build(tmp_path / "a.tar"), _build(tmp_path / "b.tar")
    assert first == second
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
