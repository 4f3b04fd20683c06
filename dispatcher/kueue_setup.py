"""Change an existing Kueue configuration the least this product needs, keeping the rest
(comments included) as it is.

    kubectl -n kueue-system get configmap kueue-manager-config -o yaml \\
        | trainjob-kueue-config --role worker | kubectl apply -f -
    helm get values kueue -n kueue-system --all -o yaml \\
        | trainjob-kueue-config --role manager > kueue-values.yaml     # Kueue's Helm chart

It reads one of three shapes on stdin and writes the same shape on stdout: Kueue's ConfigMap
(`data.controller_manager_config.yaml`), the configuration file itself, or the values of
Kueue's Helm chart (`managerConfig.controllerManagerConfigYaml`, `controllerManager.featureGates`).
The changes, on every cluster:

- `integrations.externalFrameworks` gains `TrainJob.v1alpha1.trainer.kubeflow.org`: our
  controllers are the TrainJob integration;
- `integrations.frameworks` loses `trainer.kubeflow.org/trainjob`: Kueue's own would fight them;

and on a manager in Replace mode, Kueue's `MultiKueue` feature gate is turned off (the
dispatcher serves `kueue.x-k8s.io/multikueue`). Each change is listed on stderr; an input that
already has them is written back unchanged. Kueue reads its configuration at start: restart
`kueue-controller-manager` after applying. With `--check` nothing is written: the command
says what the input lacks and exits 1, or exits 0 when it has it all.
"""

from __future__ import annotations

import argparse
import io
import sys

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import LiteralScalarString

EXTERNAL = "TrainJob.v1alpha1.trainer.kubeflow.org"
KUEUE_TRAINJOB = "trainer.kubeflow.org/trainjob"
CONFIG_KEY = "controller_manager_config.yaml"
# What `kubectl get -o yaml` adds that `kubectl apply` must not be given back.
SERVER_METADATA = ("managedFields", "uid", "creationTimestamp", "generation", "selfLink")


def _yaml() -> YAML:
    y = YAML()  # round trip: comments, order and quoting kept
    y.preserve_quotes = True
    y.width = 4096
    return y


def change_config(cfg: CommentedMap, *, multikueue_off: bool, said: list[str]) -> None:
    """Kueue's Configuration, changed in place; what changed is appended to `said`."""
    integrations = cfg.setdefault("integrations", CommentedMap())
    frameworks = integrations.get("frameworks")
    if frameworks and KUEUE_TRAINJOB in frameworks:
        _remove(frameworks, frameworks.index(KUEUE_TRAINJOB))
        said.append(f"integrations.frameworks: removed {KUEUE_TRAINJOB}")
    external = integrations.get("externalFrameworks")
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


def _edit_text(text: str, *, multikueue_off: bool, said: list[str]) -> str:
    y = _yaml()
    cfg = y.load(text)
    if not isinstance(cfg, CommentedMap) or cfg.get("kind") != "Configuration":
        raise ValueError("the embedded file is not Kueue's Configuration (kind: Configuration)")
    change_config(cfg, multikueue_off=multikueue_off, said=said)
    out = io.StringIO()
    y.dump(cfg, out)
    return out.getvalue()


def change(text: str, *, role: str, mode: str = "Replace") -> tuple[str, list[str]]:
    """The input document changed for `role` (manager | worker); (output, what changed)."""
    y = _yaml()
    doc = y.load(text)
    if not isinstance(doc, CommentedMap):
        raise ValueError("expected a YAML mapping on stdin")
    off = role == "manager" and mode == "Replace"
    said: list[str] = []
    if doc.get("kind") == "Configuration":
        change_config(doc, multikueue_off=off, said=said)
    elif doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        if CONFIG_KEY not in data:
            raise ValueError(f"the ConfigMap has no data key {CONFIG_KEY!r}: not Kueue's?")
        data[CONFIG_KEY] = LiteralScalarString(
            _edit_text(data[CONFIG_KEY], multikueue_off=off, said=said)
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
        text = _edit_text(doc["managerConfig"][key], multikueue_off=False, said=said)
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
            "expected Kueue's ConfigMap, its Configuration, or its Helm chart's values "
            "(kind ConfigMap, kind Configuration, or a managerConfig key)"
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
    parser.add_argument("--role", choices=["manager", "worker"], required=True)
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
