"""How the image's pycurl is built, read from the Dockerfile stage by stage; `./run lock`
(release.lock) against a stand-in pip and package index; and the libcurl the venv's pycurl
runs on (release.venv_pycurl)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import subprocess
import sys
import tarfile
import urllib.parse
from pathlib import Path
from typing import Any

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


def words(command: list[str]) -> list[str]:
    """A command without the variables set before it (`CFLAGS=-g0 pip ...` -> `pip ...`)."""
    i = 0
    while i < len(command) and (re.match(r"^[A-Z_]+=", command[i]) or command[i] == "env"):
        i += 1
    return command[i:]


def code(path: Path) -> str:
    """A file's text without its comments (a comment names nothing the build does)."""
    return "\n".join(re.split(r"(?:^|\s)#", line)[0] for line in path.read_text().splitlines())


def test_the_runtime_takes_libcurl_alone_from_bookworm_backports(tmp_path: Path) -> None:
    """The runtime stage's source line, run as the build runs it: backports from DEBIAN_MIRROR,
    signed by Debian's archive key alone (signed-by), a snapshot's index kept usable after its
    week; a mirror that is no plain http(s) URL refused (it would write apt options, or a
    second line); libcurl4 the only package taken from backports, its dependencies Debian 12's."""
    runtime = stages()["runtime"]
    target = "/etc/apt/sources.list.d/bookworm-backports.list"
    joined = re.sub(r"\\\n", " ", code(REPO / "Dockerfile"))
    (run,) = [line for line in joined.splitlines() if target in line]
    script = run.removeprefix("RUN ").split(" && apt-get update")[0]
    signed = "signed-by=/usr/share/keyrings/debian-archive-keyring.gpg"
    default = "http://deb.debian.org/debian"
    snapshot = "https://snapshot.debian.org/archive/debian/20261201T000000Z/"
    for mirror, line in [
        (default, f"deb [{signed}] {default} bookworm-backports main"),
        (snapshot, f"deb [{signed} check-valid-until=no] {snapshot} bookworm-backports main"),
        ("http://evil.example/snapshot.debian.org/", f"deb [{signed}] "
         "http://evil.example/snapshot.debian.org/ bookworm-backports main"),
        ("[trusted=yes] http://evil.example/debian", None),
        ("http://evil.example/debian\ndeb [trusted=yes] http://evil.example/debian", None),
        ("http://evil.example/debian] [trusted=yes", None),
        ("file:///tmp/debian", None),
        ("http://evil.example/debian]", None),
        (plain_snapshot := "http://snapshot.debian.org/archive/debian/x/",
         f"deb [{signed} check-valid-until=no] {plain_snapshot} bookworm-backports main"),
        (elsewhere := "https://evil.example/x://snapshot.debian.org/",
         f"deb [{signed}] {elsewhere} bookworm-backports main"),
        ("", None),
    ]:  # fmt: skip
        out = tmp_path / "backports.list"
        out.unlink(missing_ok=True)
        done = subprocess.run(
            ["sh", "-c", script.replace(target, str(out))],
            env={"DEBIAN_MIRROR": mirror, "PATH": "/usr/bin:/bin"},
            check=False,
            capture_output=True,
        )
        if line is None:
            assert done.returncode != 0 and not out.exists(), mirror
        else:
            assert done.returncode == 0 and out.read_text() == line + "\n", mirror
    (install,) = [c for c in runtime if "install" in c and "apt-get" in c]
    assert [w for w in install if w.endswith("/bookworm-backports")] == [
        "libcurl4/bookworm-backports"
    ]
    assert not any(w.startswith(("-t", "--target-release", "--default-release")) for w in install)
    assert "ARG DEBIAN_MIRROR=http://deb.debian.org/debian" in code(REPO / "Dockerfile")
    assert '--build-arg DEBIAN_MIRROR="$MIRROR"' in code(REPO / "deploy/image/build.sh")


