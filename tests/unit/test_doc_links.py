"""Every relative link of the docs leads somewhere: the README, the CHANGELOG, docs/, the
examples' pages and the chart's README link to files of this repository that exist, and a
link to `page.md#anchor` to a heading of that page (GitHub's anchor of it) or an explicit
`<a id="...">`. Links to other sites are not followed (the tests reach no network)."""

from __future__ import annotations

import re
from pathlib import Path

from clusters.config import REPO_ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"```.*?```", flags=re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def pages() -> list[Path]:
    return [
        REPO_ROOT / "README.md",
        REPO_ROOT / "CHANGELOG.md",
        REPO_ROOT / "charts" / "trainjob-multicluster" / "README.md",
        *sorted((REPO_ROOT / "docs").rglob("*.md")),
        *sorted((REPO_ROOT / "examples").glob("**/*.md")),
    ]


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces to
    hyphens), and its explicit `<a id>`s."""
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for line in CODE_BLOCK.sub("", text).splitlines():
        heading = re.match(r"^#{1,6} (.*)$", line)
        if heading:
            words = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(words.replace(" ", "-"))
    return found


def broken(page: Path) -> list[str]:
    prose = CODE_SPAN.sub("", CODE_BLOCK.sub("", page.read_text()))
    out = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{target}: no such heading or anchor")
    return out


def test_every_relative_link_of_the_docs_leads_somewhere() -> None:
    found = {str(p.relative_to(REPO_ROOT)): broken(p) for p in pages()}
    assert {page: links for page, links in found.items() if links} == {}
    assert sum(len(LINK.findall(p.read_text())) for p in pages()) > 150  # links were read


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text('# Some Title: with (punctuation)\n<a id="row"></a>\n')
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#some-title-with-punctuation) [b](other.md#row) [c](gone.md) "
        "[d](other.md#nowhere) [e](https://example.com/x) `[f](inside-code.md)`\n"
    )
    assert broken(page) == ["gone.md: no such file", "other.md#nowhere: no such heading or anchor"]
