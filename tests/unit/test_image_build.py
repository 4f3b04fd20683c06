"""How the image's pycurl is built, read from the Dockerfile stage by stage; `./run lock`
(release.lock) against a stand-in pip and package index; and the libcurl the venv's pycurl
runs on (release.venv_pycurl)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any, ClassVar

import pycurl
import pytest

from release import lock, venv_pycurl

REPO = Path(__file__).resolve().parents[2]


def stages() -> dict[str, list[list[str]]]:
    """The Dockerfile's stages by name (the last: "final"), each a list of its RUN steps' shell
    commands (split at `&&`, as words), continuation lines joined and comments left out."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    out: dict[str, list[list[str]]] = {}
    stage = ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            stage = rest.split(" AS ")[1].strip() if " AS " in rest else "final"
            out[stage] = []
        elif word == "RUN" and stage:
            rest = re.sub(r"^--mount=\S+\s+", "", rest)
            out[stage] += [shlex.split(part) for part in rest.split("&&")]
    return out


def pip_steps(commands: list[list[str]]) -> list[list[str]]:
    return [c for c in commands if "pip" in " ".join(c[:3]) and not c[0].startswith("if")]


def test_the_runtime_takes_libcurl_alone_from_bookworm_backports() -> None:
    runtime = stages()["runtime"]
    (source,) = [c for c in runtime if c[0] == "echo"]
    assert source[1:] == ["deb ${DEBIAN_MIRROR} bookworm-backports main", ">",
                          "/etc/apt/sources.list.d/bookworm-backports.list"]  # fmt: skip
    installs = [c for c in runtime if "install" in c and "apt-get" in " ".join(c)]
    (install,) = installs
    packages = [w for w in install if not w.startswith("-") and w not in ("install",)]
    assert "libcurl4/bookworm-backports" in packages
    assert not any(w.startswith("-t") or w.startswith("--target-release") for w in install)
    assert runtime.index(source) < runtime.index(install)
    assert "ARG DEBIAN_MIRROR=http://deb.debian.org/debian" in (REPO / "Dockerfile").read_text()
    assert '--build-arg DEBIAN_MIRROR="$MIRROR"' in (REPO / "deploy/image/build.sh").read_text()


def test_pycurl_is_built_by_locked_tools_alone_and_on_libcurl_81_or_later() -> None:
    """In the build stage, the tools' venv is installed from the build lock by hash before any
    step reads pycurl's source; every step that touches a source archive runs the tools' pip
    without build isolation (which would fetch setuptools unpinned); what is installed is
    checked to run on libcurl 8.1 or later."""
    build = stages()["build"]
    apt = " ".join(next(c for c in build if "apt-get" in c and "install" in c))
    assert "libcurl4-openssl-dev/bookworm-backports" in apt
    steps = pip_steps(build)
    tools = next(i for i, c in enumerate(steps) if "/src/build-requirements.lock" in c)
    assert steps[tools][0] == "/tmp/build-tools/bin/pip"
    assert {"--require-hashes", "--only-binary=:all:", "--no-deps"} <= set(steps[tools])
    for step in steps:
        sources = any(w.startswith("--no-binary") or w.endswith(".tar.gz") for w in step)
        if sources:
            assert steps.index(step) > tools, step
            assert "--no-build-isolation" in step, step
            assert (
                step[0].endswith("/tmp/build-tools/bin/pip") or "/tmp/build-tools/bin/pip" in step
            )
    downloads = [s for s in steps if "download" in s]
    assert downloads and all("--require-hashes" in s for s in downloads)
    assert any(f"--no-binary={name}" in s for s in downloads for name in lock.SOURCE_BUILT)
    copied = (REPO / "Dockerfile").read_text()
    assert "deploy/image/build-requirements.lock /src/" in copied
    assert "!deploy/image/build-requirements.lock" in (REPO / ".dockerignore").read_text()
    checks = [" ".join(c) for c in build if c[:2] == ["python3", "-B"]]
    assert any("pycurl.version_info()[2] < 0x080100" in c for c in checks)


