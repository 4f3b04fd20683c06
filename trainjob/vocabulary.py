"""The TrainJob's status vocabulary in one table: every condition either controller writes on a
TrainJob, with each reason it gives, who writes it, whether a Warning Event says it too, and
whether the condition is Kubeflow Trainer's or ours. The controllers name conditions and
reasons by the constants of plugin/trainjob_api/constants.py; this table lists them all (a test
fails on one left out) and docs/users/user-guide.md's reference table is written from it (`./run
manifests`). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainjob.runtime import failure
from trainjob_api import constants as c

Writer = Literal["worker controller", "dispatcher", "both"]


@dataclass(frozen=True)
class Reason:
    condition: str  # the condition's type
    status: Literal["True", "False"]
    reason: str
    writer: Writer
    warning: bool  # a Warning Event of the same reason goes with it
    meaning: str


@dataclass(frozen=True)
class Condition:
    type: str
    origin: Literal["Trainer", "ours"]  # Trainer v2.3's TrainJob condition, or one we add
    meaning: str


CONDITIONS = (
    Condition(c.COND_SUSPENDED, "Trainer", "whether the TrainJob is held (by Kueue, or by you)"),
    Condition(c.COND_COMPLETE, "Trainer", "every PodSet the success policy names completed"),
    Condition(c.COND_FAILED, "Trainer", "it will not run (again); the reason says why"),
    Condition(c.COND_OBJECTS_BLOCKED, "ours", "an object it needs could not be made; it waits"),
    Condition(c.COND_PODS_STUCK, "ours", "some pod cannot start or keeps crashing"),
    Condition(c.COND_SERVICE_CONFLICT, "ours", "its headless Service is not the one it needs"),
    Condition(
        c.COND_POD_GROUP_IGNORED, "ours", "the runtime's gang-scheduling policy is not applied"
    ),
    Condition(
        c.COND_RUNTIME_FIELDS_IGNORED,
        "ours",
        "fields of the runtime this worker does not do (docs/operators/differences.md)",
    ),
    Condition(
        c.COND_CLUSTERS_SELECTED, "ours", "on the manager: its choice of workers leaves none"
    ),
    Condition(c.COND_RUNTIME_DRIFT, "ours", "on the manager: some chosen workers' runtime differs"),
    Condition(c.COND_DATA_UNAVAILABLE, "ours", "on the manager: no chosen worker holds its data"),
    Condition(
        c.COND_DEPENDENCIES_MISSING,
        "ours",
        "on the manager: a Secret or ConfigMap its pods need cannot go with it",
    ),
)

WORKER: Writer = "worker controller"
DISPATCHER: Writer = "dispatcher"
BOTH: Writer = "both"
REASONS = (
    Reason(c.COND_SUSPENDED, "True", c.REASON_SUSPENDED, WORKER, False, "held"),
    Reason(c.COND_SUSPENDED, "False", c.REASON_RESUMED, WORKER, False, "running again"),
    Reason(c.COND_COMPLETE, "True", c.REASON_COMPLETED, WORKER, False, "done (JobSet's reason)"),
    Reason(
        c.COND_FAILED,
        "True",
        failure.REASON_FAILED_JOBS,
        WORKER,
        True,
        "a Job failed and the runtime has no failurePolicy (JobSet's reason): the first failed "
        "Job, and the first failed pod's exit code and words",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        failure.REASON_FAIL_ACTION,
        WORKER,
        True,
        "a Job failed and the runtime's failurePolicy rule says FailJobSet (JobSet's reason)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        failure.REASON_MAX_RESTARTS,
        WORKER,
        True,
        "a Job failed after failurePolicy.maxRestarts restarts (JobSet's reason)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_RESTARTS_LOST,
        WORKER,
        True,
        "its Jobs are of a later restart than status.restarts says (the CRD is not the product's)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_DEADLINE_EXCEEDED,
        WORKER,
        True,
        "it ran past spec.activeDeadlineSeconds",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_RUNTIME_NOT_FOUND,
        BOTH,
        True,
        "the runtime it names does not exist (goes once it does)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_RUNTIME_INVALID,
        BOTH,
        True,
        "the runtime, or the TrainJob over it, cannot be run: the field is named (goes once fixed)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_NO_QUEUE,
        DISPATCHER,
        True,
        "MultiKueue's, and it names no LocalQueue (goes once the label is added; a worker whose "
        "Kueue manages jobs without a queue holds such a TrainJob suspended and says so in an "
        "Event of this reason)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_NOT_DISPATCHABLE,
        DISPATCHER,
        True,
        "Kueue admitted it through a queue without our admission check: nothing would run it",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_NOT_DISPATCHED,
        DISPATCHER,
        True,
        "not MultiKueue's (spec.managedBy), on a manager that runs no TrainJobs",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_NO_CLUSTER_FITS,
        DISPATCHER,
        True,
        "no worker's ClusterQueue could ever hold it (given up)",
    ),
    Reason(
        c.COND_FAILED,
        "True",
        c.REASON_NOT_ADMITTED_IN_TIME,
        DISPATCHER,
        True,
        "no worker admitted it within giveUpAfterSeconds (given up)",
    ),
    Reason(
        c.COND_OBJECTS_BLOCKED,
        "True",
        c.REASON_NAME_TAKEN,
        WORKER,
        True,
        "an object of the name it needs exists and is not its own",
    ),
    Reason(
        c.COND_OBJECTS_BLOCKED,
        "True",
        c.REASON_REFUSED_BY_API,
        WORKER,
        True,
        "the API refuses an object it needs, in the API's words",
    ),
    Reason(c.COND_OBJECTS_BLOCKED, "False", c.REASON_OBJECTS_CREATED, WORKER, False, "all made"),
    Reason(
        c.COND_PODS_STUCK,
        "True",
        c.REASON_POD_CREATE_FAILED,
        WORKER,
        True,
        "the API refuses its pods (a quota, a policy), in the Job controller's words",
    ),
    Reason(
        c.COND_PODS_STUCK,
        "True",
        c.REASON_KUBELET,
        WORKER,
        True,
        "the kubelet's reason for the first stuck pod (ImagePullBackOff, CrashLoopBackOff, ...)",
    ),
    Reason(c.COND_PODS_STUCK, "False", c.REASON_PODS_STARTED, WORKER, False, "no pod is stuck"),
    Reason(
        c.COND_SERVICE_CONFLICT,
        "True",
        c.REASON_SERVICE_CONFLICT,
        WORKER,
        True,
        "more than one Service names it as their controller",
    ),
    Reason(
        c.COND_SERVICE_CONFLICT,
        "True",
        c.REASON_SERVICE_NAME_TAKEN,
        WORKER,
        True,
        "a Service of its name is not its own",
    ),
    Reason(
        c.COND_SERVICE_CONFLICT,
        "False",
        c.REASON_SERVICE_OK,
        WORKER,
        False,
        "exactly one headless Service",
    ),
    Reason(
        c.COND_POD_GROUP_IGNORED,
        "True",
        c.COND_POD_GROUP_IGNORED,
        WORKER,
        True,
        "podGroupPolicy asks for a PodGroup whose API this worker does not serve",
    ),
    Reason(
        c.COND_RUNTIME_FIELDS_IGNORED,
        "True",
        c.COND_RUNTIME_FIELDS_IGNORED,
        WORKER,
        True,
        "the runtime sets fields this worker does not do; the message names them",
    ),
    Reason(
        c.COND_CLUSTERS_SELECTED,
        "False",
        c.REASON_NO_CLUSTER_SELECTED,
        DISPATCHER,
        True,
        "its cluster names or selector match no active cluster of its queue",
    ),
    Reason(
        c.COND_RUNTIME_DRIFT,
        "True",
        c.COND_RUNTIME_DRIFT,
        DISPATCHER,
        True,
        "the workers named have its runtime missing or different: they get no copy",
    ),
    Reason(
        c.COND_DATA_UNAVAILABLE,
        "True",
        c.REASON_NO_CLUSTER_HAS_DATA,
        DISPATCHER,
        True,
        "no chosen worker has the claims its pods mount (or has them bound, with "
        "dataPlacement Bound) or the datasets it names: it waits until one does",
    ),
    Reason(
        c.COND_DEPENDENCIES_MISSING,
        "True",
        c.REASON_DEPENDENCY_MISSING,
        DISPATCHER,
        True,
        "a Secret or ConfigMap its pods need (named, with the field) is not in its namespace "
        "on the manager: not dispatched until it is",
    ),
    Reason(
        c.COND_DEPENDENCIES_MISSING,
        "True",
        c.REASON_DEPENDENCY_REFUSED,
        DISPATCHER,
        True,
        "what its pods reference may not leave the manager (a service account token, the "
        "dispatcher's own namespace, more than 32 objects): not dispatched",
    ),
    Reason(
        c.COND_DEPENDENCIES_MISSING,
        "True",
        c.REASON_REMOTE_DEPENDENCY_REFUSED,
        DISPATCHER,
        True,
        "the workers named refused the copy of a Secret, ConfigMap or TrainingRuntime it "
        "needs (most often the manager's identity there lacks the grant: "
        "worker.multikueueIdentity.dependencies): they get no copy while they refuse",
    ),
)


def reasons_of(condition: str) -> list[Reason]:
    return [r for r in REASONS if r.condition == condition]


def table() -> str:
    """The Markdown reference table of the vocabulary (docs/users/user-guide.md)."""
    rows = [
        "| condition | status | reason | written by | Warning Event | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for condition in CONDITIONS:
        origin = "Trainer's" if condition.origin == "Trainer" else "ours"
        rows.append(f"| `{condition.type}` ({origin}) | | | | | {condition.meaning} |")
        for r in reasons_of(condition.type):
            warning = "yes" if r.warning else ""
            reason = r.reason if " " in r.reason else f"`{r.reason}`"
            rows.append(f"| | `{r.status}` | {reason} | {r.writer} | {warning} | {r.meaning} |")
    return "\n".join(rows) + "\n"
