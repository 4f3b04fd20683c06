"""Change an existing Kueue configuration the least this product needs, keeping the rest
(comments included) as it is.

    kubectl -n kueue-system get configmap kueue-manager-config -o yaml \\
        | trainjob-kueue-config --role worker | kubectl apply -f -
    helm get values kueue -n kueue-system --all -o yaml \\
        | trainjob-kueue-config --role manager > kueue-values.yaml     # Kueue's Helm chart

It reads one of four shapes on stdin and writes the same shape on stdout: Kueue's ConfigMap
(`data.controller_manager_config.yaml`), the configuration file itself, the values of Kueue's
Helm chart (`managerConfig.controllerManagerConfigYaml`, `controllerManager.featureGates`), or
Kueue's release manifests (a stream of documents: its ConfigMap `kueue-manager-config` changed,
every other document written back as it came), so that an upgrade of Kueue starts with the
change in place:

    curl -fsSL .../kueue/releases/download/vX.Y.Z/manifests.yaml \\
        | trainjob-kueue-config --role worker | kubectl apply --server-side --force-conflicts -f -

The changes, on the manager and on every worker that runs our worker controller
(`--role manager`, `--role worker`):

- `integrations.externalFrameworks` gains `TrainJob.v1alpha1.trainer.kubeflow.org`: our
  controllers are the TrainJob integration;
- `integrations.frameworks` loses `trainer.kubeflow.org/trainjob`: Kueue's own would fight them;

and on a manager in Replace mode, Kueue's `MultiKueue` feature gate is turned off (the
dispatcher serves `kueue.x-k8s.io/multikueue`). A worker that runs Kubeflow Trainer and JobSet
instead (`--role trainer-worker`) takes the other way round: Kueue's own integration is the
TrainJob integration there, so

- `integrations.frameworks` keeps or gains `trainer.kubeflow.org/trainjob` (a file without
  frameworks gets Kueue's default, `batch/job`, with it);
- `integrations.externalFrameworks` loses `TrainJob.v1alpha1.trainer.kubeflow.org`: Kueue
  refuses a configuration where both name TrainJob.

Each change is listed on stderr; an input that already has them is written back unchanged
(Kueue's shipped configuration is already a Trainer worker's). Kueue reads its configuration at
start: restart `kueue-controller-manager` after applying. With `--check` nothing is written: the
command says what the input lacks and exits 1, or exits 0 when it has it all.
"""

from __future__ import annotations

import argparse
import io
import re
import sys

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import LiteralScalarString

EXTERNAL = "TrainJob.v1alpha1.trainer.kubeflow.org"
KUEUE_TRAINJOB = "trainer.kubeflow.org/trainjob"
# What Kueue enables when `integrations.frameworks` is absent or empty.
KUEUE_DEFAULT_FRAMEWORKS = ("batch/job",)
ROLES = ("manager", "worker", "trainer-worker")
CONFIG_KEY = "controller_manager_config.yaml"
# What `kubectl get -o yaml` adds that `kubectl apply` must not be given back.
SERVER_METADATA = ("managedFields", "uid", "creationTimestamp", "generation", "selfLink")
# Kueue's ConfigMap among its release manifests: its kind and name, as top-level lines.
CONFIG_MAP = "kueue-manager-config"
_KIND_CONFIG_MAP = re.compile(r"^kind: ConfigMap\s*$", re.M)
_NAMED_CONFIG_MAP = re.compile(rf"^  name: {CONFIG_MAP}\s*$", re.M)
_DOCUMENT_START = re.compile(r"^---(\s.*)?$")


def _yaml() -> YAML:
    y = YAML()  # round trip: comments, order and quoting kept
    y.preserve_quotes = True
    y.width = 4096
    return y


