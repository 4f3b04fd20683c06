"""Every relative link of the docs leads somewhere: the README, the CHANGELOG, docs/, the
examples' pages and the chart's README link to files of this repository that exist, and a
link to `page.md#anchor` to a heading of that page (GitHub's anchor of it) or an explicit
`<a id="...">`. Links to other sites are not followed (the tests reach no network)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.files import REPO_ROOT

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


# A path of this repository named in a page's code (spans, and the lines of its code blocks:
# what operators run) or in a file's comments (`deploy/worker`, docs/operators/install.md):
# its first part one of the repository's folders, no placeholder (`<role>`, `$RELEASE`,
# `X.Y.Z`, a glob) in it.
TOP = sorted(
    {
        line.split("/", 1)[0]
        for line in subprocess.run(
            ["git", "-C", str(REPO_ROOT), "ls-files"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if "/" in line and not line.startswith(".")
    }
)
REPO_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r")/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
PLACEHOLDER = re.compile(r"[<>${}*]|X\.Y\.Z")
# Endings of files, never a module's attribute (`release/assets.yaml` is no `assets.yaml`).
FILE_ENDINGS = {"py", "md", "yaml", "yml", "json", "toml", "sh", "txt", "env", "gz", "tgz", "ts"}


def named_paths(text: str) -> list[str]:
    """The repository paths a page names in code spans and code blocks, or a file names in
    its comments (`#` lines)."""
    spans = CODE_SPAN.findall(text)
    blocks = [line for block in CODE_BLOCK.findall(text) for line in block.splitlines()]
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    out = []
    for piece in [*spans, *blocks, *comments]:
        for path in REPO_PATH.findall(piece):
            at = piece.index(path)
            if PLACEHOLDER.search(piece[at:].split()[0]) or _kubectl_name(piece[:at], path):
                continue
            out.append(path)
    return out


def _kubectl_name(before: str, path: str) -> bool:
    """`deploy/trainjob-dispatcher` after a kubectl verb is a resource and its name, not a
    folder (a file named after -f or -k, or with an ending, is a path all the same)."""
    words = before.split()
    last = path.rsplit("/", 1)[1]
    given = bool(words) and words[-1] in ("-f", "-k", "--filename", "--kustomize")
    return "kubectl" in words and not given and "." not in last


def there(path: str) -> bool:
    """A file or folder, or a module's name for something in it (`trainjob/jsondoc.json_copy`)."""
    module, _, name = path.rpartition(".")
    return (REPO_ROOT / path).exists() or (
        name.isidentifier() and name not in FILE_ENDINGS and (REPO_ROOT / f"{module}.py").is_file()
    )


def missing_paths(text: str) -> list[str]:
    return sorted({p for p in named_paths(text) if not there(p)})


def commented_files() -> list[Path]:
    """Files operators read the comments of: the runbook's list, the chart's values, the
    deploy/ kustomizations and the examples' YAML."""
    return [
        REPO_ROOT / "examples" / "install" / "fleet.env",
        REPO_ROOT / "charts" / "trainjob-multicluster" / "values.yaml",
        *sorted((REPO_ROOT / "deploy").glob("**/kustomization.yaml")),
        *sorted((REPO_ROOT / "examples").glob("**/*.yaml")),
    ]


# Pages of history: they name what was there at the time.
HISTORY = ("CHANGELOG.md", "docs/contributors/benchmarks-history.md")


def test_every_repository_path_the_docs_and_comments_name_is_there() -> None:
    found = {
        str(p.relative_to(REPO_ROOT)): missing_paths(p.read_text())
        for p in [*pages(), *commented_files()]
        if str(p.relative_to(REPO_ROOT)) not in HISTORY
    }
    assert {page: paths for page, paths in found.items() if paths} == {}
    assert sum(len(named_paths(p.read_text())) for p in pages()) > 100  # paths were read


def test_a_path_that_is_not_there_is_found() -> None:
    text = (
        "see `deploy/worker/rbac.yaml` and `deploy/worker`, `deploy/<role>/manifests.yaml`,\n"
        "`$RELEASE/worker.yaml`, `docs/operators/install.md`, `release/assets.build`,\n"
        "`release/assets.gone`, `release/nowhere.build`, `release/assets.yaml`,\n"
        "`benchmarks/test_*.py`, `deploy/${ROLE}/kustomization.yaml`\n"
        "```bash\nkubectl apply -f examples/install/gone.yaml -f deploy/<role>/x.yaml\n"
        "kubectl apply -k deploy/nowhere\nkubectl rollout status deploy/trainjob-dispatcher\n```\n"
        "# The runbook (docs/install.md) and docs/operators/release.md\n"
    )
    assert missing_paths(text) == [
        "deploy/nowhere",
        "deploy/worker/rbac.yaml",
        "docs/install.md",
        "examples/install/gone.yaml",
        "release/assets.yaml",
        "release/nowhere.build",
    ]
