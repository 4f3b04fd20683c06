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
    progress_reports: bool = Field(
        default=True,
        description="serve Kubeflow Trainer's TrainJobStatus endpoint (its feature gate "
        "TrainJobStatus), on the progress port (else the webhook port): the trainer pods get "
        "KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT and _TOKEN (a token for their TrainJob only, "
        "and a ConfigMap <trainjob>-tls-config with the CA), and what they POST becomes "
        "status.trainerStatus",
    )
    progress_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="serve the progress endpoint on https://ADDRESS:PORT, a listener of its own "
        "with the webhooks' certificate, so that the port the pods are told to call serves no "
        "admission (unset: on the webhook port)",
    )
    progress_url: str | None = Field(
        default=None,
        description="the base URL the pods reach the endpoint at (default: "
        "https://<webhookService>.<namespace>.svc:<progressPort>, or :443 without one)",
    )
    progress_interval_seconds: float = Field(
        default=5.0,
        ge=0,
        description="at most one status write per TrainJob this often (per replica); a report "
        "that comes sooner is written at its turn, replaced by any newer one",
    )
