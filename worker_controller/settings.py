"""The worker controller's configuration: the shared controller settings, its own defaults."""

from __future__ import annotations

from pydantic import Field

from kubecontrol.settings import ControllerSettings


class WorkerSettings(ControllerSettings):
    cluster_name: str = Field(default="worker", description="name used in every log line")
    leader_election_id: str = Field(
        default="trainjob-worker-controller", min_length=1, description="name of the Lease"
    )
    pod_summary: bool = Field(
        default=True,
        description="watch the pods of our TrainJobs (server-side label selector) and write "
        "their count per phase and PodSet to status.podsStatus (an extension of Trainer's "
        "status), and what keeps them from running to the PodsStuck condition (with the Job "
        "controller's FailedCreate Events); needs list/watch on pods and Events",
    )
    manage_jobs_without_queue_name: bool = Field(
        default=False,
        description="Kueue's manageJobsWithoutQueueName (set it as Kueue's configuration on "
        "this cluster does): a TrainJob without a kueue.x-k8s.io/queue-name label (outside "
        "kube-system and kueue-system) is held suspended, with a NoQueueName Warning, instead "
        "of running outside Kueue's quota",
    )
    trainer_check_seconds: float = Field(
        default=30.0,
        ge=1,
        description="how often to look for Kubeflow Trainer's controller on this cluster (its "
        "webhook configurations): while it is there, this controller reconciles nothing and "
        "/readyz says why",
    )
    status_coalesce_seconds: float = Field(
        default=2.0,
        ge=0,
        description="a TrainJob status change nothing acts on (pod counts, a Job's active "
        "count) waits this long after our last status write of that TrainJob and goes with "
        "what follows; conditions and ready/succeeded/failed counts go at once (0: off)",
    )
