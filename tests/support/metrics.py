"""The series the controllers serve, read from their Prometheus registry."""

from __future__ import annotations

import dispatcher.metrics
import worker_controller.metrics
from kubecontrol.metrics import REGISTRY

# Both controllers' series registered, whoever imports this first.
assert dispatcher.metrics and worker_controller.metrics


def served_series() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every series by name (counters with their `_total`): its type and label names."""
    out = {}
    for collector in list(REGISTRY._collector_to_names):  # the series' metadata
        kind = getattr(collector, "_type", None)
        if kind is None:
            continue
        name = collector._name + ("_total" if kind == "counter" else "")
        out[name] = (kind, tuple(collector._labelnames))
    return out