def change_config(
    cfg: CommentedMap, *, multikueue_off: bool, said: list[str], kueue_trainjob: bool = False
) -> None:
    """Kueue's Configuration, changed in place; what changed is appended to `said`. With
    `kueue_trainjob` (a worker that runs Kubeflow Trainer), Kueue's own TrainJob integration is
    kept on and ours is taken out; otherwise ours is put in and Kueue's taken out."""
    integrations = cfg.setdefault("integrations", CommentedMap())
    frameworks = integrations.get("frameworks")
    external = integrations.get("externalFrameworks")
    if kueue_trainjob:
        if external and EXTERNAL in external:
            while EXTERNAL in external:  # every copy: Kueue refuses the kind named twice
                _remove(external, external.index(EXTERNAL))
            said.append(f"integrations.externalFrameworks: removed {EXTERNAL}")
        if not frameworks:
            frameworks = integrations["frameworks"] = CommentedSeq(KUEUE_DEFAULT_FRAMEWORKS)
            said.append(
                f"integrations.frameworks: {', '.join(KUEUE_DEFAULT_FRAMEWORKS)} "
                "(Kueue's default, now written)"
            )
        if KUEUE_TRAINJOB not in frameworks:
            frameworks.append(KUEUE_TRAINJOB)
            said.append(f"integrations.frameworks: added {KUEUE_TRAINJOB}")
        return
    if frameworks and KUEUE_TRAINJOB in frameworks:
        while KUEUE_TRAINJOB in frameworks:  # every copy
            _remove(frameworks, frameworks.index(KUEUE_TRAINJOB))
        said.append(f"integrations.frameworks: removed {KUEUE_TRAINJOB}")
    if external is None:
        external = integrations["externalFrameworks"] = CommentedSeq()
    if EXTERNAL not in external:
        external.append(EXTERNAL)
        said.append(f"integrations.externalFrameworks: added {EXTERNAL}")
    if multikueue_off:
        gates = cfg.get("featureGates")
        if gates is None:
            gates = cfg["featureGates"] = CommentedMap()
        if gates.get("MultiKueue") is not False:
            gates["MultiKueue"] = False
            said.append("featureGates.MultiKueue: false")


def _remove(seq: CommentedSeq, index: int) -> None:
    """Remove one item, keeping the comment lines written after it (ruamel keeps them with
    the item): they go to the item before, or stay where they were when it has its own."""
    comment = seq.ca.items.pop(index, None)
    del seq[index]  # ruamel moves the later items' comments down with them
    if comment is not None and index > 0 and index - 1 not in seq.ca.items:
        seq.ca.items[index - 1] = comment


def _edit_text(text: str, *, multikueue_off: bool, said: list[str], kueue_trainjob: bool) -> str:
    y = _yaml()
    cfg = y.load(text)
    if not isinstance(cfg, CommentedMap) or cfg.get("kind") != "Configuration":
        raise ValueError("the embedded file is not Kueue's Configuration (kind: Configuration)")
    change_config(cfg, multikueue_off=multikueue_off, said=said, kueue_trainjob=kueue_trainjob)
    out = io.StringIO()
    y.dump(cfg, out)
    return out.getvalue()


def documents(text: str) -> list[str]:
    """A YAML stream cut at its document markers (each `---` line starts a piece): the pieces
    joined give the text back."""
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        if not pieces or _DOCUMENT_START.match(line):
            pieces.append(line)
        else:
            pieces[-1] += line
    return pieces


def _marker(piece: str) -> str:
    """The piece's `---` line (with its line end), or "" for a stream's first document."""
    first = piece.splitlines(keepends=True)[0] if piece else ""
    return first if _DOCUMENT_START.match(first) else ""


def _has_content(piece: str) -> bool:
    lines = piece[len(_marker(piece)) :].splitlines()
    return any(line.strip() and not line.lstrip().startswith("#") for line in lines)


def change_stream(pieces: list[str], *, role: str, mode: str) -> tuple[str, list[str]]:
    """Kueue's release manifests with its ConfigMap changed; every other document as it was."""
    found = [
        i
        for i, piece in enumerate(pieces)
        if _KIND_CONFIG_MAP.search(piece) and _NAMED_CONFIG_MAP.search(piece)
    ]
    if len(found) != 1:
        raise ValueError(
            f"expected Kueue's release manifests with one ConfigMap {CONFIG_MAP}, "
            f"found {len(found)} among {sum(map(_has_content, pieces))} documents"
        )
    (i,) = found
    marker = _marker(pieces[i])
    changed, said = change(pieces[i][len(marker) :], role=role, mode=mode)
    return "".join([*pieces[:i], marker + changed, *pieces[i + 1 :]]), said


