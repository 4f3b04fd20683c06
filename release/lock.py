"""The image's Python packages, locked: every package the project needs, at one version, with
the sha256 of each of its wheels for CPython 3.11 on Linux, x86_64 and aarch64 (the image's
Python and machines). `./run lock` runs this; the Dockerfile installs exactly what the lock
names.

    python -m release.lock          # resolve pyproject.toml's dependencies again, write the lock
    python -m release.lock --keep   # the same versions, each file's hashes fetched again

The packages of SOURCE_BUILT are locked as their source archive instead, which the Dockerfile
compiles against Debian's libraries; the tools that build them (their `build-system.requires`)
have a lock of their own, BUILD_LOCK, and never reach the image.

It asks pip for a resolution of wheels only (`pip install --dry-run --report`), so the lock
moves only when someone runs it, never at build time, and no package's code runs to write it:
a source archive is found in the index's JSON (PEP 691), checked against the sha256 the index
gives, and read as a tar file (its pyproject.toml), never built.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "deploy" / "image" / "requirements.lock"
BUILD_LOCK = REPO / "deploy" / "image" / "build-requirements.lock"
HEADER = """\
# The image's Python packages: written by `./run lock` (python -m release.lock) from
# pyproject.toml's dependencies, for CPython 3.11 on Linux (x86_64 and aarch64: a hash per
# wheel; pycurl: its source, compiled against Debian's libcurl); the Dockerfile installs
# exactly these (pip --require-hashes). Do not edit: run `./run lock`.
"""
BUILD_HEADER = """\
# What the image's build compiles pycurl and builds the project's wheels with (their
# build-system.requires), never in the image: written by `./run lock` (python -m release.lock).
# Do not edit: run `./run lock`.
"""
# The project's distributions, built into wheels by the image's build with BUILD_LOCK's tools.
PROJECTS = (REPO / "plugin", REPO)
MAX_PYPROJECT = 1 << 20  # bytes of a source archive's pyproject.toml read, at most

# Compiled from source in the image's build, against Debian's libraries: pycurl's wheels bundle
# a libcurl and an OpenSSL of their own, a third OpenSSL in each process besides the system's
# (Python's ssl) and cryptography's; built on Debian's libcurl, which uses the system's
# OpenSSL, each process maps one fewer (about 5 MiB resident, docs/contributors/benchmarks.md).
SOURCE_BUILT = frozenset({"pycurl"})


# The other machine the image is built for, as pip names its wheels' platforms (Debian 12's
# glibc is 2.36).
OTHER_PLATFORMS = ["manylinux2014_aarch64"] + [f"manylinux_2_{v}_aarch64" for v in range(17, 37)]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Package (canonical name) -> (name, version), and the sha256 of the wheel pip chose."""
    out = {}
    for item in report["install"]:
        meta, info = item["metadata"], item.get("download_info") or {}
        if info.get("url", "").startswith("file:"):
            continue  # the project itself: built from the checkout
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        if not digest:
            raise SystemExit(f"no sha256 for {meta['name']} {meta['version']} ({info.get('url')})")
        out[canonical(meta["name"])] = (f"{meta['name']}=={meta['version']}", digest)
    return out


def lock_text(locked: dict[str, tuple[str, str]], more: dict[str, set[str]]) -> str:
    """The lock file: each pin with the hash of every wheel it may install."""
    lines = [HEADER]
    for key in sorted(locked):
        pin, digest = locked[key]
        digests = [digest, *sorted(more.get(key, set()) - {digest})]  # this machine's first
        lines.append(pin + "".join(f" \\\n    --hash=sha256:{d}" for d in digests) + "\n")
    return "".join(lines)


def other_wheels(locked: dict[str, tuple[str, str]], work: Path) -> dict[str, set[str]]:
    """The sha256 of each pinned package's wheel for the other machine, downloaded by pip."""
    requirements = work / "pins.txt"
    requirements.write_text(
        "".join(pin + "\n" for key, (pin, _) in locked.items() if key not in SOURCE_BUILT)
    )
    dest = work / "aarch64"
    platforms = [arg for p in OTHER_PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3",
         "--abi", "none", *platforms, "--dest", str(dest), "-r", str(requirements)],
        check=True,
    )  # fmt: skip
    out: dict[str, set[str]] = {}
    for wheel in dest.glob("*.whl"):
        key = canonical(wheel.name.split("-")[0])
        out.setdefault(key, set()).add(hashlib.sha256(wheel.read_bytes()).hexdigest())
    missing = set(locked) - set(out) - SOURCE_BUILT
    if missing:
        raise SystemExit(f"no aarch64 wheel for: {', '.join(sorted(missing))}")
    return out


def fetch(url: str, accept: str = "*/*") -> bytes:
    """The body at `url` (the package index's; PIP_INDEX_URL names a mirror)."""
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise SystemExit(f"{url}: not an http(s) URL")
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=60) as answer:
        body: bytes = answer.read()
    return body


