"""MkDocs hooks for the documentation site (mkdocs.yml): a page's relative link to a file of
the repository outside docs/ (an example, the chart, the CHANGELOG) becomes a link to that file
on GitHub, where the site can serve it; links between pages stay as MkDocs resolves them."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def outside_links(markdown: str, page_path: Path, docs: Path, repo_url: str) -> str:
    """`markdown` of the page at `page_path` with each relative link that leaves `docs`
    pointed at the repository's file (`blob`) or directory (`tree`) on the main branch."""
    root = docs.parent

    def point(match: re.Match[str]) -> str:
        target = match.group(2)
        path, _, anchor = target.partition("#")
        if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path) or path.startswith("/"):
            return match.group(0)
        resolved = Path(os.path.normpath(page_path.parent / path))
        if resolved.is_relative_to(docs):
            return match.group(0)
        kind = "tree" if resolved.is_dir() else "blob"
        url = f"{repo_url.rstrip('/')}/{kind}/main/{resolved.relative_to(root).as_posix()}"
        return match.group(1) + url + (f"#{anchor}" if anchor else "") + match.group(3)

    return LINK.sub(point, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    return outside_links(markdown, docs / page.file.src_path, docs, str(config["repo_url"]))