def change(text: str, *, role: str, mode: str = "Replace") -> tuple[str, list[str]]:
    """The input document (or release manifests) changed for `role` (manager | worker |
    trainer-worker); (output, what changed)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    pieces = documents(text)
    if sum(map(_has_content, pieces)) > 1:
        return change_stream(pieces, role=role, mode=mode)
    y = _yaml()
    doc = y.load(text)
    if not isinstance(doc, CommentedMap):
        raise ValueError("expected a YAML mapping on stdin")
    off = role == "manager" and mode == "Replace"
    trainer = role == "trainer-worker"
    said: list[str] = []
    if doc.get("kind") == "Configuration":
        change_config(doc, multikueue_off=off, said=said, kueue_trainjob=trainer)
    elif doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        if CONFIG_KEY not in data:
            raise ValueError(f"the ConfigMap has no data key {CONFIG_KEY!r}: not Kueue's?")
        data[CONFIG_KEY] = LiteralScalarString(
            _edit_text(data[CONFIG_KEY], multikueue_off=off, said=said, kueue_trainjob=trainer)
        )
        meta = doc["metadata"]
        for key in SERVER_METADATA:
            meta.pop(key, None)
        (meta.get("annotations") or {}).pop(
            "kubectl.kubernetes.io/last-applied-configuration", None
        )
    elif "managerConfig" in doc:
        # Kueue's chart: a values file of only what changes, for `helm upgrade --reuse-values
        # -f` (Helm replaces a string or a list whole, and merges maps).
        key = "controllerManagerConfigYaml"
        if key not in (doc["managerConfig"] or {}):
            raise ValueError(f"managerConfig has no {key}: use `helm get values --all`")
        text = _edit_text(
            doc["managerConfig"][key], multikueue_off=False, said=said, kueue_trainjob=trainer
        )
        changed = CommentedMap(managerConfig=CommentedMap({key: LiteralScalarString(text)}))
        if off:  # the chart passes feature gates as flags, which win over the file
            gates = (doc.get("controllerManager") or {}).get("featureGates") or []
            kept = [g for g in gates if g.get("name") != "MultiKueue"]
            if len(kept) == len(gates) or any(
                g.get("name") == "MultiKueue" and g.get("enabled") is not False for g in gates
            ):
                said.append("controllerManager.featureGates: MultiKueue disabled")
            changed["controllerManager"] = CommentedMap(
                featureGates=CommentedSeq([*kept, CommentedMap(name="MultiKueue", enabled=False)])
            )
        doc = changed
    else:
        raise ValueError(
            "expected Kueue's ConfigMap, its Configuration, its Helm chart's values or its "
            "release manifests (kind ConfigMap, kind Configuration, a managerConfig key, or "
            "documents among which the ConfigMap kueue-manager-config)"
        )
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue(), said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trainjob-kueue-config",
        description=__doc__.split("\n\n")[0],
        epilog="Reads stdin, writes stdout; the changes go to stderr.",
    )
    parser.add_argument(
        "--role",
        choices=ROLES,
        required=True,
        help="the cluster's: manager, worker (runs our worker controller) or trainer-worker "
        "(runs Kubeflow Trainer and JobSet; Kueue keeps its own TrainJob integration)",
    )
    parser.add_argument(
        "--mode",
        choices=["Replace", "Coexist"],
        default="Replace",
        help="the manager's MultiKueue mode: Replace turns Kueue's MultiKueue gate off; "
        "Coexist leaves it as it is (default: Replace)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming what the input lacks, 0 when it has it all",
    )
    args = parser.parse_args(argv)
    try:
        out, said = change(sys.stdin.read(), role=args.role, mode=args.mode)
    except Exception as exc:  # the input's fault: say what, never a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check:
        for line in said:
            print(f"trainjob-kueue-config: not configured, would change {line}", file=sys.stderr)
        if not said:
            print(f"trainjob-kueue-config: configured for the {args.role}", file=sys.stderr)
        return 1 if said else 0
    for line in said or ["nothing to change: the configuration has it all"]:
        print(f"trainjob-kueue-config: {line}", file=sys.stderr)
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
