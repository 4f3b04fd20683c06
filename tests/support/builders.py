"""Fixture factories for TrainJobs and runtimes (plain manifests, as a user would write them),
which the tests and the benchmarks share (the one module of tests/ the benchmarks may import)."""

from __future__ import annotations

import copy
from typing import Any

Dict = dict[str, Any]


def _merge(base: Dict, overrides: Dict) -> Dict:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def make_trainjob(name: str = "tj", namespace: str = "ns", **spec: Any) -> Dict:
    """A TrainJob on `torch-distributed`; keyword arguments override spec fields."""
    body: Dict = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}},
    }
    body["spec"] = _merge(body["spec"], spec)
    return body


# The controller ownerReference to make_trainjob()'s TrainJob.
OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "tj",
    "uid": "uid-tj",
    "controller": True,
    "blockOwnerDeletion": True,
}


def container(name: str = "node", image: str = "trainer:latest", **extra: Any) -> Dict:
    return {"name": name, "image": image, **extra}


def replicated_job(name: str, step: str | None, containers: list[Dict], **extra: Any) -> Dict:
    labels = {"trainer.kubeflow.org/trainjob-ancestor-step": step} if step else {}
    rj: Dict = {
        "name": name,
        "template": {
            "metadata": {"labels": labels},
            "spec": {"template": {"spec": {"containers": containers}}},
        },
    }
    rj.update(extra)
    return rj


def make_runtime(
    name: str = "torch-distributed",
    *,
    kind: str = "ClusterTrainingRuntime",
    ml_policy: Dict | None = None,
    replicated_jobs: list[Dict] | None = None,
    namespace: str | None = None,
    **spec: Any,
) -> Dict:
    meta: Dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": {
            "mlPolicy": ml_policy if ml_policy is not None else {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": replicated_jobs
                    or [replicated_job("node", "trainer", [container()])]
                }
            },
            **spec,
        },
    }


def initializer_runtime(**spec: Any) -> Dict:
    """Trainer's usual shape: dataset and model initializers, then the trainer nodes."""
    return make_runtime(
        "torch-with-init",
        replicated_jobs=[
            replicated_job(
                "dataset-initializer",
                "dataset-initializer",
                [container("dataset-initializer", "dataset-init:1")],
            ),
            replicated_job(
                "model-initializer",
                "model-initializer",
                [container("model-initializer", "model-init:1")],
                dependsOn=[{"name": "dataset-initializer", "status": "Complete"}],
            ),
            replicated_job(
                "node",
                "trainer",
                [container()],
                dependsOn=[{"name": "model-initializer", "status": "Complete"}],
            ),
        ],
        **spec,
    )


def mpi_runtime(**mpi: Any) -> Dict:
    return make_runtime(
        "mpi-runtime",
        ml_policy={"numNodes": 2, "mpi": {"numProcPerNode": 4, **mpi}},
        replicated_jobs=[
            replicated_job("launcher", None, [container(image="mpi:1")]),
            replicated_job("node", "trainer", [container(image="mpi:1")]),
        ],
    )


def runtime_patch(manager: str, replicated_job: str, pod_template: Dict) -> Dict:
    """A runtimePatches entry of `manager` setting `pod_template` (metadata and/or spec) on
    the pods of one replicatedJob."""
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": replicated_job, "template": {"spec": {"template": pod_template}}}
                    ]
                }
            }
        },
    }


# ---- chained builders (as Kueue's test wrappers): start from a valid object, say what differs --


class TrainJobBuilder:
    """A TrainJob as `make_trainjob` makes it, changed a step at a time:
    `TrainJobBuilder("tj").queue("q").multikueue().nodes(2).obj()`."""

    def __init__(self, name: str = "tj", namespace: str = "ns") -> None:
        self._body = make_trainjob(name, namespace)

    def queue(self, name: str) -> TrainJobBuilder:
        self._body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = name
        return self

    def multikueue(self) -> TrainJobBuilder:
        self._body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
        return self

    def suspended(self, suspend: bool = True) -> TrainJobBuilder:
        self._body["spec"]["suspend"] = suspend
        return self

    def nodes(self, count: int) -> TrainJobBuilder:
        self._body["spec"].setdefault("trainer", {})["numNodes"] = count
        return self

    def resources(self, **requests: str) -> TrainJobBuilder:
        """What each node asks for (spec.trainer.resourcesPerNode.requests): `cpu="2"`."""
        trainer = self._body["spec"].setdefault("trainer", {})
        trainer["resourcesPerNode"] = {"requests": requests}
        return self

    def runtime(self, name: str, kind: str = "ClusterTrainingRuntime") -> TrainJobBuilder:
        self._body["spec"]["runtimeRef"] = {"name": name, "kind": kind}
        return self

    def status(self, **status: Any) -> TrainJobBuilder:
        self._body["status"] = status
        return self

    def obj(self) -> Dict:
        return copy.deepcopy(self._body)


