"""Which worker clusters one TrainJob may run on, by its own choice (pure).

Two annotations on the manager TrainJob narrow the clusters of its queue's MultiKueueConfig,
never widen them:

- `kueue.x-k8s.io/multikueue-cluster-names`: MultiKueueCluster names, comma-separated (the
  name Kueue's proposal for the same feature gives it: kueue#14540, PR #14539);
- `trainjob.dev/cluster-selector`: a label selector over the MultiKueueClusters' labels, in
  kubectl's syntax (`region=eu,tier in (gold,silver),!spot`).

Both given: a cluster must pass both. Bad values are refused by the webhook on create, naming
the annotation; a value made bad later (annotations can be edited) selects no cluster and says
why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from trainjob_api import constants as c

CLUSTER_NAMES_ANNOTATION = "kueue.x-k8s.io/multikueue-cluster-names"
CLUSTER_SELECTOR_ANNOTATION = f"{c.DOMAIN}/cluster-selector"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class SelectionError(ValueError):
    """A selection annotation that cannot be read; the message names the annotation."""


def _field(annotation: str) -> str:
    return f"metadata.annotations[{annotation}]"


def _names(text: str) -> frozenset[str]:
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise SelectionError(f"{_field(CLUSTER_NAMES_ANNOTATION)}: no cluster name given")
    for name in names:
        if not name or len(name) > 253 or not all(_DNS_LABEL.match(p) for p in name.split(".")):
            raise SelectionError(
                f"{_field(CLUSTER_NAMES_ANNOTATION)}: {name!r} is not a MultiKueueCluster name "
                "(lowercase letters, digits, '-' and '.'; names separated by commas)"
            )
    return frozenset(names)


def _key(key: str, where: str) -> str:
    prefix, _, name = key.rpartition("/")
    ok = bool(_QUALIFIED.match(name)) and len(name) <= 63
    if prefix:
        ok = ok and len(prefix) <= 253 and all(_DNS_LABEL.match(p) for p in prefix.split("."))
    if not ok:
        raise SelectionError(f"{where}: {key!r} is not a label key")
    return key


def _values(text: str, where: str) -> frozenset[str]:
    values = [v.strip() for v in text.split(",")]
    for value in values:
        if len(value) > 63 or not _VALUE.match(value):
            raise SelectionError(f"{where}: {value!r} is not a label value")
    return frozenset(values)


@dataclass(frozen=True)
class Requirement:
    """One requirement of a label selector: `op` is =, !=, in, notin, exists or !exists."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        among = self.key in labels and labels[self.key] in self.values
        return among if self.op in ("=", "in") else not among  # != and notin: a missing key too


# A selector is a line or two (kubectl's are): longer is refused first. Each requirement is
# matched stripped, by patterns with no two runs of spaces side by side to share one between
# them, so a match costs time linear in its length (with `\s*` on both sides of an optional
# part, a key, 4,000 spaces and a letter took 0.1 s, and a 256 KiB annotation minutes).
MAX_SELECTOR_CHARS = 4096
_SET = re.compile(r"^(!?)\s*([^\s=!(),]+)(?:\s*(notin|in)\s*\(([^()]*)\))?$")
_EQUALS = re.compile(r"^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$")


def _split(text: str) -> list[str]:
    """Requirements separated by commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_selector(text: str) -> list[Requirement]:
    """kubectl's label selector syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
    `k` (exists), `!k` (does not exist), joined by commas (all must hold)."""
    where = _field(CLUSTER_SELECTOR_ANNOTATION)
    if not text.strip():
        raise SelectionError(f"{where}: empty selector")
    if len(text) > MAX_SELECTOR_CHARS:
        raise SelectionError(
            f"{where}: {len(text)} characters, over the {MAX_SELECTOR_CHARS} a selector may have"
        )
    out: list[Requirement] = []
    for part in (p.strip() for p in _split(text)):
        if m := _EQUALS.match(part):
            op = "!=" if m[2] == "!=" else "="
            out.append(Requirement(_key(m[1], where), op, _values(m[3], where)))
        elif m := _SET.match(part):
            neg, key, op, values = m[1], _key(m[2], where), m[3], m[4]
            if op and neg:
                raise SelectionError(f"{where}: {part.strip()!r}: '!' goes with a key alone")
            if op:
                out.append(Requirement(key, op, _values(values, where)))
            else:
                out.append(Requirement(key, "!exists" if neg else "exists"))
        else:
            raise SelectionError(f"{where}: cannot read {part.strip()!r}")
    return out


@dataclass(frozen=True)
class Selection:
    names: frozenset[str] | None = None
    selector: list[Requirement] | None = None
    text: str = ""  # the annotations as given, for messages

    def allows(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.names is not None and name not in self.names:
            return False
        return all(req.matches(labels) for req in self.selector or [])


def selection_of(annotations: Mapping[str, str] | None) -> Selection | None:
    """A TrainJob's own choice of clusters (None: any cluster of its queue). Raises
    SelectionError naming the annotation when a value cannot be read."""
    annotations = annotations or {}
    names_text = annotations.get(CLUSTER_NAMES_ANNOTATION)
    selector_text = annotations.get(CLUSTER_SELECTOR_ANNOTATION)
    if names_text is None and selector_text is None:
        return None
    said = [
        f"{key}={value!r}"
        for key, value in (
            (CLUSTER_NAMES_ANNOTATION, names_text),
            (CLUSTER_SELECTOR_ANNOTATION, selector_text),
        )
        if value is not None
    ]
    return Selection(
        names=_names(names_text) if names_text is not None else None,
        selector=parse_selector(selector_text) if selector_text is not None else None,
        text=", ".join(said),
    )
