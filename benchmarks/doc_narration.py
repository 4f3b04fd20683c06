"""How much of the user and operator pages narrates the project's own tests, bed and tooling
rather than the product: per page, the lines that name a test file, the test bed, kwok, the
suite or `./run test`, against all its lines.

    .venv/bin/python benchmarks/doc_narration.py [CHECKOUT]

CHECKOUT (a worktree of another commit, say) is read instead of this one; pages are found by
name anywhere under its docs/, so a checkout from before the pages moved by audience counts
the same pages.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The pages for people who submit jobs and for platform teams (docs/users, docs/operators).
PAGES = ("user-guide", "usage", "web-view", "install", "configuration", "operations",
         "security", "release", "image", "compatibility", "kueue", "differences")  # fmt: skip
NARRATION = re.compile(
    r"tests/|test_\w+\.py|\./run test|\bthe suite\b|\btest bed\b|\bthe bed\b|\bbed's\b|\bkwok\b"
    r"|\bthe tests?\b|\ba test\b",
    re.IGNORECASE,
)


def counts(root: Path) -> list[tuple[str, int, int]]:
    """(page, narrating lines, lines) of each page found under root/docs."""
    out = []
    for name in PAGES:
        found = sorted((root / "docs").rglob(f"{name}.md"))
        if not found:
            continue
        lines = found[0].read_text().splitlines()
        out.append((name, sum(bool(NARRATION.search(line)) for line in lines), len(lines)))
    return out


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    root = Path(args[0]).resolve() if args else Path(__file__).resolve().parent.parent
    rows = counts(root)
    for name, narrating, lines in rows:
        print(f"{name:<15} {narrating:>4} of {lines:>4} lines")
    total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all':<15} {total[0]:>4} of {total[1]:>4} lines ({len(rows)} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