def test_every_build_step_runs_the_locked_tools_without_build_isolation() -> None:
    """In the build stage, the tools' venv (no system packages) is installed from the build lock
    by hash, binaries only, before any other pip step; then every pip step runs those tools'
    pip, and every step that downloads or builds does so without build isolation (which would
    fetch setuptools unpinned) and only from the locks, the downloaded files or the sources
    copied in."""
    build = [words(c) for c in stages()["build"]]
    apt = next(c for c in build if "apt-get" in c and "install" in c)
    backports = [w for w in apt if w.endswith("/bookworm-backports")]
    assert backports == ["libcurl4-openssl-dev/bookworm-backports"]
    assert ["python3", "-m", "venv", "/tmp/build-tools"] in build
    pips = [c for c in build if any(w.endswith("pip") for w in c[:3]) and c[0] != "if"]
    assert pips[0][:2] == ["/tmp/build-tools/bin/pip", "install"]
    assert pips[0][-2:] == ["-r", "/src/build-requirements.lock"]
    assert {"--require-hashes", "--only-binary=:all:", "--no-deps"} <= set(pips[0])
    assert build.index(["python3", "-m", "venv", "/tmp/build-tools"]) < build.index(pips[0])
    sources = {"/src/requirements.lock", "/src/build-requirements.lock", "/src/plugin", "/src"}
    for step in pips[1:]:
        if step[:4] == ["python3", "-m", "pip", "install"] or step[:4] == [
            "python3",
            "-m",
            "pip",
            "check",
        ]:
            assert "--no-index" in step or step[3] == "check", step  # the wheels built here
            continue
        assert step[0] == "/tmp/build-tools/bin/pip", step
        assert step[1] in ("download", "wheel") and "--no-build-isolation" in step, step
        assert "--no-deps" in step, step
        for i, arg in enumerate(step[2:], 2):
            if not arg.startswith("-") and step[i - 1] not in ("--dest", "--wheel-dir", "-r"):
                assert arg in sources or arg.startswith("/tmp/wheels/"), step
            if step[i - 1] == "-r":
                assert arg in sources, step
    downloads = [s for s in pips if s[1] == "download"]
    assert downloads and all("--require-hashes" in s for s in downloads)
    assert any(f"--no-binary={name}" in s for s in downloads for name in lock.SOURCE_BUILT)
    assert any(c[:2] == ["!", "ls"] and "pycurl.libs" in " ".join(c) for c in build)
    copied = code(REPO / "Dockerfile")
    assert "deploy/image/build-requirements.lock /src/" in copied
    assert "!deploy/image/build-requirements.lock" in code(REPO / ".dockerignore")


@pytest.mark.parametrize(
    ("vernum", "refused"),
    [(0x075801, True), (0x0800FF, True), (0x080100, False), (0x080E01, False)],
)
def test_the_builds_libcurl_check_refuses_a_libcurl_before_8_1(
    tmp_path: Path, vernum: int, refused: bool
) -> None:
    """The build stage's check, run against a stand-in pycurl of each libcurl version."""
    (check,) = [c for c in stages()["build"] if c[:3] == ["python3", "-B", "-c"]]
    (tmp_path / "pycurl.py").write_text(
        f"version = 'PycURL/7.49.0 libcurl/x'\ndef version_info():\n    return (0, 'x', {vernum})\n"
    )
    (tmp_path / "orjson.py").write_text("")
    done = subprocess.run(
        [sys.executable, "-B", "-c", check[3]], env={"PYTHONPATH": str(tmp_path)}, check=False
    )
    assert (done.returncode != 0) == refused


def test_the_locks_hold_pycurls_source_and_the_tools_that_build_it_apart() -> None:
    entries = re.findall(
        r"^(\S+)==\S+((?: \\\n\s+--hash=sha256:[0-9a-f]{64})+)", lock.LOCK.read_text(), re.M
    )
    hashes = {lock.canonical(name): block.count("--hash=") for name, block in entries}
    tools = lock.read_lock(lock.BUILD_LOCK.read_text())
    assert {"pycurl"} == lock.SOURCE_BUILT
    assert all(hashes[name] == 1 for name in lock.SOURCE_BUILT)  # the source, every machine
    assert {"setuptools", "wheel"} <= set(tools) and not set(tools) & set(hashes)


def _sdist(name: str, version: str, requires: list[str], pyproject_bytes: int = 0) -> bytes:
    pyproject = f"[build-system]\nrequires = {json.dumps(requires)}\n".encode()
    pyproject += b"#" * max(0, pyproject_bytes - len(pyproject))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, body in [
            (f"{name}-{version}/pyproject.toml", pyproject),
            (f"{name}-{version}/tests/pyproject.toml", b"[build-system]\nrequires = ['evil']\n"),
        ]:  # fmt: skip
            info = tarfile.TarInfo(path)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