def test_the_locks_hold_pycurls_source_and_the_tools_that_build_it_apart() -> None:
    entries = re.findall(
        r"^(\S+)==\S+((?: \\\n\s+--hash=sha256:[0-9a-f]{64})+)", lock.LOCK.read_text(), re.M
    )
    hashes = {lock.canonical(name): block.count("--hash=") for name, block in entries}
    tools = lock.read_lock(lock.BUILD_LOCK.read_text())
    assert {"pycurl"} == lock.SOURCE_BUILT
    assert all(hashes[name] == 1 for name in lock.SOURCE_BUILT)  # the source, every machine
    assert {"setuptools", "wheel"} <= set(tools) and not set(tools) & set(hashes)


def _sdist(name: str, version: str, requires: list[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, body in [
            (f"{name}-{version}/pyproject.toml",
             f"[build-system]\nrequires = {json.dumps(requires)}\n".encode()),
            (f"{name}-{version}/tests/pyproject.toml", b"[build-system]\nrequires = ['evil']\n"),
        ]:  # fmt: skip
            info = tarfile.TarInfo(path)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


class FakePip:
    """pip's resolution (`install --dry-run --report`) and downloads of the other machine's
    wheels, as files and reports; and the package index's JSON and files."""

    WHEEL: ClassVar = {"pycurl": "7.49.0", "orjson": "3.11.0"}
    TOOLS: ClassVar = {"setuptools": "80.0.0", "wheel": "0.46.0"}

    def __init__(self, sdist: bytes, index_sha256: str | None = None) -> None:
        self.sdist = sdist
        self.index_sha256 = index_sha256 or hashlib.sha256(sdist).hexdigest()
        self.calls: list[list[str]] = []
        self.fetched: list[str] = []
        self.other_machine: list[str] = []  # the pins whose aarch64 wheels were asked for

    def run(self, args: list[str], check: bool = False) -> None:
        self.calls.append(args)
        if "--report" in args:
            report = Path(args[args.index("--report") + 1])
            wanted = self.TOOLS if any("setuptools" in a for a in args) else self.WHEEL
            report.write_text(json.dumps({"install": [
                {"metadata": {"name": n, "version": v},
                 "download_info": {"url": f"https://files/{n}-{v}-cp311-x86_64.whl",
                                   "archive_info": {"hashes": {"sha256": _h(n + "x86")}}}}
                for n, v in wanted.items()
            ]}))  # fmt: skip
        elif "download" in args:
            dest = Path(args[args.index("--dest") + 1])
            dest.mkdir(parents=True)
            self.other_machine = Path(args[args.index("-r") + 1]).read_text().split()
            for pin in self.other_machine:
                name, version = pin.split("==")
                (dest / f"{name}-{version}-cp311-aarch64.whl").write_bytes(name.encode() + b"arm")

    def fetch(self, url: str, accept: str = "*/*") -> bytes:
        self.fetched.append(url)
        if url == "https://pypi.org/simple/pycurl/":
            assert accept == "application/vnd.pypi.simple.v1+json"
            return json.dumps({"files": [
                {"filename": "pycurl-7.49.0-cp311-x86_64.whl", "url": "../../w.whl",
                 "hashes": {"sha256": _h("pycurlx86")}},
                {"filename": "pycurl-7.49.0.tar.gz", "url": "../../files/pycurl-7.49.0.tar.gz",
                 "hashes": {"sha256": self.index_sha256}},
                {"filename": "pycurl-7.49.0-cp311-aarch64.whl", "url": "../../a.whl",
                 "hashes": {"sha256": _h("pycurlarm")}},
            ]}).encode()  # fmt: skip
        assert url == "https://pypi.org/files/pycurl-7.49.0.tar.gz", url
        return self.sdist


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def fake_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(pip: FakePip) -> None:
        monkeypatch.setattr(lock, "LOCK", tmp_path / "requirements.lock")
        monkeypatch.setattr(lock, "BUILD_LOCK", tmp_path / "build-requirements.lock")
        monkeypatch.setattr(lock.subprocess, "run", pip.run)
        monkeypatch.setattr(lock, "fetch", pip.fetch)
        monkeypatch.delenv("PIP_INDEX_URL", raising=False)

    return install


def test_lock_pins_pycurl_by_its_source_and_locks_what_its_pyproject_needs(fake_lock: Any) -> None:
    """`./run lock`: pip resolves wheels only (no package's code runs); pycurl's entry is its
    source archive's sha256 (found in the index's JSON and checked), for every machine; the
    build lock holds the tools the archive's own pyproject.toml names, resolved as wheels."""
    sdist = _sdist("pycurl", "7.49.0", ["setuptools", "wheel"])
    pip = FakePip(sdist)
    fake_lock(pip)
    assert lock.main([]) == 0
    text = lock.LOCK.read_text()
    pycurl_entry = re.search(r"^pycurl==7\.49\.0((?: \\\n\s+--hash=sha256:\w+)+)", text, re.M)
    assert pycurl_entry and pycurl_entry[1].split("sha256:")[1:] == [
        hashlib.sha256(sdist).hexdigest()
    ]
    assert f"orjson==3.11.0 \\\n    --hash=sha256:{_h('orjsonx86')}" in text
    assert hashlib.sha256(b"orjsonarm").hexdigest() in text  # the other machine's wheel
    tools = lock.read_lock(lock.BUILD_LOCK.read_text())
    assert set(tools) == {"setuptools", "wheel"}
    assert lock.BUILD_LOCK.read_text().startswith(lock.BUILD_HEADER)
    for call in pip.calls:
        assert "--no-binary" not in " ".join(call) and "--only-binary=:all:" in call, call
    _, tool_resolution = [c for c in pip.calls if "--report" in c]
    assert tool_resolution[-2:] == ["setuptools", "wheel"]
    assert pip.other_machine == ["orjson==3.11.0"]  # pycurl: its source serves every machine


def test_lock_refuses_a_source_whose_bytes_are_not_what_the_index_says(fake_lock: Any) -> None:
    pip = FakePip(_sdist("pycurl", "7.49.0", ["setuptools"]), index_sha256=_h("another"))
    fake_lock(pip)
    with pytest.raises(SystemExit, match="the index says"):
        lock.main([])
    assert not lock.LOCK.exists() and not lock.BUILD_LOCK.exists()


def test_lock_keep_takes_the_same_versions_and_the_source_again(fake_lock: Any) -> None:
    sdist = _sdist("pycurl", "7.49.0", ["setuptools>=64"])
    pip = FakePip(sdist)
    fake_lock(pip)
    lock.LOCK.write_text(
        lock.HEADER + "".join(f"{n}=={v} \\\n    --hash=sha256:{_h(n)}\n"
                              for n, v in FakePip.WHEEL.items())
    )  # fmt: skip
    assert lock.main(["--keep"]) == 0
    text = lock.LOCK.read_text()
    assert f"pycurl==7.49.0 \\\n    --hash=sha256:{hashlib.sha256(sdist).hexdigest()}\n" in text
    assert f"orjson==3.11.0 \\\n    --hash=sha256:{_h('orjson')}" in text
    assert next(c for c in pip.calls if "--report" in c)[-1] == "setuptools>=64"  # tools only


def test_the_venvs_pycurl_runs_on_a_libcurl_that_frees_a_paused_streams_buffer() -> None:
    """The controllers the tests start run on the venv's pycurl: on Debian (./run) compiled
    against bookworm-backports' libcurl unpacked into the venv, as the image's is; elsewhere
    its wheel. Either way libcurl 8.1 or later (7.88.1 leaks what a paused stream buffered)."""
    assert pycurl.version_info()[2] >= 0x080100, pycurl.version
    version, path = venv_pycurl.linked_libcurl(Path(sys.executable))
    assert version >= venv_pycurl.MIN_LIBCURL
    if shutil.which("apt-get") and shutil.which("dpkg-deb"):
        assert path.startswith(str(Path(sys.prefix) / "libcurl" / "root")), path
        assert "OpenSSL/3.0" in pycurl.version  # the system's, the one Python's ssl loads
