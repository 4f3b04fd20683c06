"""The chart's README (`helm show readme`), written from Chart.yaml and the comments of
values.yaml: each value's dotted path, its default and the comment above it (or beside it).
`python -m release.manifests` writes it with deploy/ (and `--check` compares it).

values.yaml is read line by line, as it is written here: a comment block directly above a key
(or a comment after its value) describes it; a blank line ends a block; a key's children are
indented under it; list items (`- ...`) belong to the key above them and are not listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):(?P<rest>.*)$")


@dataclass(frozen=True)
class Value:
    path: str
    default: str  # as written in values.yaml; "" for a mapping or a list below it
    comment: str


def _split_comment(rest: str) -> tuple[str, str]:
    """`value  # comment` -> (value, comment), leaving `#` inside quotes alone."""
    quote = None
    for i, ch in enumerate(rest):
        if ch in "\"'" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1] == " "):
            return rest[:i].strip(), rest[i + 1 :].strip()
    return rest.strip(), ""


def values(text: str) -> list[Value]:
    out: list[Value] = []
    stack: list[tuple[int, str]] = []
    block: list[str] = []
    opened: int | None = None  # a key with no value on its line: a mapping or a list follows
    in_list: int | None = None  # the indentation of a key whose list items follow
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if not stripped:
            block = []
            continue
        if stripped.startswith("#"):
            if in_list is None or indent <= in_list:
                block.append(stripped.lstrip("#").strip())
            continue
        if opened is not None and stripped.startswith("- "):
            in_list = opened  # the items of the key just read
        opened = None
        if in_list is not None and (indent > in_list or stripped.startswith("- ")):
            continue
        in_list = None
        match = _KEY.match(line)
        if match is None:
            block = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        default, beside = _split_comment(match["rest"])
        comment = " ".join([*block, beside]).strip()
        out.append(Value(".".join(k for _, k in stack), default, comment))
        block = []
        if not default:
            opened = indent
    # A mapping is listed only when a comment says what it is; its keys are listed anyway.
    parents = {v.path.rsplit(".", 1)[0] for v in out if "." in v.path}
    return [v for v in out if v.path not in parents or v.comment]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme(chart_dir: Path) -> str:
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    rows = values((chart_dir / "values.yaml").read_text())
    version = chart["version"]
    install = f"helm install trainjob oci://ghcr.io/trainjob-dev/charts/{chart['name']}"
    lines = [
        f"# {chart['name']}",
        "",
        " ".join(str(chart["description"]).split()),
        "",
        "Written from Chart.yaml and the comments of values.yaml by `./run manifests`; the",
        "project's docs/operators/configuration.md says more of each value,",
        "docs/operators/install.md installs it.",
        "",
        "## Install",
        "",
        "Kueue first, configured as docs/operators/kueue.md says. Then, on each worker and on the",
        "manager:",
        "",
        "```sh",
        f"{install} --version {version} \\",
        "  -n trainjob-system --create-namespace --set role=worker    # each worker",
        f"{install} --version {version} \\",
        "  -n trainjob-system --create-namespace --set role=manager   # the manager",
        "```",
        "",
        f"Kubernetes {chart.get('kubeVersion', '')}; tested with Kueue "
        f"{chart['annotations']['trainjob.dev/kueue-version']} and Kubeflow Trainer's API "
        f"{chart['annotations']['trainjob.dev/trainer-api-version']}.",
        "",
        "## Values",
        "",
        "| value | default | what it does |",
        "|---|---|---|",
    ]
    for row in rows:
        default = f"`{_cell(row.default)}`" if row.default else ""
        lines.append(f"| `{row.path}` | {default} | {_cell(row.comment)} |")
    return "\n".join(lines) + "\n"
