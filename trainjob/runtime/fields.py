"""Every field of Kubeflow Trainer v2.3's (Cluster)TrainingRuntime and the JobSet template it
embeds, and what the worker controller's framework does with it: honoured (read, or copied
into the Jobs and pods as written, as JobSet would), refused (the webhooks refuse the
TrainJob at admission when its runtime exists; else a RuntimeInvalid condition names it), or
reported (not done here: a condition says so on the TrainJob, with a Warning Event, and the job
runs without it). Nothing is silently ignored: tests/local/test_fields.py
walks Trainer's CRD schema and fails on a field this table does not name.

docs/operators/differences.md's table is written from FIELDS (`./run manifests`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kubebase.objects import Dict
from trainjob.runtime import failure

Treatment = Literal["honoured", "refused", "reported"]


@dataclass(frozen=True)
class Field:
    """One field of the runtime's `spec` (a path as `kubectl explain` writes it, `[]` for a
    list's items); `below`: every field under it too."""

    path: str
    treatment: Treatment
    how: str
    below: bool = False

    def covers(self, path: str) -> bool:
        if path == self.path:
            return True
        return self.below and path.startswith((f"{self.path}.", f"{self.path}[]"))


RJ = "template.spec.replicatedJobs[]"
JOB = f"{RJ}.template.spec"

FIELDS: tuple[Field, ...] = (
    Field("mlPolicy.numNodes", "honoured", "the trainer's node count unless the TrainJob sets one"),
    Field(
        "mlPolicy.torch.envInjection",
        "honoured",
        "PET_* variables in the containers it targets",
        below=True,
    ),
    Field(
        "mlPolicy.mpi.mpiImplementation",
        "honoured",
        "OpenMPI, Intel or MPICH hostfile and variables",
    ),
    Field("mlPolicy.mpi.numProcPerNode", "honoured", "slots per node"),
    Field("mlPolicy.mpi.runLauncherAsNode", "honoured", "the launcher also runs as a node"),
    Field("mlPolicy.mpi.sshAuthMountPath", "honoured", "where the SSH key is mounted"),
    Field("mlPolicy.jax", "honoured", "JAX_* variables", below=True),
    Field("mlPolicy.xgboost", "honoured", "DMLC_* variables", below=True),
    Field(
        "mlPolicy.flux",
        "refused",
        "not implemented: RuntimeInvalid names mlPolicy.flux",
        below=True,
    ),
    Field(
        "podGroupPolicy.coscheduling",
        "honoured",
        "the scheduler-plugins' PodGroup where the worker serves its API; elsewhere the "
        "PodGroupPolicyIgnored condition",
        below=True,
    ),
    Field(
        "podGroupPolicy.volcano",
        "honoured",
        "Volcano's PodGroup (queue, priority, networkTopology) where the worker serves its API; "
        "elsewhere the PodGroupPolicyIgnored condition",
        below=True,
    ),
    Field("template.metadata.labels", "honoured", "on every Job and pod"),
    Field("template.metadata.annotations", "honoured", "on every Job"),
    Field(
        "template.metadata.name",
        "honoured",
        "unused, as by Trainer (objects are named after the TrainJob)",
    ),
    Field(
        "template.metadata.namespace",
        "honoured",
        "unused, as by Trainer (the TrainJob's namespace)",
    ),
    Field("template.metadata.finalizers", "honoured", "unused, as by Trainer", below=True),
    Field(
        "template.spec.replicatedJobs[].name", "honoured", "the role: Jobs, pods and their labels"
    ),
    Field("template.spec.replicatedJobs[].replicas", "honoured", "Jobs per role"),
    Field(
        "template.spec.replicatedJobs[].dependsOn",
        "honoured",
        "a role's Jobs wait for those it depends on (Ready or Complete)",
        below=True,
    ),
    Field(
        "template.spec.replicatedJobs[].groupName",
        "reported",
        "JobSet's group labels and indexes are not set (RuntimeFieldsIgnored unless `default`)",
    ),
    Field(
        f"{RJ}.template.metadata",
        "honoured",
        "labels and annotations on the role's Jobs",
        below=True,
    ),
    Field(
        f"{JOB}.template",
        "honoured",
        "the pod template, copied into each Job with the TrainJob's settings and patches",
        below=True,
    ),
    Field(f"{JOB}.parallelism", "honoured", "pods per Job (the trainer's from numNodes)"),
    Field(
        f"{JOB}.completions", "honoured", "set equal to parallelism, as JobSet runs Trainer's roles"
    ),
    Field(f"{JOB}.completionMode", "honoured", "Indexed (ranks come from the completion index)"),
    Field(f"{JOB}.suspend", "honoured", "set by the controller: Kueue's admission starts the Jobs"),
    Field(f"{JOB}.activeDeadlineSeconds", "honoured", "copied into the Job"),
    Field(f"{JOB}.backoffLimit", "honoured", "copied into the Job"),
    Field(f"{JOB}.backoffLimitPerIndex", "honoured", "copied into the Job"),
    Field(f"{JOB}.maxFailedIndexes", "honoured", "copied into the Job"),
    Field(f"{JOB}.podFailurePolicy", "honoured", "copied into the Job", below=True),
    Field(f"{JOB}.podReplacementPolicy", "honoured", "copied into the Job"),
    Field(f"{JOB}.successPolicy", "honoured", "copied into the Job", below=True),
    Field(f"{JOB}.ttlSecondsAfterFinished", "honoured", "copied into the Job"),
    Field(f"{JOB}.managedBy", "honoured", "copied into the Job"),
    Field(f"{JOB}.manualSelector", "honoured", "copied into the Job"),
    Field(f"{JOB}.selector", "honoured", "copied into the Job", below=True),
    Field(
        "template.spec.successPolicy",
        "honoured",
        "which roles must complete (All or Any of the targets)",
        below=True,
    ),
    Field(
        "template.spec.volumeClaimPolicies",
        "honoured",
        "PVCs made from the templates, kept or deleted with the TrainJob",
        below=True,
    ),
    Field(
        "template.spec.network.publishNotReadyAddresses",
        "reported",
        "the headless Service always publishes not-ready pods (RuntimeFieldsIgnored when false)",
    ),
    Field(
        "template.spec.network.enableDNSHostnames",
        "reported",
        "pods always get hostnames (RuntimeFieldsIgnored when false)",
    ),
    Field(
        "template.spec.network.subdomain",
        "reported",
        "the headless Service is named after the TrainJob (RuntimeFieldsIgnored when another name)",
    ),
    Field(
        "template.spec.suspend",
        "honoured",
        "unused, as by Trainer (the TrainJob's suspend decides)",
    ),
    Field(
        "template.spec.managedBy",
        "reported",
        "the Jobs are this controller's (RuntimeFieldsIgnored)",
    ),
    Field(
        "template.spec.coordinator",
        "reported",
        "no coordinator label or annotation on the pods (RuntimeFieldsIgnored)",
        below=True,
    ),
    Field(
        "template.spec.failurePolicy",
        "honoured",
        "restarts as JobSet v0.12 (trainjob/runtime/failure.py)",
        below=True,
    ),
    Field(
        "template.spec.failurePolicy.restartStrategy",
        "honoured",
        "Recreate, BlockingRecreate; InPlaceRestart recreates (RuntimeFieldsIgnored)",
    ),
    Field(
        "template.spec.failurePolicy.rules[].action",
        "honoured",
        "FailJobSet, RestartJobSet, RestartJobSetAndIgnoreMaxRestarts; a RestartJob rule (JobSet "
        "v0.12's alpha gate, off by default) is skipped (RuntimeFieldsIgnored)",
    ),
    Field(
        "template.spec.failurePolicy.rules[].onJobFailureMessagePatterns",
        "honoured",
        "RE2 patterns, run by RE2; one it refuses never matches (RuntimeFieldsIgnored)",
        below=True,
    ),
    Field(
        "template.spec.startupPolicy.startupPolicyOrder",
        "reported",
        "roles start together; dependsOn orders them (RuntimeFieldsIgnored when InOrder)",
    ),
    Field(
        "template.spec.ttlSecondsAfterFinished",
        "reported",
        "the Jobs stay until the TrainJob goes (RuntimeFieldsIgnored)",
    ),
)