class FakePip:
    """pip's resolution (`install --dry-run --report`) and downloads of the other machine's
    wheels, as files and reports; and the package index's JSON and files."""

    def __init__(
        self,
        sdist: bytes,
        index_sha256: str | None = None,
        index: str = "https://pypi.org/simple/",
        wheels: dict[str, str] | None = None,
    ) -> None:
        self.sdist = sdist
        self.index_sha256 = index_sha256  # what the index says (default: the sdist's)
        self.index = index
        self.wheels = wheels or {"pycurl": "7.49.0", "orjson": "3.11.0"}
        self.tools = {"setuptools": "80.0.0", "wheel": "0.46.0"}
        self.sources: list[tuple[str, dict[str, str]]] | None = None  # the index's, if not
        self.calls: list[list[str]] = []
        self.fetched: list[str] = []
        self.other_machine: list[str] = []  # the pins whose aarch64 wheels were asked for
        self.no_hash: set[str] = set()  # packages whose report gives no sha256

    def run(self, args: list[str], check: bool = False) -> None:
        self.calls.append(args)
        if "--report" in args:
            report = Path(args[args.index("--report") + 1])
            wanted = self.tools if any("setuptools" in a for a in args) else self.wheels
            report.write_text(json.dumps({"install": [
                {"metadata": {"name": n, "version": v},
                 "download_info": {"url": f"https://files/{n}-{v}-cp311-x86_64.whl",
                                   "archive_info": {"hashes": {} if n in self.no_hash
                                                    else {"sha256": _h(n + "x86")}}}}
                for n, v in wanted.items()
            ]}))  # fmt: skip
        elif "download" in args:
            dest = Path(args[args.index("--dest") + 1])
            dest.mkdir(parents=True)
            self.other_machine = Path(args[args.index("-r") + 1]).read_text().split()
            for pin in self.other_machine:
                name, version = pin.split("==")
                (dest / f"{name}-{version}-cp311-aarch64.whl").write_bytes(name.encode() + b"arm")

    def listed(self) -> list[tuple[str, dict[str, str]]]:
        said = self.index_sha256 or hashlib.sha256(self.sdist).hexdigest()
        return self.sources if self.sources is not None else [(SOURCE, {"sha256": said})]

    def fetch(self, url: str, accept: str = "*/*") -> bytes:
        self.fetched.append(url)
        if url == self.index + "pycurl/":
            assert accept == "application/vnd.pypi.simple.v1+json"
            files = [
                {"filename": "pycurl-7.49.0-cp311-x86_64.whl", "url": "../../w.whl",
                 "hashes": {"sha256": _h("pycurlx86")}},
                *({"filename": name, "url": f"../../files/{name}", "hashes": hashes}
                  for name, hashes in self.listed()),
                {"filename": "pycurl-7.49.0-cp311-aarch64.whl", "url": "../../a.whl",
                 "hashes": {"sha256": _h("pycurlarm")}},
            ]  # fmt: skip
            return json.dumps({"files": files}).encode()
        assert url == urllib.parse.urljoin(self.index, "../files/pycurl-7.49.0.tar.gz"), url
        return self.sdist


SOURCE = "pycurl-7.49.0.tar.gz"


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


