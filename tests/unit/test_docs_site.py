"""The documentation as a site (mkdocs.yml): MkDocs builds docs/ with --strict, so that a page
left out of the navigation, a link to a page or heading that is not there, or a link MkDocs
cannot resolve fails here; links to the repository's other files point at GitHub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from release.site_hooks import outside_links

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_with_every_page_by_audience(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pages = sorted(p.relative_to(REPO / "docs") for p in (REPO / "docs").rglob("*.md"))
    assert {p.parts[0] for p in pages if len(p.parts) > 1} == {"users", "operators", "contributors"}
    for page in pages:
        built = tmp_path / page.with_suffix("") / "index.html"
        assert (built if page.name != "index.md" else tmp_path / "index.html").is_file(), page
    install = (tmp_path / "operators" / "install" / "index.html").read_text()
    github = "https://github.com/trainjob-dev/trainjob-multicluster"
    assert f'href="{github}/blob/main/examples/install/fleet.env"' in install


def test_a_link_out_of_docs_points_at_the_repository_and_one_within_stays(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "operators").mkdir(parents=True)
    (tmp_path / "examples").mkdir()
    page = docs / "operators" / "install.md"
    text = (
        "[a](../../examples/) [b](../../CHANGELOG.md#030) [c](configuration.md#helm) "
        "[d](https://example.com/x) [e](#here)"
    )
    assert outside_links(text, page, docs, "https://github.com/o/r/") == (
        "[a](https://github.com/o/r/tree/main/examples) "
        "[b](https://github.com/o/r/blob/main/CHANGELOG.md#030) [c](configuration.md#helm) "
        "[d](https://example.com/x) [e](#here)"
    )
