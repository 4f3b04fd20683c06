"""The ML policy plugins: what each training framework adds to the PodSets, one module each
(as Trainer v2.3 lays out its runtime plugins), and the registry that picks one from the
runtime's mlPolicy. A plugin is a class with a `name`, `applies(mlPolicy)` and
`enforce(info, trainjob)`; a new framework is a module here and a line in PLUGINS."""

from __future__ import annotations

from typing import Protocol

from trainjob.models import MLPolicy, TrainJob
from trainjob.runtime.info import RuntimeInfo, RuntimeSpecError
from trainjob.runtime.mlpolicies.flux import UnsupportedPolicy
from trainjob.runtime.mlpolicies.jax import JAXPolicy
from trainjob.runtime.mlpolicies.mpi import MPIPolicy
from trainjob.runtime.mlpolicies.plain import PlainPolicy
from trainjob.runtime.mlpolicies.torch import TorchPolicy
from trainjob.runtime.mlpolicies.xgboost import XGBoostPolicy


class MLPolicyPlugin(Protocol):
    """One ML framework. `applies` picks it from the runtime's mlPolicy; `enforce` edits PodSets."""

    name: str

    def applies(self, ml: MLPolicy) -> bool: ...

    def enforce(self, info: RuntimeInfo, trainjob: TrainJob) -> None: ...


# Most specific first: the first plugin that applies wins.
PLUGINS: list[MLPolicyPlugin] = [
    TorchPolicy(),
    MPIPolicy(),
    JAXPolicy(),
    XGBoostPolicy(),
    UnsupportedPolicy(),
    PlainPolicy(),
]


def select_plugin(ml: MLPolicy) -> MLPolicyPlugin:
    for plugin in PLUGINS:
        if plugin.applies(ml):
            return plugin
    raise RuntimeSpecError("no ML policy plugin applies")  # PlainPolicy always applies
