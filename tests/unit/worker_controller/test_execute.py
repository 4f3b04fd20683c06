"""How the worker controller carries out a plan's writes to live Jobs (worker_controller/
execute.py), against the in-memory API server: a write the API server refuses for a reason
the next pass settles is skipped, the rest of the plan goes on."""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives import serialization

from kubebase.events import Event
from kubebase.kinds import Kind
from kubecontrol.client import ApiException
from tests.support.builders import edit, make_trainjob
from tests.support.memory_api import MemoryApi
from tests.support.whole_pass import MemoryCluster
from trainjob_api import constants as c
from trainjob_api.views import TrainJobView
from worker_controller.builders import trainjob_labels
from worker_controller.decide import Plan
from worker_controller.execute import execute

Dict = dict[str, Any]


def _job(name: str) -> Dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "labels": {"a": "b"}},
        "spec": {
            "suspend": True,
            "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}},
        },
    }


def _world() -> tuple[MemoryApi, MemoryCluster, TrainJobView, Dict]:
    """A TrainJob, its suspended Job `tj-node-0`, and another, `tj-node-1`, whose resume
    follows in each plan (`_next`): the writes after a skipped one still go."""
    api = MemoryApi("worker", [make_trainjob(), _job("tj-node-0"), _job("tj-node-1")])
    cluster = MemoryCluster(api, c.WORKER_FIELD_MANAGER)
    trainjob = TrainJobView(cluster.get(c.TRAINJOB, "tj", "ns"))
    return api, cluster, trainjob, cluster.get(c.JOB, "tj-node-0", "ns")


def _next(cluster: MemoryCluster) -> Dict:
    return _resume(cluster.get(c.JOB, "tj-node-1", "ns"))


def _next_resumed(cluster: MemoryCluster) -> bool:
    return cluster.get(c.JOB, "tj-node-1", "ns")["spec"]["suspend"] is False


def _resume(job: Dict, version: str | None = None) -> Dict:
    """A resume as builders.job_patch writes one: the Job's UID, and the version it was read at."""
    meta = {"name": job["metadata"]["name"], "namespace": "ns", "uid": job["metadata"]["uid"]}
    if version is not None:
        meta["resourceVersion"] = version
    return {"metadata": meta, "spec": {"suspend": False}}


NOTE = Event("Normal", "Noted", "the rest of the plan")


def _events(api: MemoryApi) -> list[str]:
    return [e["reason"] for e in api.objects(c.EVENT, "ns")]


def test_a_resume_of_a_job_written_since_it_was_read_is_skipped_and_the_rest_goes() -> None:
    api, cluster, trainjob, job = _world()
    read_at = job["metadata"]["resourceVersion"]
    # written since (a tenant's placement on the suspended Job): the API server answers 409
    placed = {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}}
    cluster.patch(c.JOB, "tj-node-0", "ns", placed)
    plan = Plan(patch=[_resume(job, read_at), _next(cluster)], events=[NOTE])
    assert execute(cluster, trainjob, plan) is None
    assert _next_resumed(cluster)
    after = cluster.get(c.JOB, "tj-node-0", "ns")
    assert after["spec"]["suspend"] is True  # not resumed on what it was not planned from
    assert _events(api) == ["Noted"]
    plan = Plan(patch=[_resume(job, after["metadata"]["resourceVersion"])])
    execute(cluster, trainjob, plan)  # read again: resumed
    assert cluster.get(c.JOB, "tj-node-0", "ns")["spec"]["suspend"] is False


def test_a_patch_of_a_job_gone_since_it_was_read_is_skipped_and_the_rest_goes() -> None:
    api, cluster, trainjob, job = _world()
    cluster.delete(c.JOB, "tj-node-0", "ns")
    plan = Plan(patch=[_resume(job), _next(cluster)], events=[NOTE])
    assert execute(cluster, trainjob, plan) is None
    assert _next_resumed(cluster)
    assert _events(api) == ["Noted"]


def test_a_patch_naming_another_jobs_uid_blocks_the_trainjob_and_the_rest_goes() -> None:
    api, cluster, trainjob, job = _world()
    cluster.delete(c.JOB, "tj-node-0", "ns")
    other = {**job, "metadata": {"name": "tj-node-0", "namespace": "ns"}}
    other.pop("status", None)
    cluster.create(c.JOB, other)  # another Job made under the name since
    plan = Plan(patch=[_resume(job), _next(cluster)], events=[NOTE])
    blocked = execute(cluster, trainjob, plan)
    assert _next_resumed(cluster)
    assert blocked is not None and blocked.reason == c.REASON_REFUSED_BY_API
    assert blocked.message.startswith("the API refuses Job tj-node-0: "), blocked.message
    assert cluster.get(c.JOB, "tj-node-0", "ns")["spec"]["suspend"] is True
    assert _events(api) == ["Noted"]


