"""The component build phase: the objects a TrainJob's pods need besides its Jobs and its
headless Service, each from the plugin that asks for it (as Trainer v2.3's ComponentBuilder
plugins: the gang scheduler's PodGroup, the MPI policy's hostfile, JobSet's volume claims).

BUILDERS runs in order; the worker controller makes what they give once, before the Jobs,
with its labels and, for an owned component, the TrainJob as owner (pure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubebase.objects import Dict
from trainjob.runtime import podgroups
from trainjob.runtime.info import RuntimeInfo
from trainjob.runtime.podgroups import PodGroupPlugin


@dataclass(frozen=True)
class Component:
    """One object to make, and whether the TrainJob owns it (deleted with the job) or it
    outlives the job (a claim the runtime keeps)."""

    obj: Dict
    owned: bool = True


Builder = Callable[[RuntimeInfo, PodGroupPlugin | None], list[Component]]


def pod_group(info: RuntimeInfo, group: PodGroupPlugin | None) -> list[Component]:
    """The PodGroup of the scheduler the pods are grouped for (None: not grouped)."""
    return [] if group is None else [Component(podgroups.build_pod_group(info, group))]


def ml_policy_objects(info: RuntimeInfo, group: PodGroupPlugin | None) -> list[Component]:
    """What the ML policy added (the MPI hostfile ConfigMap)."""
    return [Component(obj) for obj in info.policy.extra_objects]


def volume_claims(info: RuntimeInfo, group: PodGroupPlugin | None) -> list[Component]:
    """The runtime's volumeClaimPolicies' claims; owned only with retentionPolicy Delete."""
    return [
        Component(claim, claim["metadata"]["name"] in info.policy.owned_claims)
        for claim in info.policy.claims
    ]


BUILDERS: list[Builder] = [pod_group, ml_policy_objects, volume_claims]


def build(info: RuntimeInfo, group: PodGroupPlugin | None) -> list[Component]:
    """Every component of the TrainJob, in BUILDERS' order."""
    return [component for builder in BUILDERS for component in builder(info, group)]
