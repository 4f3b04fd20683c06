"""The image's Python packages, locked: every package the project needs, at one version, with
the sha256 of its wheel for CPython 3.11 on x86_64 Linux (the image's Python and machine).
`./run lock` runs this; deploy/image/build.sh installs exactly what the lock names.

    python -m release.lock   # resolve pyproject.toml's dependencies again and write the lock

It asks pip for a resolution (`pip install --dry-run --report`), so the lock moves only when
someone runs it, never at build time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "deploy" / "image" / "requirements.lock"
HEADER = """\
# The image's Python packages: written by `./run lock` (python -m release.lock) from
# pyproject.toml's dependencies, for CPython 3.11 on x86_64 Linux; deploy/image/build.sh
# installs exactly these wheels (pip --require-hashes). Do not edit: run `./run lock`.
"""


def lock_text(report: dict[str, Any]) -> str:
    """The lock file for a `pip install --report` of the project."""
    lines = [HEADER]
    for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
        meta, info = item["metadata"], item.get("download_info") or {}
        if info.get("url", "").startswith("file:"):
            continue  # the project itself: built from the checkout
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        if not digest:
            raise SystemExit(f"no sha256 for {meta['name']} {meta['version']} ({info.get('url')})")
        lines.append(f"{meta['name']}=={meta['version']} \\\n    --hash=sha256:{digest}\n")
    return "".join(lines)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
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
                str(REPO),
            ],
            check=True,
        )
        LOCK.write_text(lock_text(json.loads(report.read_text())))
    print(f"wrote {LOCK.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
