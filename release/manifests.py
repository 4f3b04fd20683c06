"""deploy/ and the reference tables of the docs, written from their sources: the Helm chart
(charts/trainjob-multicluster) is where the manifests are written, each controller's settings model
is where its settings are (docs/operators/configuration.md), trainjob/vocabulary.py where the status
conditions are (docs/users/user-guide.md), plugin/trainjob_api/story.py where the story's fields are
(docs/users/usage.md, plugin/kubectl_trainjob/ui/story.d.ts), the chart's values.yaml where its
README's table is (release/chart_readme.py). `./run manifests` runs this.

    python -m release.manifests          # write them
    python -m release.manifests --check  # exit 1 if any differs from what its source gives
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from clusters.chart import REPO, for_kubectl, template
from clusters.errors import BedError
from dispatcher.settings import DispatcherSettings
from release import crd_docs, crd_schema, design_map, story_docs
from release.chart_readme import readme
from trainjob import vocabulary
from trainjob.runtime import fields
from trainjob_api.story import TrainJobStory, Worker
from worker_controller.settings import WorkerSettings

Dict = dict[str, Any]
HEADER = (
    "# Rendered from charts/trainjob-multicluster by `./run manifests` ({values}); do not edit:\n"
    "# change the chart and render again (tests/unit/clusters/test_chart.py checks they agree).\n"
)


@dataclass(frozen=True)
class Rendering:
    """One file of deploy/: the chart with `values`, the objects named in `only` (all: empty)."""

    path: str
    values: Dict
    only: tuple[str, ...] = ()

    def text(self) -> str:
        docs = [
            d
            for d in for_kubectl(template(self.values))
            if not self.only or d["metadata"]["name"] in self.only
        ]
        body = "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)
        return HEADER.format(values=_flags(self.values)) + body


def _flags(values: Dict, prefix: str = "") -> str:
    parts = []
    for key, value in values.items():
        if isinstance(value, dict):
            parts.append(_flags(value, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key}={json.dumps(value)}")
    return ", ".join(parts)


KUEUE_ACCESS = ("trainjob-multikueue-kueue",)
DEPENDENCIES_ACCESS = ("trainjob-multikueue-dependencies",)
RENDERINGS = (
    Rendering("deploy/manager/manifests.yaml", {"role": "manager"}),
    Rendering("deploy/worker/manifests.yaml", {"role": "worker"}),
    Rendering(
        "deploy/worker-identity/manifests.yaml",
        {"role": "worker", "worker": {"controller": {"enabled": False}}},
    ),
    Rendering(
        "deploy/coexist/manager/manifests.yaml", {"role": "manager", "manager": {"mode": "Coexist"}}
    ),
    Rendering(
        "deploy/coexist/worker/kueue-multikueue-rbac.yaml",
        {"role": "worker", "worker": {"multikueueIdentity": {"kueueMultiKueueAccess": True}}},
        only=KUEUE_ACCESS,
    ),
    Rendering(
        "deploy/worker/with-dependencies/dependencies-rbac.yaml",
        {"role": "worker", "worker": {"multikueueIdentity": {"dependencies": True}}},
        only=DEPENDENCIES_ACCESS,
    ),
    Rendering(
        "deploy/cert-manager/manager/manifests.yaml",
        {"role": "manager", "certificates": {"mode": "cert-manager"}},
    ),
    Rendering(
        "deploy/cert-manager/worker/manifests.yaml",
        {"role": "worker", "certificates": {"mode": "cert-manager"}},
    ),
)


CONFIGURATION_DOC = REPO / "docs" / "operators" / "configuration.md"


def settings_table(model: type[BaseModel]) -> str:
    """A Markdown table of a controller's settings: flag, config key, default, meaning."""
    rows = ["| flag | config key | default | what it does |", "|---|---|---|---|"]
    for name, spec in model.model_fields.items():
        key = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)
        value = spec.get_default(call_default_factory=True)
        default = "" if value is None else f"`{json.dumps(value, default=str)}`"
        text = " ".join((spec.description or "").split()).replace("|", "\\|")
        rows.append(f"| `--{name.replace('_', '-')}` | `{key}` | {default} | {text} |")
    return "\n".join(rows) + "\n"


USER_GUIDE = REPO / "docs" / "users" / "user-guide.md"
USAGE = REPO / "docs" / "users" / "usage.md"
STORY_TYPES = REPO / "plugin" / "kubectl_trainjob" / "ui" / "story.d.ts"
CHART_DIR = REPO / "charts" / "trainjob-multicluster"


def _section(doc: Path, text: str, what: str, body: str) -> str:
    """`text` of `doc` with what stands between the markers of `what` written again."""
    start = f"<!-- {what}: written by ./run manifests -->"
    end = f"<!-- end of {what} -->"
    head, _, rest = text.partition(start + "\n")
    _, _, tail = rest.partition(end)
    if not rest:
        raise BedError(f"{doc.relative_to(REPO)} has no line {start!r}")
    return f"{head}{start}\n{body}{end}{tail}"