def test_a_jobs_delete_names_its_namespace_and_uid() -> None:
    _api, cluster, trainjob, job = _world()
    plan = Plan(delete=[("tj-node-0", job["metadata"]["uid"])])
    assert execute(cluster, trainjob, plan) is None
    assert cluster.get_or_none(c.JOB, "tj-node-0", "ns") is None
    assert cluster.get_or_none(c.JOB, "tj-node-1", "ns") is not None


def _ssh_keys(secret: Dict) -> tuple[str, str]:
    """A Secret's key pair as written (the API server would keep it base64 under data)."""
    if "stringData" in secret:
        text = secret["stringData"]
    else:
        text = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    return text["ssh-privatekey"], text["ssh-publickey"]


def test_the_mpi_ssh_secret_is_made_for_its_trainjob_once_and_never_made_again() -> None:
    """MPI's key pair: a Secret of the TrainJob's (its labels name the TrainJob, it owns it),
    whose public key is the private one's; made once, and kept as it is by later passes, a
    restarted replica's included (a new pair would lock out pods holding the old one)."""
    _api, cluster, trainjob, _read = _world()
    made: set[tuple[str, str]] = set()
    plan = Plan(ssh_secret="tj-mpi-ssh-auth", create=[_job("tj-node-2")])
    assert execute(cluster, trainjob, plan, made) is None
    assert ("Secret", "tj-mpi-ssh-auth") in made  # no key pair made again, next pass
    secret = cluster.get(c.SECRET, "tj-mpi-ssh-auth", "ns")
    job = cluster.get(c.JOB, "tj-node-2", "ns")  # made after it: its pods mount it
    assert int(secret["metadata"]["resourceVersion"]) < int(job["metadata"]["resourceVersion"])
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["metadata"]["labels"] == trainjob_labels("tj")
    [owner] = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", trainjob.uid, True)
    private, public = _ssh_keys(secret)
    key = serialization.load_ssh_private_key(private.encode(), password=None)
    derived = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert derived.decode() == public.strip()
    for again in (made, set()):  # the next pass; a replica started anew
        assert execute(cluster, trainjob, Plan(ssh_secret="tj-mpi-ssh-auth"), again) is None
        assert _ssh_keys(cluster.get(c.SECRET, "tj-mpi-ssh-auth", "ns")) == (private, public)


class ClaimGoingAway(MemoryCluster):
    """A claim of the TrainJob's name being deleted (its protection finalizer held it): the
    first create meets it (409), and by the read that follows it is gone."""

    def __init__(self, api: MemoryApi, field_manager: str) -> None:
        super().__init__(api, field_manager)
        self.met = 0

    def create(self, kind: Kind, obj: Dict) -> Dict:
        if kind == c.PERSISTENT_VOLUME_CLAIM and self.met == 0:
            self.met += 1
            raise ApiException(409, "AlreadyExists")
        return super().create(kind, obj)


def _claim(name: str) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def test_a_claim_gone_between_the_creates_409_and_the_read_is_made_then_its_jobs() -> None:
    """Before, a create's 409 whose object was gone by the read counted the claim as made:
    the pass went on to make the Jobs, a later pass never made the claim (it is not watched,
    and what is made is not made again), and the pods mounted nothing."""
    api = MemoryApi("worker", [make_trainjob()])
    cluster = ClaimGoingAway(api, c.WORKER_FIELD_MANAGER)
    trainjob = TrainJobView(cluster.get(c.TRAINJOB, "tj", "ns"))
    made: set[tuple[str, str]] = set()
    plan = Plan(create=[_claim("data-tj"), _job("tj-node-0")])
    assert execute(cluster, trainjob, plan, made) is None
    assert cluster.met == 1
    assert cluster.get_or_none(c.PERSISTENT_VOLUME_CLAIM, "data-tj", "ns") is not None
    assert ("PersistentVolumeClaim", "data-tj") in made
    assert cluster.get_or_none(c.JOB, "tj-node-0", "ns") is not None


def test_a_claim_of_ours_being_deleted_is_not_taken_for_made() -> None:
    """A kept claim made for this TrainJob, deleted and held by its protection finalizer: the
    pass waits (the next makes it once it is gone), and makes no Job that would mount it."""
    going = edit(_claim("data-tj")).deleting().finalizers("kubernetes.io/pvc-protection").obj()
    edit(going).annotation(c.CLAIM_MADE_FOR_ANNOTATION, "ns/tj")
    api = MemoryApi("worker", [make_trainjob(), going])
    cluster = MemoryCluster(api, c.WORKER_FIELD_MANAGER)
    trainjob = TrainJobView(cluster.get(c.TRAINJOB, "tj", "ns"))
    made: set[tuple[str, str]] = set()
    blocked = execute(cluster, trainjob, Plan(create=[_claim("data-tj"), _job("tj-node-0")]), made)
    assert blocked is not None and "is being deleted" in blocked.message
    assert made == set()
    assert cluster.get_or_none(c.JOB, "tj-node-0", "ns") is None
