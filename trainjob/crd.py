"""What the product needs of the TrainJob CRD installed on a manager, and how Kubeflow
Trainer's controller shows itself on a cluster (pure).

Our CRD (crds/) extends Trainer's TrainJob status with `clusterName`: the worker whose status
the manager TrainJob carries. The dispatcher reads it to judge PodsReady and to never send a
finished job again. Kubeflow Trainer's own CRD has no such field, so the API server prunes it
from every status write once that CRD is re-applied over ours."""

from __future__ import annotations

from kubebase.objects import Dict
from kubecontrol.schema_bounds import version_schema
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, mapping, objects

TRAINJOB_CRD = f"{c.TRAINJOB_PLURAL}.{c.TRAINER_GROUP}"
NEEDED_STATUS_FIELDS = ("clusterName",)
# What a worker controller writes besides Trainer's status: a restart's count (JobSet's).
WORKER_STATUS_FIELDS = ("restarts", "restartsCountTowardsMax")


def crd_problem(crd: ObjectView | None) -> str | None:
    """Why the TrainJob CRD `crd` cannot carry what the dispatcher writes, or None."""
    if crd is None:
        return f"CustomResourceDefinition {TRAINJOB_CRD} is not installed"
    missing = missing_status_fields(crd)
    if missing is None:
        return f"CustomResourceDefinition {TRAINJOB_CRD} does not serve {c.TRAINER_VERSION}"
    if not missing:
        return None
    fields = ", ".join(f"status.{f}" for f in missing)
    return (
        f"CustomResourceDefinition {TRAINJOB_CRD} has no {fields} (Kubeflow Trainer's own CRD, "
        "or an old one, was applied over this product's): the API server would drop which worker "
        "runs each TrainJob, so none is accepted until the product's CRD is applied again "
        "(kubectl apply -k deploy/manager, or crds/)"
    )


def missing_status_fields(
    crd: ObjectView, needed: tuple[str, ...] = NEEDED_STATUS_FIELDS
) -> list[str] | None:
    """The status fields of ours (`needed`) the CRD's served version lacks (None: it does not
    serve ours at all)."""
    if not any(v.get("name") == c.TRAINER_VERSION for v in objects(crd.spec.get("versions"))):
        return None
    schema = version_schema(crd.raw, c.TRAINER_VERSION) or {}  # none: no status field either
    status = mapping(mapping(schema.get("properties")).get("status"))
    if status.get("x-kubernetes-preserve-unknown-fields"):
        return []
    return [f for f in needed if f not in mapping(status.get("properties"))]


# Kubeflow Trainer's webhooks (its v2 manifests name them defaulter.trainjob.trainer.kubeflow.org,
# validator.trainjob.trainer.kubeflow.org, validator.trainingruntime...): they are served by
# its controller, which runs every TrainJob it sees, as ours does.
TRAINER_WEBHOOK_SUFFIX = f".{c.TRAINER_GROUP}"


def trainer_controller_problem(configurations: list[Dict]) -> str | None:
    """Why Kubeflow Trainer's controller looks installed, from the cluster's webhook
    configurations (each with its `kind`), or None."""
    found = [
        f"{cfg.get('kind', 'WebhookConfiguration')} {cfg['metadata']['name']} "
        f"(webhook {hook['name']})"
        for cfg in configurations
        for hook in cfg.get("webhooks") or []
        if str(hook.get("name", "")).endswith(TRAINER_WEBHOOK_SUFFIX)
    ]
    if not found:
        return None
    return (
        "Kubeflow Trainer's controller is installed on this cluster ("
        + "; ".join(found)
        + "): it and this worker controller would both run every TrainJob, so this one "
        "reconciles nothing until Trainer's controller and its webhook configurations are "
        "removed (the TrainJobs and runtimes stay)"
    )