def field_of(path: str) -> Field | None:
    """The entry that says what happens to `path` (the most specific), or None."""
    found = [f for f in FIELDS if f.covers(path)]
    return max(found, key=lambda f: len(f.path)) if found else None


def ignored(template_spec: Dict | None, trainjob: str) -> list[str]:
    """The reported fields a runtime's JobSet spec sets to what the framework does not do,
    by path (RuntimeFieldsIgnored's message): the TrainJob runs without them."""
    spec = template_spec or {}
    found = []
    for key in ("managedBy", "coordinator", "ttlSecondsAfterFinished"):
        if spec.get(key) is not None:
            found.append(f"template.spec.{key}")
    found += _failure_policy_ignored(spec.get("failurePolicy"))
    network = spec.get("network") or {}
    for key in ("enableDNSHostnames", "publishNotReadyAddresses"):
        if network.get(key) is False:
            found.append(f"template.spec.network.{key}")
    if network.get("subdomain") not in (None, "", trainjob):
        found.append("template.spec.network.subdomain")
    if (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
        found.append("template.spec.startupPolicy.startupPolicyOrder")
    groups = sorted(
        {
            str(rj.get("groupName"))
            for rj in spec.get("replicatedJobs") or []
            if isinstance(rj, dict) and rj.get("groupName") not in (None, "", "default")
        }
    )
    if groups:
        found.append(f"template.spec.replicatedJobs[].groupName ({', '.join(groups)})")
    return found


def _failure_policy_ignored(policy: object) -> list[str]:
    """What of a failurePolicy is not done here (trainjob/runtime/failure.py)."""
    if not isinstance(policy, dict):
        return []
    found = []
    if policy.get("restartStrategy") == "InPlaceRestart":
        found.append("template.spec.failurePolicy.restartStrategy (InPlaceRestart)")
    rules = policy.get("rules") or []
    for i, (rule, run) in enumerate(zip(rules, failure.patterns(rules), strict=True)):
        if not isinstance(rule, dict):
            continue
        where = f"template.spec.failurePolicy.rules[{i}]"
        if rule.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            found.append(f"{where}.action ({rule['action']})")
            continue
        for j, pattern in enumerate(run):
            problem = failure.pattern_problem(pattern)
            if pattern is None:  # and every one after it: said once
                found.append(f"{where}.onJobFailureMessagePatterns[{j}:] ({problem})")
                break
            if problem is not None:
                found.append(f"{where}.onJobFailureMessagePatterns[{j}] ({problem})")
    return found