def test_lock_pins_pycurl_by_its_source_and_locks_what_the_builds_need(fake_lock: Any) -> None:
    """`./run lock`: pip resolves wheels only (no package's code runs); pycurl's entry is its
    source archive's sha256 (found in the index's JSON and checked), for every machine; the
    build lock holds the tools the archive's own pyproject.toml and the project's name,
    resolved as wheels."""
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
    resolution, tool_resolution = [c for c in pip.calls if "--report" in c]
    assert resolution[-2:] == [str(REPO / "plugin"), str(REPO)]
    project = {f"setuptools{s}" for s in (">=68", ">=77")}  # pyproject.toml, plugin/'s
    assert set(tool_resolution[tool_resolution.index("--report") + 2 :]) == {
        "setuptools", "wheel", *project
    }  # fmt: skip
    assert pip.other_machine == ["orjson==3.11.0"]  # pycurl: its source serves every machine


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda pip: setattr(pip, "index_sha256", _h("another")), "the index says"),
        (lambda pip: setattr(pip, "sources", [(SOURCE, {"sha256": _h("a")}),
                                              (SOURCE, {"sha256": _h("b")})]),
         "lists no source archive"),
        (lambda pip: setattr(pip, "sources", [(SOURCE, {"md5": "0" * 32})]),
         "lists no source archive"),
        (lambda pip: pip.wheels.update(setuptools="80.0.0"), "build tools also in the image"),
        (lambda pip: pip.no_hash.add("orjson"), "no sha256 for orjson"),
        (lambda pip: setattr(pip, "sdist", _sdist("pycurl", "7.49.0", ["x @ https://e/x.tgz"])),
         "is not a name and a range"),
        (lambda pip: setattr(pip, "sdist", _sdist("pycurl", "7.49.0", ["--index-url=https://e"])),
         "is not one"),
        (lambda pip: setattr(pip, "sdist",
                             _sdist("pycurl", "7.49.0", ["setuptools; python_version<'3'"])),
         "is not a name and a range"),
        (lambda pip: setattr(pip, "sdist", _sdist("pycurl", "7.49.0", ["setuptools[core]"])),
         "is not a name and a range"),
        (lambda pip: setattr(pip, "sdist", _sdist("pycurl", "7.49.0", [], pyproject_bytes=2 << 20)),
         "not a file of at most 1 MiB"),
    ],
)  # fmt: skip
def test_lock_refuses_what_it_cannot_check_and_writes_nothing(
    fake_lock: Any, change: Any, refusal: str
) -> None:
    pip = FakePip(_sdist("pycurl", "7.49.0", ["setuptools"]))
    change(pip)
    fake_lock(pip)
    with pytest.raises(SystemExit, match=refusal):
        lock.main([])
    assert not lock.LOCK.exists() and not lock.BUILD_LOCK.exists()