class WorkloadBuilder:
    """A manager Workload of `make_trainjob()`'s TrainJob, changed a step at a time:
    `WorkloadBuilder().conditions("QuotaReserved").cluster("w1").check("Ready").obj()`.
    Conditions are True since 11:00:00 on the tests' day; our check "mk" starts Pending."""

    def __init__(self, name: str = "trainjob-tj-abcde", namespace: str = "ns") -> None:
        self._body: Dict = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": "1",
                "labels": {"kueue.x-k8s.io/job-uid": "uid-tj"},
            },
            "spec": {"queueName": "q", "podSets": [{"name": "node", "count": 2}]},
            "status": {
                "conditions": [],
                "admissionChecks": [{"name": "mk", "state": "Pending", "message": ""}],
            },
        }

    def conditions(self, *types: str, since: str = "2026-11-22T11:00:00Z") -> WorkloadBuilder:
        self._body["status"]["conditions"] += [
            {"type": t, "status": "True", "lastTransitionTime": since} for t in types
        ]
        return self

    def check(self, state: str, name: str = "mk") -> WorkloadBuilder:
        self._body["status"]["admissionChecks"] = [{"name": name, "state": state, "message": ""}]
        return self

    def cluster(self, name: str) -> WorkloadBuilder:
        self._body["status"]["clusterName"] = name
        return self

    def nominated(self, *names: str) -> WorkloadBuilder:
        self._body["status"]["nominatedClusterNames"] = list(names)
        return self

    def asks(self, cpu: str, count: int = 1) -> WorkloadBuilder:
        """One PodSet "node" of `count` pods, each of one container asking for `cpu`."""
        container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        template = {"spec": {"containers": [container]}}
        self._body["spec"]["podSets"] = [{"name": "node", "count": count, "template": template}]
        return self

    def priority(self, value: int | None) -> WorkloadBuilder:
        """spec.priority (None: none set)."""
        if value is None:
            self._body["spec"].pop("priority", None)
        else:
            self._body["spec"]["priority"] = value
        return self

    def created(self, when: str) -> WorkloadBuilder:
        self._body["metadata"]["creationTimestamp"] = when
        return self

    def obj(self) -> Dict:
        return copy.deepcopy(self._body)


def torch_runtime(
    name: str = "torch",
    *,
    run: str = "3s",
    num_nodes: int = 1,
    exit_code: int | None = None,
    extra_rjs: list[Dict] | None = None,
    backoff_limit: int = 0,
) -> Dict:
    """A namespaced torch runtime whose pods run `run` on kwok (and fail if asked)."""
    annotations = {"bed.trainjob.dev/run-duration": run}
    if exit_code is not None:
        annotations["bed.trainjob.dev/exit-code"] = str(exit_code)
    node = replicated_job(
        "node",
        "trainer",
        [
            {
                "name": "node",
                "image": "pytorch/pytorch:2.7.1",
                "resources": {"requests": {"cpu": "100m"}},
            }
        ],
    )
    node["template"]["spec"]["backoffLimit"] = backoff_limit
    node["template"]["spec"]["template"]["metadata"] = {"annotations": annotations}
    if extra_rjs:
        node["dependsOn"] = [{"name": rj["name"], "status": "Complete"} for rj in extra_rjs]
    runtime = make_runtime(
        name,
        kind="TrainingRuntime",
        ml_policy={"numNodes": num_nodes, "torch": {}},
        replicated_jobs=[*(extra_rjs or []), node],
    )
    return runtime


# ---- an object already made, changed in place (Kueue's wrappers change the object they wrap) --

_UNSET: Any = object()
# A field set to JSON null by an edit, where None removes it: `.template_spec(failurePolicy=NULL)`.
NULL: Any = object()


def _put(target: Dict, fields: Dict) -> None:
    """`fields` set in `target`: None removes one, NULL sets it to null."""
    for key, value in fields.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = None if value is NULL else value