def configuration_doc(text: str) -> str:
    """docs/operators/configuration.md with each settings table written again from its model."""
    for name, model in (
        ("the dispatcher", DispatcherSettings),
        ("the worker controller", WorkerSettings),
    ):
        text = _section(CONFIGURATION_DOC, text, f"the settings of {name}", settings_table(model))
    return text


def user_guide(text: str) -> str:
    """docs/users/user-guide.md with its reference table of conditions and reasons written again
    from trainjob/vocabulary.py."""
    return _section(USER_GUIDE, text, "the status vocabulary", vocabulary.table())


def usage(text: str) -> str:
    """docs/users/usage.md with the fields of the story and of a worker written again from
    plugin/trainjob_api/story.py."""
    text = _section(USAGE, text, "the story's fields", story_docs.field_table(TrainJobStory))
    return _section(USAGE, text, "a worker's fields", story_docs.field_table(Worker))


DIFFERENCES = REPO / "docs" / "operators" / "differences.md"
DESIGN = REPO / "docs" / "contributors" / "design.md"


def design(text: str) -> str:
    """docs/contributors/design.md with its map of the code written again from the code."""
    return _section(DESIGN, text, "the module map", design_map.table())


def runtime_fields_table() -> str:
    """Every field of Trainer v2.3's runtime and what the framework does with it."""
    rows = ["| field of the runtime's `spec` | here | how |", "|---|---|---|"]
    for entry in fields.FIELDS:
        shown = f"`{entry.path}`" + (" and below" if entry.below else "")
        how = entry.how.replace("|", "\\|")
        rows.append(f"| {shown} | {entry.treatment} | {how} |")
    return "\n".join(rows) + "\n"


def differences(text: str) -> str:
    """docs/operators/differences.md with the runtime's field table written again from
    trainjob/runtime/fields.py."""
    return _section(DIFFERENCES, text, "the runtime's fields", runtime_fields_table())


def chart_readme(_text: str) -> str:
    return readme(CHART_DIR)


def story_types(_text: str) -> str:
    return story_docs.typescript()


@functools.cache
def _installed(plural: str, source_text: str) -> Dict:
    return crd_schema.installed(plural, source_text)  # seconds each: once per source text


def _installed_crd(plural: str, source: Path, _text: str) -> str:
    """crds/'s file from our source as it is on disk now (after its descriptions)."""
    return crd_schema.installed_text(_installed(plural, source.read_text()))


def _chart_copy(plural: str, source: Path, _text: str) -> str:
    """The chart's copy of the installed CRD (compact JSON), from the same source."""
    return crd_schema.chart_copy(_installed(plural, source.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.manifests", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for rendering in RENDERINGS:
        path = REPO / rendering.path
        text = rendering.text()
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(rendering.path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {rendering.path}", file=sys.stderr)
    crd_descriptions: list[tuple[Path, Callable[[str], str], str]] = [
        (crd_docs.crd_path(plural), functools.partial(crd_docs.described, plural), "descriptions")
        for plural in crd_docs.PLURALS
    ]
    installed_crds: list[tuple[Path, Callable[[str], str], str]] = [
        (
            crd_docs.installed_path(plural),
            functools.partial(_installed_crd, plural, source),
            "the installed CRD",
        )
        for plural, source in crd_schema.sources()
    ]
    chart_copies: list[tuple[Path, Callable[[str], str], str]] = [
        (
            crd_schema.chart_copy_path(plural),
            functools.partial(_chart_copy, plural, source),
            "the chart's copy of the CRD",
        )
        for plural, source in crd_schema.sources()
    ]
    for doc, written, what in (
        *crd_descriptions,
        *installed_crds,
        *chart_copies,
        (crd_docs.REFERENCE, crd_docs.reference, "the API's fields"),
        (CONFIGURATION_DOC, configuration_doc, "the settings tables"),
        (USER_GUIDE, user_guide, "the status vocabulary"),
        (USAGE, usage, "the story's fields"),
        (DIFFERENCES, differences, "the runtime's fields"),
        (DESIGN, design, "the module map"),
        (STORY_TYPES, story_types, "the story's types"),
        (CHART_DIR / "README.md", chart_readme, "the chart's README"),
    ):
        text = doc.read_text() if doc.is_file() else ""
        new = written(text)
        if new == text:
            continue
        if args.check:
            stale.append(str(doc.relative_to(REPO)))
        else:
            doc.write_text(new)
            print(f"wrote {what} of {doc.relative_to(REPO)}", file=sys.stderr)
    if stale:
        print(
            "differs from its source (run ./run manifests): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