def test_lock_asks_the_index_pip_is_told_to_use(
    fake_lock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip(
        _sdist("pycurl", "7.49.0", ["setuptools"]), index="https://mirror.example/pypi/simple/"
    )
    fake_lock(pip)
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/pypi/simple")
    assert lock.main([]) == 0
    assert pip.fetched and all(u.startswith("https://mirror.example/pypi/") for u in pip.fetched)


def test_lock_keep_takes_the_same_versions_and_refuses_a_source_that_changed(
    fake_lock: Any,
) -> None:
    sdist = _sdist("pycurl", "7.49.0", ["setuptools>=64"])
    pip = FakePip(sdist)
    fake_lock(pip)
    source = hashlib.sha256(sdist).hexdigest()
    pins = {"pycurl": ("7.49.0", source), "orjson": ("3.11.0", _h("orjson"))}
    written = lock.HEADER + "".join(
        f"{n}=={v} \\\n    --hash=sha256:{d}\n" for n, (v, d) in pins.items()
    )
    lock.LOCK.write_text(written)
    assert lock.main(["--keep"]) == 0
    text = lock.LOCK.read_text()
    assert f"pycurl==7.49.0 \\\n    --hash=sha256:{source}\n" in text
    assert f"orjson==3.11.0 \\\n    --hash=sha256:{_h('orjson')}" in text
    assert not [c for c in pip.calls if "--report" in c and str(REPO) in c]  # no resolution

    pip.sdist = _sdist("pycurl", "7.49.0", ["setuptools>=65"])  # the same version, other bytes
    lock.LOCK.write_text(written)
    with pytest.raises(SystemExit, match="its source's sha256 is now"):
        lock.main(["--keep"])
    assert lock.LOCK.read_text() == written


def test_the_venvs_pycurl_runs_on_a_libcurl_that_frees_a_paused_streams_buffer() -> None:
    """The controllers the tests start run on the venv's pycurl: in the venv ./run makes on
    Debian 12, compiled against bookworm-backports' libcurl unpacked into the venv, as the
    image's is; elsewhere (another system, `./run pythons`' venvs) its wheel. Either way
    libcurl 8.1 or later (7.88.1 leaks what a paused stream buffered)."""
    assert pycurl.version_info()[2] >= 0x080100, pycurl.version
    version, path = venv_pycurl.linked_libcurl(Path(sys.executable))
    assert version >= venv_pycurl.MIN_LIBCURL
    made_by_run = any(Path(sys.prefix).glob(".installed-*"))  # ./run's venv (its stamp)
    if (
        made_by_run
        and venv_pycurl.OS_RELEASE.exists()
        and "bookworm" in venv_pycurl.OS_RELEASE.read_text()
    ):
        assert path.startswith(str(Path(sys.prefix) / "libcurl" / "root")), path
        assert "OpenSSL/3.0" in pycurl.version  # the system's, the one Python's ssl loads


class FakeHost:
    """apt-get, dpkg-deb, venv and pip as venv_pycurl runs them, answering with the files each
    would leave; `libcurl` is what the venv's pycurl then says it runs on."""

    def __init__(self, root: Path, libcurl: tuple[str, str]) -> None:
        self.root, self.libcurl = root, libcurl
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.sources: list[str] = []  # the package list each apt-get call read
        self.requirement = ""  # what pip was told to build

    def run(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((list(args), dict(kwargs.get("env") or {})))
        if args[0] == "apt-get":
            listed = next(a for a in args if a.startswith("-oDir::Etc::SourceList="))
            self.sources.append(Path(listed.split("=", 1)[1]).read_text())
        if args[0] == "apt-get" and "download" in args:
            for name in ("libcurl4", "libcurl4-openssl-dev"):
                (Path(kwargs["cwd"]) / f"{name}_8.14.1_amd64.deb").write_bytes(b"deb")
        elif args[0] == "dpkg-deb":
            target = Path(args[3])
            (target / "usr/bin").mkdir(parents=True, exist_ok=True)
            (target / "usr/bin/curl-config").write_text("#!/bin/sh\nprefix=/usr\nexec_prefix=x\n")
            (target / "usr/lib/x86_64-linux-gnu").mkdir(parents=True, exist_ok=True)
            (target / "usr/lib/x86_64-linux-gnu/libcurl.so.4").write_bytes(b"")
        elif "wheel" in args:
            self.requirement = Path(args[args.index("-r") + 1]).read_text()
            wheels = Path(args[args.index("--wheel-dir") + 1])
            wheels.mkdir(parents=True, exist_ok=True)
            (wheels / "pycurl-7.49.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
        elif "-c" in args:  # the probe: which libcurl the venv's pycurl loaded
            return subprocess.CompletedProcess(args, 0, "\n".join(self.libcurl) + "\n", "")
        return subprocess.CompletedProcess(args, 0, "", "")


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(libcurl: tuple[str, str] | None = None, codename: str = "bookworm") -> FakeHost:
        root = tmp_path / "venv" / "libcurl" / "root"
        found = libcurl or ("8.14.1", f"{root}/usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0")
        host = FakeHost(root, found)
        (tmp_path / "os-release").write_text(f"ID=debian\nVERSION_CODENAME={codename}\n")
        monkeypatch.setattr(venv_pycurl, "OS_RELEASE", tmp_path / "os-release")
        monkeypatch.setattr(venv_pycurl.subprocess, "run", host.run)
        monkeypatch.setattr(venv_pycurl.shutil, "which", lambda name: f"/usr/bin/{name}")
        monkeypatch.setattr(venv_pycurl.sys, "prefix", str(tmp_path / "venv"))
        return host

    return install


def test_the_venvs_pycurl_is_built_from_signed_packages_and_locked_sources(fake_host: Any) -> None:
    """release.venv_pycurl with the host's tools stood in for: apt reads backports' list alone
    (none of the host's sources, nothing unauthenticated), libcurl is unpacked into the venv
    and its curl-config points there, the tools and pycurl come from the locks by hash, pycurl
    is built without build isolation or pip's cache and linked to the venv's libcurl."""
    host = fake_host()
    assert venv_pycurl.main() == 0
    apt = [args for args, _ in host.calls if args[0] == "apt-get"]
    assert [a[-1] for a in apt] == ["update", "libcurl4-openssl-dev/bookworm-backports"]
    assert "libcurl4/bookworm-backports" in apt[1]
    for args in apt:
        assert any(a.startswith("-oDir::Etc::SourceParts=") for a in args), args
        assert any(a.startswith("-oDir::Etc::SourceList=") for a in args), args
        assert not any(re.search("(?i)insecure|unauthenticated|allow", a) for a in args), args
    line = f"deb [signed-by={venv_pycurl.KEYRING}] http://deb.debian.org/debian bookworm-backports"
    assert host.sources == [line + " main\n"] * 2
    config = (host.root / "usr/bin/curl-config").read_text()
    assert f"prefix={host.root / 'usr'}\n" in config and "prefix=/usr\n" not in config
    pips = [(args, env) for args, env in host.calls if "pip" in args]
    installs = [args for args, _ in pips if "install" in args]
    tools, into_venv = installs
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(tools)
    assert tools[-1] == str(lock.BUILD_LOCK)
    assert {"--no-deps", "--force-reinstall"} <= set(into_venv)
    assert into_venv[-1].endswith(".whl") and into_venv[0].startswith(str(host.root.parents[1]))
    ((wheel, env),) = [(args, env) for args, env in pips if "wheel" in args]
    assert {"--require-hashes", "--no-deps", "--no-build-isolation", "--no-cache-dir"} <= set(wheel)
    assert "--no-binary=pycurl" in wheel
    requirement = Path(wheel[wheel.index("-r") + 1])
    assert not requirement.exists()  # a file of the build's own, gone with it
    pin, source = lock.read_lock(lock.LOCK.read_text())["pycurl"]
    assert host.requirement == f"{pin} --hash=sha256:{source}\n"  # the lock's source, by hash
    lib = host.root / "usr/lib/x86_64-linux-gnu"
    assert f"-Wl,-rpath,{lib}" in env["LDFLAGS"] and env["PYCURL_CURL_CONFIG"].startswith(
        str(host.root)
    )


@pytest.mark.parametrize(
    ("libcurl", "said"),
    [
        (("8.0.1", "{root}/usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0"), "8, 0, 1"),
        (("8.14.1", "/usr/lib/x86_64-linux-gnu/libcurl.so.4.8.0"), "from /usr/lib"),
    ],
)
def test_a_venv_pycurl_on_another_libcurl_stops_the_set_up(
    fake_host: Any, tmp_path: Path, libcurl: tuple[str, str], said: str
) -> None:
    root = tmp_path / "venv" / "libcurl" / "root"
    fake_host((libcurl[0], libcurl[1].format(root=root)))
    with pytest.raises(SystemExit, match=said):
        venv_pycurl.main()


def test_off_debian_12_the_wheel_stays_and_nothing_runs(fake_host: Any) -> None:
    host = fake_host(codename="trixie")
    assert venv_pycurl.main() == 0
    assert host.calls == []


@pytest.mark.parametrize(
    "mirror",
    [
        "[trusted=yes] http://evil.example/debian",
        "http://evil.example/debian\ndeb [trusted=yes] http://evil.example/debian",
        "file:///srv/debian",
        "http://evil.example/debian]",
    ],
)
def test_a_mirror_that_is_no_plain_url_is_refused_before_anything_runs(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch, mirror: str
) -> None:
    host = fake_host()
    monkeypatch.setenv("DEBIAN_MIRROR", mirror)
    with pytest.raises(SystemExit, match="DEBIAN_MIRROR is not an http"):
        venv_pycurl.main()
    assert host.calls == []


def test_a_snapshot_mirrors_backports_index_is_taken_after_its_week(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = fake_host()
    snapshot = "https://snapshot.debian.org/archive/debian/20261201T000000Z/"
    monkeypatch.setenv("DEBIAN_MIRROR", snapshot)
    assert venv_pycurl.main() == 0
    signed = f"signed-by={venv_pycurl.KEYRING}"
    assert (
        host.sources[0]
        == f"deb [{signed} check-valid-until=no] {snapshot} bookworm-backports main\n"
    )


@pytest.mark.parametrize(
    ("mirror", "valid"),
    [
        ("http://snapshot.debian.org/archive/debian/x/", " check-valid-until=no"),
        ("http://evil.example/snapshot.debian.org/", ""),
        ("http://evil.example/?u=http://snapshot.debian.org/", ""),
    ],
)
def test_tb3_snapshot_by_host(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch, mirror: str, valid: str
) -> None:
    host = fake_host()
    monkeypatch.setenv("DEBIAN_MIRROR", mirror)
    assert venv_pycurl.main() == 0
    assert (
        host.sources[0]
        == f"deb [signed-by={venv_pycurl.KEYRING}{valid}] {mirror} bookworm-backports main\n"
    )


def test_tb3_missing_keyring_stops(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host = fake_host()
    monkeypatch.setattr(venv_pycurl, "KEYRING", tmp_path / "none.gpg")
    with pytest.raises(SystemExit, match="is missing"):
        venv_pycurl.main()
    assert host.calls == []