class ObjectEdit:
    """Any object (a fixture's, a pass's output, a view's `.raw`) changed in place a step at a
    time, so a test says what differs and never reaches into JSON:
    `edit(tj).status(plan.status).suspend(False)`; `edit(wl).clone().uid("u2").obj()` for a
    changed copy. Each step returns the edit; `.obj()` the object itself."""

    def __init__(self, body: Dict) -> None:
        self._body = body

    def obj(self) -> Dict:
        return self._body

    def clone(self) -> ObjectEdit:
        """An edit of a deep copy, the object itself left as it is."""
        return ObjectEdit(copy.deepcopy(self._body))

    # metadata

    def _meta(self, **fields: Any) -> ObjectEdit:
        _put(self._body.setdefault("metadata", {}), fields)
        return self

    def name(self, name: str) -> ObjectEdit:
        return self._meta(name=name)

    def namespace(self, namespace: str | None) -> ObjectEdit:
        """metadata.namespace (None: none, as a cluster-scoped object)."""
        return self._meta(namespace=namespace)

    def uid(self, uid: str) -> ObjectEdit:
        return self._meta(uid=uid)

    def resource_version(self, version: str) -> ObjectEdit:
        return self._meta(resourceVersion=version)

    def generation(self, generation: int | None) -> ObjectEdit:
        """metadata.generation (None: none, as an object the API server has not stored)."""
        return self._meta(generation=generation)

    def created(self, when: str) -> ObjectEdit:
        return self._meta(creationTimestamp=when)

    def deleting(self, since: str = "2026-11-22T12:00:00Z") -> ObjectEdit:
        """Being deleted: a deletionTimestamp (finalizers left as they are)."""
        return self._meta(deletionTimestamp=since)

    def owners(self, *references: Dict) -> ObjectEdit:
        """metadata.ownerReferences, replaced (none given: none)."""
        return self._meta(ownerReferences=list(references))

    def unowned(self) -> ObjectEdit:
        """No metadata.ownerReferences at all (the field gone, not an empty list)."""
        return self._meta(ownerReferences=None)

    def finalizers(self, *names: str) -> ObjectEdit:
        """metadata.finalizers, replaced (none given: none)."""
        return self._meta(finalizers=list(names))

    def labels(self, labels: Dict | None) -> ObjectEdit:
        """metadata.labels, replaced (None: none)."""
        return self._meta(labels=None if labels is None else dict(labels))

    def label(self, key: str, value: str | None) -> ObjectEdit:
        """One label set (None: removed), the others kept."""
        _put(self._body.setdefault("metadata", {}).setdefault("labels", {}), {key: value})
        return self

    def annotations(self, annotations: Dict | None) -> ObjectEdit:
        """metadata.annotations, replaced (None: none)."""
        return self._meta(annotations=None if annotations is None else dict(annotations))

    def annotation(self, key: str, value: str | None) -> ObjectEdit:
        """One annotation set (None: removed), the others kept."""
        annotations = self._body.setdefault("metadata", {}).setdefault("annotations", {})
        _put(annotations, {key: value})
        return self

    def metadata(self, metadata: Dict) -> ObjectEdit:
        """metadata replaced whole: `.metadata({"generateName": "job-"})`, one not yet named."""
        self._body["metadata"] = metadata
        return self

    # spec

    def spec(self, **fields: Any) -> ObjectEdit:
        """Top-level spec fields set (None: removed), the others kept: `.spec(active=False)`."""
        _put(self._body.setdefault("spec", {}), fields)
        return self

    def suspend(self, suspend: bool | None = True) -> ObjectEdit:
        """spec.suspend (None: unset)."""
        return self.spec(suspend=suspend)

    def whole_spec(self, spec: Dict | None) -> ObjectEdit:
        """The spec replaced by `spec`, whole (None: none): the fields not in it gone."""
        if spec is None:
            self._body.pop("spec", None)
        else:
            self._body["spec"] = spec
        return self

    # status

    def status(self, status: Dict | None = _UNSET, **fields: Any) -> ObjectEdit:
        """The status replaced by `status` (a controller's write between passes:
        `.status(plan.status)`; `.status({})` none yet), or, given fields only, those fields
        set (None: removed) and the others kept: `.status(clusterName="w1")`."""
        if status is not _UNSET:
            assert not fields, "a status replaced, or fields of it set: not both"
            self._body["status"] = status
        if fields:
            current = self._body.get("status")
            if not isinstance(current, dict):
                current = self._body["status"] = {}
            _put(current, fields)
        return self

    def conditions(self, *conditions: Dict) -> ObjectEdit:
        """status.conditions, replaced (none given: none), the rest of the status kept."""
        return self.status(conditions=list(conditions))

    def more_conditions(self, *conditions: Dict) -> ObjectEdit:
        """`conditions` added after those status.conditions holds (written since)."""
        current = self._body.get("status")
        if not isinstance(current, dict):
            current = self._body["status"] = {}
        current.setdefault("conditions", []).extend(conditions)
        return self

    def condition(self, type_: str, **fields: Any) -> ObjectEdit:
        """Fields of the condition of type `type_` set (None: removed), the others kept, where
        it stands: `.condition("Evicted", reason="Preempted")` (`more_conditions` adds one)."""
        conditions = (self._body.get("status") or {}).get("conditions") or []
        found = next((c for c in conditions if c.get("type") == type_), None)
        if found is None:
            raise KeyError(f"no condition {type_!r}")
        _put(found, fields)
        return self

    def without_condition(self, type_: str) -> ObjectEdit:
        """The conditions of type `type_` gone (no longer reported), the others kept."""
        current = self._body.get("status")
        if isinstance(current, dict) and "conditions" in current:
            current["conditions"] = [c for c in current["conditions"] if c.get("type") != type_]
        return self

    # templates: a Job's pods, a runtime's JobSet

    def template_spec(self, **fields: Any) -> ObjectEdit:
        """spec.template.spec fields set (None: removed), the others kept: a Job's pods' spec,
        a runtime's JobSet's (`.template_spec(successPolicy={"operator": "Any"})`)."""
        template = self._body.setdefault("spec", {}).setdefault("template", {})
        _put(template.setdefault("spec", {}), fields)
        return self

    def pod_label(self, key: str, value: str | None) -> ObjectEdit:
        """One label of a Job's pods (spec.template.metadata.labels) set (None: removed)."""
        template = self._body.setdefault("spec", {}).setdefault("template", {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        _put(labels, {key: value})
        return self

    def container(self, name: str, **fields: Any) -> ObjectEdit:
        """Fields of the container `name` of a Job's pods set (None: removed), the others kept:
        `.container("node", resources={"requests": {"cpu": "8"}})`."""
        for found in self._body["spec"]["template"]["spec"]["containers"]:
            if found.get("name") == name:
                _put(found, fields)
                return self
        raise KeyError(f"no container {name!r}")

    def _replicated(self, name: str) -> Dict:
        """A runtime's replicatedJob `name`."""
        for found in self._body["spec"]["template"]["spec"]["replicatedJobs"]:
            if found.get("name") == name:
                return found  # type: ignore[no-any-return]
        raise KeyError(f"no replicatedJob {name!r}")

    def replicated_job(self, name: str, **fields: Any) -> ObjectEdit:
        """Fields of a runtime's replicatedJob `name` set (None: removed), the others kept:
        `.replicated_job("node", dependsOn=[{"name": "launcher", "status": "Ready"}])`."""
        _put(self._replicated(name), fields)
        return self

    def template_metadata(self, metadata: Dict | None) -> ObjectEdit:
        """spec.template.metadata replaced (None: none): a Job's pods', a runtime's JobSet's."""
        template = self._body.setdefault("spec", {}).setdefault("template", {})
        _put(template, {"metadata": metadata})
        return self

    def job_spec(self, replicated_job: str, **fields: Any) -> ObjectEdit:
        """Fields of the Job spec of a runtime's replicatedJob (its template.spec) set (None:
        removed), the others kept: `.job_spec("launcher", parallelism=2)`."""
        found = self._replicated(replicated_job)
        _put(found.setdefault("template", {}).setdefault("spec", {}), fields)
        return self

    def pod_spec(self, replicated_job: str, **fields: Any) -> ObjectEdit:
        """Fields of the pod spec of a runtime's replicatedJob (template.spec.template.spec)
        set (None: removed), the others kept: `.pod_spec("node", priorityClassName="urgent")`."""
        job = self._replicated(replicated_job).setdefault("template", {}).setdefault("spec", {})
        _put(job.setdefault("template", {}).setdefault("spec", {}), fields)
        return self


def edit(body: Dict) -> ObjectEdit:
    """`ObjectEdit(body)`: change `body` in place, a step at a time."""
    return ObjectEdit(body)