def source_of(pin: str, work: Path) -> tuple[str, Path]:
    """The sha256 of a pin's source archive (`<name>-<version>.tar.gz`), and the archive: found
    in the index's JSON, downloaded, and checked against the sha256 the index gives for it."""
    name, version = pin.split("==")
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/") + "/"
    page = urllib.parse.urljoin(index, canonical(name) + "/")
    listing = json.loads(fetch(page, "application/vnd.pypi.simple.v1+json"))
    wanted = f"{name.replace('-', '_')}-{version}.tar.gz".lower()
    files = [f for f in listing["files"] if f["filename"].lower() == wanted]
    if len(files) != 1 or "sha256" not in files[0].get("hashes", {}):
        raise SystemExit(
            f"{pin}: the index at {page} lists no source archive {wanted} with a sha256"
        )
    (entry,) = files
    data = fetch(urllib.parse.urljoin(page, entry["url"]))
    digest = hashlib.sha256(data).hexdigest()
    if digest != (said := entry["hashes"]["sha256"]):
        raise SystemExit(f"{pin}: {wanted} has sha256 {digest}, the index says {said}")
    archive = work / "source" / wanted
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    return digest, archive


def build_requires(archive: Path) -> list[str]:
    """The `build-system.requires` of a source archive's pyproject.toml (a regular file of at
    most MAX_PYPROJECT bytes at its top), read from the tar file: nothing is extracted."""
    with tarfile.open(archive) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.count("/") == 1
                     and m.name.endswith("/pyproject.toml")]  # fmt: skip
        if not member.isfile() or member.size > MAX_PYPROJECT:
            raise SystemExit(f"{archive.name}: {member.name} is not a file of at most 1 MiB")
        data = tar.extractfile(member).read()  # type: ignore[union-attr]
    return checked_requires(tomllib.loads(data.decode())["build-system"]["requires"], archive.name)


def checked_requires(requires: list[str], where: str) -> list[str]:
    """Requirements as pip is given them: each a name with a version range, never a URL (pip
    would build what it points to) or anything that is no requirement (an option, say)."""
    from packaging.requirements import InvalidRequirement, Requirement  # a development tool's

    out = []
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            raise SystemExit(f"{where}: build requirement {text!r} is not one") from None
        if requirement.url or requirement.marker or requirement.extras:
            raise SystemExit(f"{where}: build requirement {text!r} is not a name and a range")
        out.append(f"{requirement.name}{requirement.specifier}")
    return out


def project_requires() -> list[str]:
    """The `build-system.requires` of the project's own distributions."""
    out = []
    for project in PROJECTS:
        data = tomllib.loads((project / "pyproject.toml").read_text())
        out += checked_requires(data["build-system"]["requires"], str(project / "pyproject.toml"))
    return out


def resolve(args: list[str], work: Path) -> dict[str, tuple[str, str]]:
    """pip's resolution of `args` for this machine: each package pinned, with its file's hash."""
    report = work / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
         "--only-binary=:all:", "--report", str(report), *args],
        check=True,
    )  # fmt: skip
    return pins(json.loads(report.read_text()))


def write_locks(locked: dict[str, tuple[str, str]], work: Path, keep: bool = False) -> None:
    """LOCK, each SOURCE_BUILT package by its source archive's hash, and BUILD_LOCK: the tools
    those archives and the project name in their `build-system.requires`, as wheels of this
    machine."""
    requires: set[str] = set(project_requires())
    for key in sorted(SOURCE_BUILT):
        digest, archive = source_of(locked[key][0], work)
        if keep and locked[key][1] != digest:
            raise SystemExit(
                f"{locked[key][0]}: its source's sha256 is now {digest}, not the lock's"
            )
        locked = {**locked, key: (locked[key][0], digest)}
        requires.update(build_requires(archive))
    tools = lock_text(resolve(sorted(requires), work), {})
    if set(tools_keys := read_lock(tools)) & set(locked):
        raise SystemExit(f"build tools also in the image: {sorted(set(tools_keys) & set(locked))}")
    LOCK.write_text(lock_text(locked, other_wheels(locked, work)))
    BUILD_LOCK.write_text(tools.replace(HEADER, BUILD_HEADER))


def read_lock(text: str) -> dict[str, tuple[str, str]]:
    """The pins of a lock file, each with the hash of its x86_64 wheel (the one pip's
    resolution on this machine chose, first among its hashes when the lock was written)."""
    out = {}
    for pin, digest in re.findall(r"^(\S+==\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})", text, re.M):
        out[canonical(pin.split("==")[0])] = (pin, digest)
    return out


def main(argv: list[str] | None = None) -> int:
    keep = "--keep" in (argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if keep:
            locked = read_lock(LOCK.read_text())
        else:  # the kubectl plugin's distribution first: the product needs it
            locked = resolve([str(project) for project in PROJECTS], work)
        write_locks(locked, work, keep)
    print(f"wrote {LOCK.name} and {BUILD_LOCK.name}" + (" (the same versions)" if keep else ""),
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
