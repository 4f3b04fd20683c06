"""The image's Python packages, locked: every package the project needs, at one version, with
the sha256 of each of its wheels for CPython 3.11 on Linux, x86_64 and aarch64 (the image's
Python and machines). `./run lock` runs this; the Dockerfile installs exactly what the lock
names.

    python -m release.lock          # resolve pyproject.toml's dependencies again, write the lock
    python -m release.lock --keep   # the same versions, each wheel's hashes fetched again

It asks pip for a resolution (`pip install --dry-run --report`), so the lock moves only when
someone runs it, never at build time.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "deploy" / "image" / "requirements.lock"
HEADER = """\
# The image's Python packages: written by `./run lock` (python -m release.lock) from
# pyproject.toml's dependencies, for CPython 3.11 on Linux (x86_64 and aarch64: a hash per
# wheel); the Dockerfile installs exactly these wheels (pip --require-hashes). Do not edit: run
# `./run lock`.
"""


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
    requirements.write_text("".join(pin + "\n" for pin, _ in locked.values()))
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
    missing = set(locked) - set(out)
    if missing:
        raise SystemExit(f"no aarch64 wheel for: {', '.join(sorted(missing))}")
    return out


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
        if keep:
            locked = read_lock(LOCK.read_text())
            LOCK.write_text(lock_text(locked, other_wheels(locked, Path(tmp))))
            print(f"wrote {LOCK.relative_to(REPO)} (the same versions)", file=sys.stderr)
            return 0
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--ignore-installed",
                "--only-binary=:all:",
                "--report",
                str(report),
                str(REPO / "plugin"),  # the kubectl plugin's distribution, which the product needs
                str(REPO),
            ],
            check=True,
        )
        locked = pins(json.loads(report.read_text()))
        LOCK.write_text(lock_text(locked, other_wheels(locked, Path(tmp))))
    print(f"wrote {LOCK.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
