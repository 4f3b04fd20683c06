"""The product's image is built from pinned inputs: two builds of the same checkout, with the
same SOURCE_DATE_EPOCH, give the same image digest (docs/operators/image.md)."""

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


def test_the_image_runs_as_its_user_with_valid_bytecode_and_its_version() -> None:
    """What the Dockerfile promises, read from the image the real nodes run."""
    from clusters import images
    from release import image_contents

    images.build(images.PRODUCT)  # cached by its inputs: a real bed may have built it already
    archive = images.archive(images.PRODUCT)
    config = image_contents.config(archive)["config"]
    assert config["User"] == "65532:65532"
    assert config["Cmd"] == ["trainjob-dispatcher", "--help"]
    tag = images.PRODUCT.name.rsplit(":", 1)[1]
    assert config["Labels"]["org.opencontainers.image.version"] == tag
    # Debian's bytecode is hash-checked (PEP 552 flags 3): file times the build set do not make
    # it stale, so a read-only, non-root container does not compile the standard library anew.
    # So is the bytecode of the wheels in /usr/local, the product's own included: a replica
    # compiles nothing at its start.
    files = image_contents.flatten(archive)
    # The operators' commands (install.md: `podman run --rm -i <image> trainjob-kueue-config`).
    for command in ("trainjob-fleet", "trainjob-kueue-config", "trainjob-worker-secret"):
        assert f"/usr/local/bin/{command}" in files, command
    sources = [n for n in files if n.startswith("/usr/local/lib/") and n.endswith(".py")]
    missing = [n for n in sources if _pyc(n) not in files]
    assert len(sources) > 1000
    assert not missing, f"{len(missing)} modules without bytecode, e.g. {missing[:5]}"
    local = "/usr/local/lib/python3.11/dist-packages/"
    pycs = [
        "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc",
        *(_pyc(local + m) for m in ("dispatcher/app.py", "worker_controller/app.py")),
        _pyc(local + "h11/_connection.py"),  # a library the controllers load
    ]
    read = image_contents.read_all(archive, [*pycs, "/etc/passwd", "/var/lib/dpkg/status"])
    for pyc in pycs:
        assert int.from_bytes(read[pyc][4:8], "little") == 3, pyc
    assert "trainjob:x:65532:65532:" in read["/etc/passwd"].decode()
    # pycurl runs on Debian's libcurl from bookworm-backports, 8.1 or later (7.88.1 keeps a
    # paused HTTP/2 stream's buffer after the stream ends), not on a libcurl of its wheel's.
    status = read["/var/lib/dpkg/status"].decode()
    (stanza,) = [s for s in status.split("\n\n") if s.startswith("Package: libcurl4\n")]
    version = re.search(r"^Version: (\S+)$", stanza, re.M)[1]  # type: ignore[index]
    assert "~bpo" in version, version  # bookworm-backports' build
    assert tuple(int(p) for p in version.split(".")[:2]) >= (8, 1), version
    assert not [n for n in files if "/pycurl.libs/" in n or "/pycurl_libs/" in n]


def _pyc(source: str) -> str:
    """Where the image's Python 3.11 looks for the bytecode of `source` (not
    importlib.util.cache_from_source, which names the tag of the Python running the test)."""
    folder, _, name = source.rpartition("/")
    return f"{folder}/__pycache__/{name.removesuffix('.py')}.cpython-311.pyc"
