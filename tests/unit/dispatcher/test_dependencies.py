"""A TrainJob's Secrets and ConfigMaps follow it to the worker that runs it
(dispatcher/decisions/dependencies.py): what the pods reference, the whole pass over a manager
and two workers in memory (tests/support/whole_pass.py). What the API servers and a real node decide
(the garbage collector, a pod reading them) is the bed's (tests/e2e/test_dependencies.py)."""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from dispatcher.controller import dependencies_io, watches
from dispatcher.decisions import dependencies
from dispatcher.decisions.decide import RemoteAction
from dispatcher.decisions.dependencies import NAMESPACE_LABEL, Ref, references
from dispatcher.workers import connections as clusters
from dispatcher.workers import copy_ledger
from kubebase.kinds import CONFIG_MAP, SECRET
from kubebase.shares import Rates
from kubecontrol.informer import Informer
from kubecontrol.metrics import REGISTRY
from tests.support.builders import TrainJobBuilder, container, edit, make_runtime
from tests.support.memory_api import Fault
from tests.support.whole_pass import (
    World,
    both_caches,  # noqa: F401 (the fixture the cases that run passes use)
    condition,
    event_tuples,
    fleet,
    queues,
    reserve,
)
from trainjob.workload import workload_name
from trainjob_api import constants as c
from trainjob_api.views import ObjectView, TrainJobView, WorkloadView

Dict = dict[str, Any]
KEY = ("ns", "tj")
WORKERS = ("worker1", "worker2")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, value: str = "s3cr3t", **extra: Any) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns"},
        "type": "Opaque",
        "data": {"token": _b64(value)},
        **extra,
    }


def config_map(name: str, value: str = "lr=0.1") -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"train.cfg": value},
    }


def namespace(opted_in: bool = True) -> Dict:
    labels = {NAMESPACE_LABEL: "true"} if opted_in else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": labels}}


# A runtime whose pods read a Secret (env), a ConfigMap (envFrom and a volume), pull with an
# image pull Secret and mount an optional Secret that may not exist.
TRAINER = container(
    env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}],
    envFrom=[{"configMapRef": {"name": "train-config"}}],
    volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}],
)
POD = {
    "containers": [TRAINER],
    "imagePullSecrets": [{"name": "regcred"}],
    "volumes": [
        {"name": "cfg", "configMap": {"name": "train-config"}},
        {"name": "extra", "secret": {"secretName": "maybe", "optional": True}},
    ],
}
RUNTIME = make_runtime(
    replicated_jobs=[
        {
            "name": "node",
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": POD}},
            },
        }
    ]
)
SOURCES = [secret("hf-token"), config_map("train-config"), secret("regcred")]


# ---- what the pods reference ------------------------------------------------------------------


def test_every_way_a_pod_names_a_secret_or_config_map_is_found_each_once() -> None:
    pod = {
        "initContainers": [{"envFrom": [{"secretRef": {"name": "init-env"}}]}],
        "containers": [
            {
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}},
                    {"name": "B", "value": "plain"},
                    {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ]
            }
        ],
        "ephemeralContainers": [
            {"env": [{"name": "D", "valueFrom": {"secretKeyRef": {"name": "eph", "key": "d"}}}]}
        ],
        "volumes": [
            {"name": "v1", "secret": {"secretName": "vol-secret", "optional": True}},
            {"name": "v2", "configMap": {"name": "cm"}},
            {
                "name": "v3",
                "projected": {
                    "sources": [
                        {"secret": {"name": "proj-secret"}},
                        {"configMap": {"name": "proj-cm", "optional": True}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            },
            {"name": "v4", "persistentVolumeClaim": {"claimName": "data"}},
        ],
        "imagePullSecrets": [{"name": "pull"}],
    }
    refs = references([{"name": "node", "template": {"spec": pod}}])
    where = "spec.podSets[node].template.spec"
    assert refs == [
        Ref("Secret", "init-env", False, f"{where}.initContainers[0].envFrom[0].secretRef"),
        Ref("ConfigMap", "cm", False, f"{where}.containers[0].env[0].valueFrom.configMapKeyRef"),
        Ref(
            "Secret", "eph", False, f"{where}.ephemeralContainers[0].env[0].valueFrom.secretKeyRef"
        ),
        Ref("Secret", "vol-secret", True, f"{where}.volumes[0].secret"),
        Ref("Secret", "proj-secret", False, f"{where}.volumes[2].projected.sources[0].secret"),
        Ref("ConfigMap", "proj-cm", True, f"{where}.volumes[2].projected.sources[1].configMap"),
        Ref("Secret", "pull", False, f"{where}.imagePullSecrets[0]"),
    ]


def test_a_reference_is_optional_only_when_every_pod_set_names_it_optionally() -> None:
    optional = {"volumes": [{"name": "v", "secret": {"secretName": "s", "optional": True}}]}
    required = {"imagePullSecrets": [{"name": "s"}]}
    refs = references(
        [
            {"name": "a", "template": {"spec": optional}},
            {"name": "b", "template": {"spec": required}},
        ]
    )
    assert refs == [Ref("Secret", "s", False, "spec.podSets[b].template.spec.imagePullSecrets[0]")]


def _lookup(found: list[Dict]) -> Any:
    seen = {
        (o["kind"], o["metadata"]["name"]): dependencies.source_seen(
            o["kind"], {**o, "metadata": {**o["metadata"], "uid": "u-" + o["metadata"]["name"]}}
        )
        for o in found
    }
    return lambda kind, _ns, name: seen.get((kind, name))


def test_needs_names_what_is_missing_and_where_and_skips_a_missing_optional_one() -> None:
    pod_sets = [{"name": "node", "template": {"spec": POD}}]
    needs = dependencies.needs("ns", pod_sets, _lookup([secret("hf-token"), secret("regcred")]))
    assert needs.reason == dependencies.REASON_MISSING
    assert needs.problem is not None
    assert "ConfigMap 'train-config' (spec.podSets[node].template.spec.containers[0].envFrom" in (
        needs.problem
    )
    assert "maybe" not in needs.problem
    assert [s.key for s in needs.sources] == ["Secret/hf-token", "Secret/regcred"]
    complete = dependencies.needs("ns", pod_sets, _lookup(SOURCES))
    assert complete.problem is None and len(complete.sources) == 3


def test_a_service_account_token_never_leaves_the_manager() -> None:
    token = secret("hf-token", type="kubernetes.io/service-account-token")
    pod_sets = [{"name": "node", "template": {"spec": POD}}]
    needs = dependencies.needs("ns", pod_sets, _lookup([token, *SOURCES[1:]]))
    assert needs.reason == dependencies.REASON_REFUSED
    assert needs.problem is not None and "tokens never leave it" in needs.problem


def test_the_dispatchers_own_namespace_and_too_many_references_are_refused() -> None:
    pod_sets = [{"name": "node", "template": {"spec": POD}}]
    assert dependencies.needs(
        "kueue-system", pod_sets, _lookup(SOURCES), frozenset({"kueue-system"})
    ).reason == (dependencies.REASON_REFUSED)
    many = {
        "imagePullSecrets": [{"name": f"s{i}"} for i in range(dependencies.MAX_DEPENDENCIES + 1)]
    }
    too_many = dependencies.needs("ns", [{"name": "n", "template": {"spec": many}}], _lookup([]))
    assert too_many.problem is not None and "at most 32" in too_many.problem


# ---- writing a copy: each step from what was read ----------------------------------------------

ORIGIN = "manager-1"
OWNER = {"apiVersion": c.KUEUE_API, "kind": "Workload", "name": "wl", "uid": "wl-uid"}
OTHER_OWNER = {**OWNER, "name": "wl-2", "uid": "wl-2-uid"}


def _source(obj: Dict, uid: str = "src-uid") -> ObjectView:
    """A manager object as the executor hands it over: with its kind and UID."""
    return ObjectView({**obj, "metadata": {**obj["metadata"], "uid": uid}})


def _want(obj: Dict) -> Dict:
    """The plan's skeleton of a copy of `obj` (as the cache saw it)."""
    kind = obj["kind"]
    content = {"kind": kind, **{k: obj[k] for k in dependencies.CONTENT[kind] if k in obj}}
    source = dependencies.Source(
        kind, obj["metadata"]["name"], "src-uid", dependencies.digest(content)
    )
    return dependencies.skeleton(source, "ns", ORIGIN, OWNER)


def _copy(obj: Dict, *owners: Dict, origin: str = ORIGIN, claims: Dict | None = None) -> Dict:
    """A copy on the worker holding `obj`'s content, marked with `origin` and owned by
    `owners`; its digest annotation is `claims`' (default: its own content's)."""
    filled = dependencies.filled(_want(claims or obj), _source(claims or obj))
    held = {k: v for k, v in obj.items() if k in dependencies.CONTENT[obj["kind"]]}
    body = {k: v for k, v in filled.items() if k not in dependencies.CONTENT[obj["kind"]]}
    meta = {**filled["metadata"], "uid": "copy-uid", "resourceVersion": "7"}
    meta["labels"] = {c.KUEUE_MULTIKUEUE_ORIGIN_LABEL: origin}
    meta["ownerReferences"] = list(owners)
    return {**body, **held, "metadata": meta}


def _foreign(obj: Dict) -> Dict:
    return {**obj, "metadata": {**obj["metadata"], "uid": "theirs", "resourceVersion": "3"}}


RUNTIME_SPEC = {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": []}}}


def _runtime(spec: Dict = RUNTIME_SPEC) -> Dict:
    return {
        "apiVersion": c.TRAINER_API,
        "kind": c.TRAINING_RUNTIME_KIND,
        "metadata": {"name": "rt", "namespace": "ns"},
        "spec": spec,
    }


OTHER_SPEC = {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": []}}}
NEW = secret("hf-token", "rotated")
TAKEN = "Secret ns/hf-token exists there and is not a copy from this manager (it is left as it is)"

# (row, what the plan wants a copy of, found on the worker, the manager's object, the step)
COPY_STEPS: list[tuple[str, Dict, Dict | None, Any, Any]] = [
    ("nothing there, the source not read", secret("hf-token"), None, dependencies.UNREAD,
     dependencies.ReadSource(write=True)),
    ("nothing there: made from the source", secret("hf-token"), None, _source(secret("hf-token")),
     dependencies.Create(dependencies.filled(
         {**_want(secret("hf-token")), "metadata": {**_want(secret("hf-token"))["metadata"],
          "annotations": {c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION: "src-uid"}}},
         _source(secret("hf-token"))))),
    ("the source gone", secret("hf-token"), None, None, dependencies.Gone()),
    ("the source a token", secret("hf-token"), None,
     _source(secret("hf-token", type="kubernetes.io/service-account-token")), dependencies.Gone()),
    ("ours, current, owned: in place, nothing read", secret("hf-token"),
     _copy(secret("hf-token"), OWNER), dependencies.UNREAD,
     dependencies.InPlace(_copy(secret("hf-token"), OWNER))),
    ("ours, current, owned by another job: the source read for the owner", secret("hf-token"),
     _copy(secret("hf-token"), OTHER_OWNER), dependencies.UNREAD,
     dependencies.ReadSource(write=True)),
    ("ours, current, owned by another job: the owner added", secret("hf-token"),
     _copy(secret("hf-token"), OTHER_OWNER), _source(secret("hf-token")),
     dependencies.Replace({**_copy(secret("hf-token"), OTHER_OWNER), "metadata": {
         **_copy(secret("hf-token"), OTHER_OWNER)["metadata"],
         "ownerReferences": [OTHER_OWNER, OWNER]}})),
    ("ours, stale: brought to the source's content", NEW, _copy(secret("hf-token"), OWNER),
     _source(NEW), dependencies.Replace({**_copy(secret("hf-token"), OWNER), "data": NEW["data"],
         "metadata": {**_copy(secret("hf-token"), OWNER)["metadata"], "annotations": {
             **_copy(secret("hf-token"), OWNER)["metadata"]["annotations"],
             dependencies.DIGEST_ANNOTATION: _want(NEW)["metadata"]["annotations"][
                 dependencies.DIGEST_ANNOTATION]}}})),
    ("ours, holding what the cache saw, the source read newer: brought to it",
     secret("hf-token"), _copy(secret("hf-token"), OWNER), _source(NEW),
     dependencies.Replace({**_copy(secret("hf-token"), OWNER), "data": NEW["data"],
         "metadata": {**_copy(secret("hf-token"), OWNER)["metadata"], "annotations": {
             **_copy(secret("hf-token"), OWNER)["metadata"]["annotations"],
             dependencies.DIGEST_ANNOTATION: _want(NEW)["metadata"]["annotations"][
                 dependencies.DIGEST_ANNOTATION]}}})),
    ("ours, changed on the worker under the digest it claims: put back", secret("hf-token"),
     _copy(NEW, OWNER, claims=secret("hf-token")), _source(secret("hf-token")),
     dependencies.Replace({**_copy(NEW, OWNER, claims=secret("hf-token")),
                           "data": secret("hf-token")["data"]})),
    ("ours, current, owned, its digest annotation another's: the source read to mend it",
     secret("hf-token"), _copy(secret("hf-token"), OWNER, claims=NEW), dependencies.UNREAD,
     dependencies.ReadSource(write=True)),
    ("ours, holding the source read though the cache's digest is older: in place",
     secret("hf-token"), _copy(NEW, OWNER), _source(NEW), dependencies.InPlace(_copy(NEW, OWNER))),
    ("another manager's copy: taken, nothing read", secret("hf-token"),
     _copy(secret("hf-token"), OWNER, origin="manager-2"), dependencies.UNREAD,
     dependencies.Taken(TAKEN)),
    ("a foreign Secret: taken, nothing read", secret("hf-token"), _foreign(secret("hf-token")),
     dependencies.UNREAD, dependencies.Taken(TAKEN)),
    ("a foreign runtime: the source read to judge it, no turn", _runtime(), _foreign(_runtime()),
     dependencies.UNREAD, dependencies.ReadSource(write=False)),
    ("a foreign runtime of the manager's spec: served as it is", _runtime(),
     _foreign(_runtime()), _source(_runtime()), dependencies.ServedAsIs()),
    ("a foreign runtime of another spec: taken", _runtime(), _foreign(_runtime(OTHER_SPEC)),
     _source(_runtime()), dependencies.Taken(
         f"{c.TRAINING_RUNTIME_KIND} ns/rt exists there and is not a copy from this manager "
         "(it is left as it is)")),
    ("a foreign runtime, the manager's gone: taken", _runtime(), _foreign(_runtime()), None,
     dependencies.Taken(
         f"{c.TRAINING_RUNTIME_KIND} ns/rt exists there and is not a copy from this manager "
         "(it is left as it is)")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("plan", "found", "source", "step"), [row[1:] for row in COPY_STEPS],
    ids=[row[0] for row in COPY_STEPS],
)  # fmt: skip
def test_each_step_of_a_copy_is_chosen_from_what_was_read(
    plan: Dict, found: Dict | None, source: Any, step: Any
) -> None:
    want = _want(plan)
    before = copy.deepcopy((want, found, getattr(source, "raw", source)))
    seen = None if found is None else ObjectView(found)
    assert dependencies.copy_step(want, seen, source) == step
    assert (want, found, getattr(source, "raw", source)) == before  # nothing read is changed


def test_the_cache_keeps_a_digest_of_a_secret_never_its_content() -> None:
    kept = dependencies.source_seen(
        "Secret", {**secret("hf-token"), "metadata": {"name": "x", "uid": "u"}}
    )
    assert "data" not in kept and "s3cr3t" not in str(kept) and _b64("s3cr3t") not in str(kept)
    changed = dependencies.source_seen(
        "Secret", {**secret("hf-token", "other"), "metadata": {"name": "x"}}
    )
    assert kept["digest"] != changed["digest"]


def test_a_secret_its_transform_fails_on_is_cached_without_its_content(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An informer keeps an object its transform fails on as the watch's fallback keeps it:
    for the manager's Secrets and ConfigMaps, who it is and never its content (an informer's
    default keeps the object whole)."""
    (watch,) = [w for w in watches.dependency_watches(Any) if w.kind == SECRET]

    def broken(_: object) -> str:
        raise TypeError("a shape digest did not foresee")

    monkeypatch.setattr(dependencies, "digest", broken)
    listed = {**secret("hf-token"), "metadata": {"name": "x", "namespace": "ns", "uid": "u"}}
    informer = Informer(
        _OnePage([listed]), SECRET, transform=watch.transform, fallback=watch.fallback
    )
    with caplog.at_level(logging.ERROR, logger="kubecontrol.informer"):
        assert informer.list_now()
    kept = informer.get(("ns", "x"))
    assert kept == {"kind": "Secret", "metadata": listed["metadata"], "digest": ""}
    assert "transform failed" in caplog.text and _b64("s3cr3t") not in caplog.text


class _OnePage:
    """Stands in for the API client's list: one page of the objects given."""

    def __init__(self, items: list[Dict]) -> None:
        self.items = items

    def request(self, method: str, path: str, **_: object) -> bytes:
        return orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": self.items})


# ---- the whole pass ---------------------------------------------------------------------------


@pytest.fixture
def world() -> Iterator[World]:
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    made, _ctx = fleet([RUNTIME, submitted, namespace(), *SOURCES], {w: [RUNTIME] for w in WORKERS})
    yield made
    made.close()


def _workload(world: World, cluster: str = "manager") -> Dict | None:
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert tj is not None
    return world.get(cluster, c.WORKLOAD, workload_name("tj", tj["metadata"]["uid"]))


def _reserve(world: World, cluster: str = "manager", admitted: bool = False) -> None:
    reserve(world, cluster, admitted=admitted)
    world.settle(KEY)


def _copies(world: World, worker: str) -> dict[str, Dict]:
    api = world.apis[worker]
    return {
        f"{o['kind']}/{o['metadata']['name']}": o
        for kind in (SECRET, CONFIG_MAP)
        for o in api.objects(kind, "ns")
    }


def _check_message(world: World) -> str:
    wl = _workload(world)
    assert wl is not None
    return str(wl["status"]["admissionChecks"][0]["message"])


@pytest.mark.usefixtures("both_caches")
def test_the_winner_gets_the_jobs_secrets_and_config_maps_before_its_trainjob_owned_by_its_workload(
    world: World,
) -> None:
    world.settle(KEY)
    _reserve(world)
    _reserve(world, "worker2", admitted=True)
    got = _copies(world, "worker2")
    assert sorted(got) == ["ConfigMap/train-config", "Secret/hf-token", "Secret/regcred"]
    assert _copies(world, "worker1") == {}
    wl_copy = _workload(world, "worker2")
    assert wl_copy is not None
    token = got["Secret/hf-token"]
    assert token["data"] == {"token": _b64("s3cr3t")} and token["type"] == "Opaque"
    assert token["metadata"]["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL] == "multikueue"
    assert [o["uid"] for o in token["metadata"]["ownerReferences"]] == [wl_copy["metadata"]["uid"]]
    assert got["ConfigMap/train-config"]["data"] == {"train.cfg": "lr=0.1"}
    # Each copy was written before the TrainJob: its pods never start without them.
    writes = [p for _m, p in world.apis["worker2"].writes() if "/namespaces/ns/" in p]
    trainjob_at = next(i for i, p in enumerate(writes) if "/trainjobs" in p)
    assert all(
        next(i for i, p in enumerate(writes) if f"/{plural}" in p) < trainjob_at
        for plural in ("secrets", "configmaps")
    )


@pytest.mark.usefixtures("both_caches")
def test_a_missing_secret_holds_the_job_back_naming_it_and_it_goes_once_the_secret_exists(
    world: World,
) -> None:
    world.apis["manager"].request("DELETE", SECRET.path("ns", "hf-token"))
    world.settle(KEY)
    _reserve(world)
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert condition(tj, c.COND_DEPENDENCIES_MISSING) == ("True", dependencies.REASON_MISSING)
    assert "Secret 'hf-token'" in _check_message(world)
    for worker in WORKERS:
        assert world.get(worker, c.WORKLOAD, _workload(world)["metadata"]["name"]) is None  # type: ignore[index]
    world.apis["manager"].put(secret("hf-token"))
    world.settle(KEY)
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert condition(tj, c.COND_DEPENDENCIES_MISSING) is None
    assert all(_workload(world, w) is not None for w in WORKERS)


@pytest.mark.usefixtures("both_caches")
def test_a_namespace_not_opted_in_sends_nothing_but_the_job() -> None:
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    made, _ctx = fleet(
        [RUNTIME, submitted, namespace(opted_in=False)], {w: [RUNTIME] for w in WORKERS}
    )
    try:
        made.settle(KEY)
        _reserve(made)
        _reserve(made, "worker1", admitted=True)
        assert made.get("worker1", c.TRAINJOB, "tj") is not None
        assert _copies(made, "worker1") == {}
    finally:
        made.close()


@pytest.mark.usefixtures("both_caches")
def test_a_foreign_secret_of_that_name_is_never_written_and_the_job_goes_elsewhere(
    world: World,
) -> None:
    theirs = secret("hf-token", "theirs")
    world.apis["worker1"].put(theirs)
    world.settle(KEY)
    _reserve(world)
    _reserve(world, "worker1", admitted=True)
    found = world.get("worker1", SECRET, "hf-token")
    assert found is not None and found["data"] == {"token": _b64("theirs")}
    assert "ownerReferences" not in found["metadata"]
    assert world.get("worker1", c.TRAINJOB, "tj") is None  # never run beside a foreign Secret
    wl = _workload(world)
    assert wl is not None and wl["status"]["admissionChecks"][0]["state"] == "Retry"
    _reserve(world)  # Kueue's requeue: reserved again, sent only where the name is free
    assert _workload(world, "worker1") is None and _workload(world, "worker2") is not None
    assert "Secret ns/hf-token exists there and is not a copy from this manager" in _check_message(
        world
    )
    # A name taken is not a refused dependency: the TrainJob says nothing of the kind.
    assert condition(world.get("manager", c.TRAINJOB, "tj"), c.COND_DEPENDENCIES_MISSING) is None


@pytest.mark.usefixtures("both_caches")
def test_a_copy_changed_on_the_worker_and_read_while_its_namespace_waits_is_put_back() -> None:
    """A new leader reads a copy someone changed on the worker (its marks kept) while the
    namespace has no copy refresh left: it remembers what the copy holds, not what its
    annotation claims, and puts it back once the namespace has its turn."""
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    made, ctx = fleet([RUNTIME, submitted, namespace(), *SOURCES], {w: [RUNTIME] for w in WORKERS})
    try:
        made.settle(KEY)
        _reserve(made)
        _reserve(made, "worker1", admitted=True)
        tampered = made.get("worker1", SECRET, "hf-token")
        assert tampered is not None
        tampered["data"] = {"token": _b64("theirs")}
        made.apis["worker1"].put(tampered)
        ctx.workers.copies = copy_ledger.CopyLedger(per_second=1e-9, burst=32)
        while ctx.workers.copies.allowed("ns"):  # the namespace's turns spent
            pass
        made.settle(KEY)
        kept = made.get("worker1", SECRET, "hf-token")
        assert kept is not None and kept["data"] == {"token": _b64("theirs")}  # waited
        ctx.workers.copies._rates = Rates(per_second=1000.0, burst=1000)
        made.settle(KEY)
        back = made.get("worker1", SECRET, "hf-token")
        assert back is not None and back["data"] == {"token": _b64("s3cr3t")}
    finally:
        made.close()


@pytest.mark.usefixtures("both_caches")
def test_a_change_on_the_manager_reaches_the_running_copy(world: World) -> None:
    world.settle(KEY)
    _reserve(world)
    _reserve(world, "worker1", admitted=True)
    world.apis["manager"].put(secret("hf-token", "rotated"))
    world.settle(KEY)
    copy = world.get("worker1", SECRET, "hf-token")
    assert copy is not None and copy["data"] == {"token": _b64("rotated")}


@pytest.mark.usefixtures("both_caches")
def test_two_jobs_share_one_copy_owned_by_both_which_goes_with_the_last_of_them() -> None:
    """The product's part is the second owner reference; the worker's garbage collector's is
    the rest (the stand-in's, held to a real one by tests/bed/test_api_contract.py)."""
    jobs = [TrainJobBuilder(name).queue("q").multikueue().obj() for name in ("tj", "tj2")]
    made, _ctx = fleet([RUNTIME, *jobs, namespace(), *SOURCES], {"worker1": [RUNTIME]})
    try:
        uids, copies = [], []
        for name in ("tj", "tj2"):
            key = ("ns", name)
            made.settle(key)
            tj = made.get("manager", c.TRAINJOB, name)
            assert tj is not None
            wl_name = workload_name(name, tj["metadata"]["uid"])
            for cluster, admitted in (("manager", False), ("worker1", True)):
                reserve(made, cluster, name, admitted=admitted)
                made.settle(key)
            copy = made.get("worker1", c.WORKLOAD, wl_name)
            assert copy is not None
            uids.append(copy["metadata"]["uid"])
            copies.append(wl_name)
        shared = made.get("worker1", SECRET, "hf-token")
        assert shared is not None
        assert [o["uid"] for o in shared["metadata"]["ownerReferences"]] == uids
        worker = made.apis["worker1"]
        worker.request("DELETE", c.WORKLOAD.path("ns", copies[0]))
        kept = worker.object(SECRET, "hf-token", "ns")
        assert kept is not None
        assert [o["uid"] for o in kept["metadata"]["ownerReferences"]] == uids[1:]
        worker.request("DELETE", c.WORKLOAD.path("ns", copies[1]))
        assert worker.object(SECRET, "hf-token", "ns") is None
    finally:
        made.close()


@pytest.mark.usefixtures("both_caches")
def test_a_worker_that_refuses_secrets_keeps_the_job_and_says_why(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused for a missing grant: said as such (RemoteDependencyRefused), not as a name
    taken there."""
    world.apis["worker1"].fail(Fault(403, "POST", "secrets", times=None))
    world.settle(KEY)
    _reserve(world)
    _reserve(world, "worker1", admitted=True)
    assert world.get("worker1", c.TRAINJOB, "tj") is None
    _reserve(world)
    assert "worker.multikueueIdentity.dependencies" in _check_message(world)
    reasons = {reason for _type, reason, _name in event_tuples(world.apis["manager"])}
    assert "RemoteDependencyRefused" in reasons and "RemoteNameTaken" not in reasons
    # The TrainJob says so too, naming the worker and the grant, while the job waits.
    world.settle(KEY)
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert condition(tj, c.COND_DEPENDENCIES_MISSING) == ("True", "RemoteDependencyRefused")
    (said,) = [x for x in tj["status"]["conditions"] if x["type"] == c.COND_DEPENDENCIES_MISSING]
    assert said["message"].startswith("worker1: Secret ns/hf-token cannot be copied there")
    assert "worker.multikueueIdentity.dependencies" in said["message"]
    # The worker lets the copy in: tried again, the job runs there and the condition goes.
    world.apis["worker1"].heal()
    monkeypatch.setattr(clusters, "TAKEN_SECONDS", 0.0)  # the refusal is tried again at once
    _reserve(world)
    _reserve(world, "worker1", admitted=True)
    assert world.get("worker1", SECRET, "hf-token") is not None
    assert world.get("worker1", c.TRAINJOB, "tj") is not None
    tj = world.get("manager", c.TRAINJOB, "tj")
    assert condition(tj, c.COND_DEPENDENCIES_MISSING) is None


@pytest.mark.usefixtures("both_caches")
def test_without_the_right_to_read_secrets_the_dispatcher_runs_and_the_job_says_why() -> None:
    """The dependency watches are optional: a role without Secrets leaves the rest working,
    and a job of an opted-in namespace that references some waits, saying so."""
    submitted = TrainJobBuilder().queue("q").multikueue().obj()
    made, ctx = fleet([RUNTIME, submitted, namespace(), *SOURCES], {w: [RUNTIME] for w in WORKERS})
    try:
        made.apis["manager"].fail(Fault(403, "GET", "secrets", times=None))
        ctx.informers["secret_index"].synced.clear()  # as if it never listed
        made.settle(KEY)
        _reserve(made)
        tj = made.get("manager", c.TRAINJOB, "tj")
        assert condition(tj, c.COND_DEPENDENCIES_MISSING) == ("True", dependencies.REASON_MISSING)
        assert "cannot read Secrets on the manager" in _check_message(made)
    finally:
        made.close()


# ---- one copy per worker, and a namespace's share of copy refreshes -----------------------


def _trainer_runtime(name: str, pod_spec: Dict) -> Dict:
    """A runtime of one trainer replicated job whose pods have `pod_spec`."""
    trainer = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    job = {"metadata": {"labels": trainer}, "spec": {"template": {"spec": pod_spec}}}
    return make_runtime(name, replicated_jobs=[{"name": "node", "template": job}])


# A runtime whose pods read one Secret of their own: jobs on it reference none of RUNTIME's.
OTHER_RUNTIME = _trainer_runtime(
    "other-runtime",
    {"containers": [container(envFrom=[{"secretRef": {"name": "other-token"}}])]},
)


def _job(name: str, runtime: Dict = RUNTIME, namespace: str = "ns") -> Dict:
    built = TrainJobBuilder(name, namespace).queue("q").multikueue()
    return built.runtime(runtime["metadata"]["name"]).obj()


def _dispatch(world: World, key: tuple[str, str], worker: str) -> None:
    """A job reserved on the manager, then admitted by `worker`: its TrainJob runs there."""
    world.settle(key)
    for cluster, admitted in (("manager", False), (worker, True)):
        reserve(world, cluster, key[1], admitted=admitted, namespace=key[0])
        world.settle(key)
    assert world.get(worker, c.TRAINJOB, key[1], key[0]) is not None


def _mark(world: World, worker: str) -> tuple[int, int]:
    api = world.apis[worker]
    return len(api.requests), len(api.refused)


def _secret_writes(world: World, worker: str, name: str, since: tuple[int, int]) -> list[str]:
    """The writes sent to a worker's Secret `name` (or to make a Secret) since `_mark`, served
    or refused."""
    api = world.apis[worker]
    sent = [*api.requests[since[0] :], *((m, p) for m, p, _ in api.refused[since[1] :])]
    return [m for m, p in sent if m != "GET" and p.endswith(("/secrets", f"/secrets/{name}"))]


def test_a_changed_secret_queues_only_its_jobs_and_is_written_once_per_worker() -> None:
    """20 jobs share hf-token, split over two workers; two more reference only other-token.
    One change of hf-token queues the 20, and their passes send one write per worker."""
    sharing = [_job(f"tj{i}") for i in range(20)]
    others = [_job(f"other{i}", OTHER_RUNTIME) for i in range(2)]
    made, _ctx = fleet(
        [RUNTIME, OTHER_RUNTIME, *sharing, *others, namespace(), *SOURCES, secret("other-token")],
        {w: [RUNTIME, OTHER_RUNTIME] for w in WORKERS},
        behind=False,
    )
    try:
        for i, job in enumerate([*sharing, *others]):
            _dispatch(made, ("ns", job["metadata"]["name"]), WORKERS[i % 2])
        writes = {w: _mark(made, w) for w in WORKERS}
        reads = len(made.apis["manager"].requests)
        made.apis["manager"].put(secret("hf-token", "rotated"))
        made.relist()
        queued = made.queue.take()
        assert set(queued) == {("ns", j["metadata"]["name"]) for j in sharing}
        assert len(queued) == len(sharing)
        for key in queued:
            made.run(key)
        for worker in WORKERS:
            assert len(_secret_writes(made, worker, "hf-token", writes[worker])) == 1
            copy = made.get(worker, SECRET, "hf-token")
            assert copy is not None and copy["data"] == {"token": _b64("rotated")}
            assert len(copy["metadata"]["ownerReferences"]) == 10  # still every job's there
        read_again = [
            p for _m, p in made.apis["manager"].requests[reads:] if p.endswith("/secrets/hf-token")
        ]
        assert len(read_again) == len(WORKERS)
    finally:
        made.close()


def test_a_change_queues_only_the_jobs_whose_pods_reference_that_object() -> None:
    jobs = [_job("tj"), _job("other", OTHER_RUNTIME)]
    made, _ctx = fleet(
        [RUNTIME, OTHER_RUNTIME, *jobs, namespace(), *SOURCES, secret("other-token")],
        {w: [RUNTIME, OTHER_RUNTIME] for w in WORKERS},
        behind=False,
    )
    try:
        for key in (KEY, ("ns", "other")):
            made.settle(key)  # each has its Workload, which says what its pods reference
        manager = made.apis["manager"]
        for changed, then_queued in (
            (config_map("unrelated", "x=1"), []),
            (config_map("unrelated", "x=2"), []),
            (secret("other-token", "rotated"), [("ns", "other")]),
            (config_map("train-config", "lr=0.2"), [KEY]),
        ):
            manager.put(changed)
            made.relist()
            assert made.queue.take() == then_queued, changed["metadata"]["name"]
    finally:
        made.close()


# A runtime whose pods pull with as many Secrets as a TrainJob may take along, the last named
# last.
MOST = [f"pull{i}" for i in range(dependencies.MAX_DEPENDENCIES)]
MOST_RUNTIME = _trainer_runtime(
    "most-runtime",
    {"containers": [container()], "imagePullSecrets": [{"name": name} for name in MOST]},
)


def test_a_job_that_names_the_most_dependencies_is_filed_under_each_and_queued_by_the_last() -> (
    None
):
    pod_sets = [
        {"name": "node", "template": {"spec": {"imagePullSecrets": [{"name": n} for n in MOST]}}}
    ]
    workload = {"metadata": {"namespace": "ns"}, "spec": {"podSets": pod_sets}}
    assert dependencies.named_by(WorkloadView(workload)) == [
        ("ns", "Secret", name) for name in MOST
    ]
    made, _ctx = fleet(
        [MOST_RUNTIME, _job("tj", MOST_RUNTIME), namespace(), *(secret(n) for n in MOST)],
        {w: [MOST_RUNTIME] for w in WORKERS},
        behind=False,
    )
    try:
        made.settle(KEY)
        tj = made.get("manager", c.TRAINJOB, "tj")
        assert condition(tj, c.COND_DEPENDENCIES_MISSING) is None  # the most, not too many
        for changed in (MOST[-1], MOST[0]):
            made.apis["manager"].put(secret(changed, "rotated"))
            made.relist()
            assert made.queue.take() == [KEY], changed
    finally:
        made.close()


def test_a_namespace_that_churns_its_secret_is_held_while_another_namespace_dispatches() -> None:
    """A namespace's copy refreshes draw on its own allowance (here 32, refilled too slowly
    to count): once spent, its copies wait (the pass asks to be tried again), while another
    namespace's job gets its Secret and runs."""
    ns2 = {**namespace(), "metadata": {"name": "ns2", "labels": {NAMESPACE_LABEL: "true"}}}
    queue2 = {**queues()[2], "metadata": {"name": "q", "namespace": "ns2"}}
    their_secret = {
        **secret("other-token"),
        "metadata": {"name": "other-token", "namespace": "ns2"},
    }
    made, _ctx = fleet(
        [
            RUNTIME,
            OTHER_RUNTIME,
            _job("tj"),
            namespace(),
            *SOURCES,
            ns2,
            queue2,
            their_secret,
            _job("theirs", OTHER_RUNTIME, "ns2"),
        ],
        {w: [RUNTIME, OTHER_RUNTIME, queue2] for w in WORKERS},
        behind=False,
        dependency_copies_per_second=1e-6,
        dependency_copies_burst=32,
    )
    try:
        _dispatch(made, KEY, "worker1")  # three copies made: 29 refreshes left
        since = _mark(made, "worker1")
        for turn in range(35):
            made.apis["manager"].put(secret("hf-token", f"rotation {turn}"))
            last = made.run(KEY)
        assert len(_secret_writes(made, "worker1", "hf-token", since)) == 29
        # A held pass reads nothing on the worker: one read per refresh made, none per wait.
        reads = [
            p
            for m, p in made.apis["worker1"].requests[since[0] :]
            if m == "GET" and p.endswith("/secrets/hf-token")
        ]
        assert len(reads) == 29, len(reads)
        copy = made.get("worker1", SECRET, "hf-token")
        assert copy is not None and copy["data"] == {"token": _b64("rotation 28")}
        assert last.requeue_after is not None  # tried again later, when its turn comes
        _dispatch(made, ("ns2", "theirs"), "worker1")
        copied = made.get("worker1", SECRET, "other-token", "ns2")
        assert copied is not None and copied["data"] == {"token": _b64("s3cr3t")}
    finally:
        made.close()


def _held() -> float:
    """The copies held back so far for their namespace's turn (the metric's `held`)."""
    labels = {"cluster": "worker1", "result": "held"}
    return REGISTRY.get_sample_value("trainjob_dependency_copies_total", labels) or 0.0


def test_after_a_failover_passes_that_find_the_copies_current_spend_none_of_the_allowance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More jobs than a namespace's whole allowance (32, refilled too slowly to count) share
    one worker's copies, already current, when a new leader starts with nothing remembered of
    them; the ledger keeps only a few owners per copy (OWNERS_KEPT, here 4), so most of the
    jobs' passes look at the copy on the worker. A look spends nothing: no job is held. Then a
    change of hf-token costs one write there, within the allowance."""
    monkeypatch.setattr(copy_ledger, "OWNERS_KEPT", 4)
    jobs = [_job(f"tj{i}") for i in range(34)]
    made, ctx = fleet(
        [RUNTIME, *jobs, namespace(), *SOURCES],
        {"worker1": [RUNTIME]},
        behind=False,
        dependency_copies_burst=1000,  # the old leader's, generous: each job added an owner
    )
    try:
        keys = [("ns", j["metadata"]["name"]) for j in jobs]
        for key in keys:
            _dispatch(made, key, "worker1")
        ctx.workers.copies = copy_ledger.CopyLedger(per_second=1e-9, burst=32)  # the new one
        since, held_before = _mark(made, "worker1"), _held()
        for key in keys:
            made.run(key)
        assert _held() == held_before  # no job waited for its namespace's turn
        assert _secret_writes(made, "worker1", "hf-token", since) == []
        made.apis["manager"].put(secret("hf-token", "rotated"))
        made.relist()
        for key in made.queue.take():
            made.run(key)
        assert _held() == held_before
        assert len(_secret_writes(made, "worker1", "hf-token", since)) == 1
        copy = made.get("worker1", SECRET, "hf-token")
        assert copy is not None and copy["data"] == {"token": _b64("rotated")}
        assert len(copy["metadata"]["ownerReferences"]) == len(jobs)
        left = sum(ctx.workers.copies.allowed("ns") for _ in range(40))
        assert left == 31  # the one write, nothing for the looks
    finally:
        made.close()


@pytest.mark.parametrize("remembered", [True, False], ids=["remembered", "after-a-failover"])
def test_a_new_job_held_for_its_namespaces_turn_reads_the_worker_at_most_once(
    remembered: bool,
) -> None:
    """A second job shares hf-token's copy, current but not yet owned by it, while its
    namespace has no copy refresh left: its passes wait for the turn without reading the copy
    on the worker again and again (at most once when the dispatcher remembered nothing of it,
    after a failover), then the copy gains its owner once a turn comes."""
    made, ctx = fleet(
        [RUNTIME, _job("tj"), _job("tj2"), namespace(), *SOURCES],
        {"worker1": [RUNTIME]},
        behind=False,
        dependency_copies_per_second=1e-9,
        dependency_copies_burst=32,
    )
    try:
        _dispatch(made, KEY, "worker1")
        if not remembered:
            ctx.workers.copies = copy_ledger.CopyLedger(per_second=1e-9, burst=32)
        while ctx.workers.copies.allowed("ns"):  # at most 32: the namespace's turns spent
            pass
        second = ("ns", "tj2")
        made.settle(second)
        reserve(made, "manager", "tj2", admitted=False, namespace="ns")  # sent out
        made.settle(second)
        reserve(made, "worker1", "tj2", admitted=True, namespace="ns")  # admitted there
        since = _mark(made, "worker1")
        for _ in range(4):
            made.run(second)
        reads = [
            p
            for m, p in made.apis["worker1"].requests[since[0] :]
            if m == "GET" and p.endswith("/secrets/hf-token")
        ]
        assert len(reads) == (0 if remembered else 1), reads
        assert made.get("worker1", c.TRAINJOB, "tj2") is None  # it waits for its Secrets
        ctx.workers.copies._rates = Rates(per_second=1e-9, burst=32)  # its turns come back
        made.settle(second)
        assert made.get("worker1", c.TRAINJOB, "tj2") is not None
        copy = made.get("worker1", SECRET, "hf-token")
        assert copy is not None and len(copy["metadata"]["ownerReferences"]) == 2
    finally:
        made.close()


# ---- a tenant's own TrainingRuntime follows its job --------------------------------------------


def _write(world: World, runtime: Dict) -> None:
    """A runtime replaced on the manager as a client does (PUT): the API server's
    generation counts the changes of its spec."""
    meta = runtime["metadata"]
    path = c.TRAINING_RUNTIME.path(meta["namespace"], meta["name"])
    world.apis["manager"].request("PUT", path, body=runtime)


OWN = make_runtime("own", kind=c.TRAINING_RUNTIME_KIND, namespace="ns")


def _own_runtime_world(worker_objects: dict[str, list[Dict]] | None = None) -> World:
    """An opted-in namespace whose TrainJob names a TrainingRuntime of its own, which only the
    manager holds (unless `worker_objects` says otherwise)."""
    return _own_runtime_fleet(worker_objects)[0]


def _own_runtime_fleet(worker_objects: dict[str, list[Dict]] | None = None) -> tuple[World, Any]:
    submitted = TrainJobBuilder().queue("q").multikueue().runtime("own", c.TRAINING_RUNTIME_KIND)
    return fleet(
        [OWN, submitted.obj(), namespace()],
        {w: (worker_objects or {}).get(w, []) for w in WORKERS},
    )


def _runtime_on(world: World, worker: str) -> Dict | None:
    return world.get(worker, c.TRAINING_RUNTIME, "own", "ns")


def _ask_for_nodes(runtime: Dict, count: int) -> None:
    """The runtime changed to ask for `count` nodes, the rest of its mlPolicy kept."""
    edit(runtime).spec(mlPolicy={**runtime["spec"]["mlPolicy"], "numNodes": count})


@pytest.mark.usefixtures("both_caches")
def test_the_jobs_own_runtime_goes_to_its_worker_before_its_trainjob_and_follows_its_changes() -> (
    None
):
    world = _own_runtime_world()
    try:
        world.settle(KEY)
        _reserve(world)
        tj = world.get("manager", c.TRAINJOB, "tj")
        assert condition(tj, c.COND_RUNTIME_DRIFT) is None  # missing there: it goes along
        assert all(_workload(world, w) is not None for w in WORKERS)
        _reserve(world, "worker1", admitted=True)
        copy = _runtime_on(world, "worker1")
        assert copy is not None and _runtime_on(world, "worker2") is None
        assert copy["spec"] == OWN["spec"]
        assert copy["metadata"]["labels"][c.KUEUE_MULTIKUEUE_ORIGIN_LABEL] == "multikueue"
        wl_copy = _workload(world, "worker1")
        assert wl_copy is not None
        assert [o["uid"] for o in copy["metadata"]["ownerReferences"]] == [
            wl_copy["metadata"]["uid"]
        ]
        writes = [p for _m, p in world.apis["worker1"].writes() if "/namespaces/ns/" in p]
        at = {kind: next(i for i, p in enumerate(writes) if f"/{kind}" in p)
              for kind in ("trainingruntimes", "trainjobs")}  # fmt: skip
        assert at["trainingruntimes"] < at["trainjobs"]
        # The tenant changes its runtime on the manager, twice, through the API (which counts
        # each change of its spec in its generation): each time the copy follows.
        for nodes in (3, 4):
            changed = world.get("manager", c.TRAINING_RUNTIME, "own", "ns")
            assert changed is not None
            _ask_for_nodes(changed, nodes)
            world.queue.take()
            _write(world, changed)
            world.relist()
            assert world.queue.take() == [KEY]  # the change queued the job that names it
            world.settle(KEY)
            copy = _runtime_on(world, "worker1")
            assert copy is not None and copy["spec"]["mlPolicy"]["numNodes"] == nodes
        # A change of its metadata alone (not copied) has no job look again.
        changed = world.get("manager", c.TRAINING_RUNTIME, "own", "ns")
        assert changed is not None
        edit(changed).annotation("note", "not copied")
        world.queue.take()
        _write(world, changed)
        world.relist()
        assert world.queue.take() == []
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_workers_own_runtime_of_that_name_is_never_written_used_when_the_same() -> None:
    other = make_runtime(
        "own", kind=c.TRAINING_RUNTIME_KIND, namespace="ns", ml_policy={"numNodes": 5, "torch": {}}
    )
    world = _own_runtime_world({"worker1": [copy.deepcopy(OWN)], "worker2": [other]})
    try:
        world.settle(KEY)
        _reserve(world)
        tj = world.get("manager", c.TRAINJOB, "tj")
        # worker2 holds another runtime of that name, not ours: no copy of the job goes there.
        assert condition(tj, c.COND_RUNTIME_DRIFT) == ("True", c.COND_RUNTIME_DRIFT)
        assert _workload(world, "worker2") is None and _workload(world, "worker1") is not None
        _reserve(world, "worker1", admitted=True)
        assert world.get("worker1", c.TRAINJOB, "tj") is not None
        # worker1's own runtime, the manager's spec: used as it is, never written.
        # Seen by its watch: no pass reads it (or the manager's) one by one either.
        runtime_calls = [
            (m, p)
            for api in (world.apis["worker1"], world.apis["manager"])
            for m, p in api.requests
            if "/trainingruntimes/own" in p
        ]
        assert runtime_calls == []
        kept = _runtime_on(world, "worker2")
        assert kept is not None and kept["spec"]["mlPolicy"]["numNodes"] == 5
    finally:
        world.close()


@pytest.mark.usefixtures("both_caches")
def test_a_copy_changed_on_the_worker_is_put_back_by_what_it_holds_not_what_it_claims() -> None:
    """Someone with rights on the worker edits the copy and keeps its marks (label, digest
    annotation): a leader that does not remember the copy reads it and writes it back."""
    world, ctx = _own_runtime_fleet()
    try:
        world.settle(KEY)
        _reserve(world)
        _reserve(world, "worker1", admitted=True)
        tampered = _runtime_on(world, "worker1")
        assert tampered is not None
        _ask_for_nodes(tampered, 7)
        world.apis["worker1"].put(tampered)
        # Our copy, changed there, is no drift: a second job naming the runtime goes to
        # worker1 too.
        second = TrainJobBuilder("tj2").queue("q").multikueue()
        world.apis["manager"].put(second.runtime("own", c.TRAINING_RUNTIME_KIND).obj())
        world.settle(("ns", "tj2"))
        reserve(world, "manager", name="tj2")
        world.settle(("ns", "tj2"))
        tj2 = world.get("manager", c.TRAINJOB, "tj2")
        assert tj2 is not None and condition(tj2, c.COND_RUNTIME_DRIFT) is None
        wl2 = workload_name("tj2", tj2["metadata"]["uid"])
        assert world.get("worker1", c.WORKLOAD, wl2) is not None
        # A new leader, which remembers no copy, reads it and puts it back.
        ctx.workers.copies = copy_ledger.CopyLedger(1000.0, 1000)
        world.settle(KEY)
        back = _runtime_on(world, "worker1")
        assert back is not None and back["spec"] == OWN["spec"]
    finally:
        world.close()


def test_a_runtime_is_named_by_the_jobs_of_its_namespace_only() -> None:
    own = TrainJobBuilder().runtime("own", c.TRAINING_RUNTIME_KIND).obj()
    assert dependencies.runtime_named_by(TrainJobView(own)) == [("ns", "own")]
    cluster = TrainJobBuilder().runtime("torch-distributed").obj()
    assert dependencies.runtime_named_by(TrainJobView(cluster)) == []
    for name in (["x"], "", None, 3):
        ref = {"kind": "TrainingRuntime", "name": name}
        odd = {"metadata": {"namespace": "ns"}, "spec": {"runtimeRef": ref}}
        assert dependencies.runtime_named_by(TrainJobView(odd)) == [], name
    for ref in (["TrainingRuntime"], "own"):  # a runtimeRef that is no object names none
        odd = {"metadata": {"namespace": "ns"}, "spec": {"runtimeRef": ref}}
        assert dependencies.runtime_named_by(TrainJobView(odd)) == [], ref


def test_a_secret_its_transform_fails_on_keeps_only_who_it_is_through_the_controllers_informer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the controller makes the informer (controller.informers): the watch's fallback is
    the one used, and it keeps none of the metadata that may hold the content (the
    last-applied annotation holds the Secret whole)."""
    import threading
    from types import SimpleNamespace

    from kubecontrol import controller

    (watch,) = [w for w in watches.dependency_watches(Any) if w.kind == SECRET]

    def broken(_: object) -> str:
        raise TypeError("a shape digest did not foresee")

    monkeypatch.setattr(dependencies, "digest", broken)
    identity = {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "3"}
    last = '{"data": {"token": "czNjcjN0"}}'
    meta = {
        **identity,
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last},
        "labels": {"a": "b"},
        "managedFields": [{"manager": "kubectl"}],
    }
    ctx = SimpleNamespace(
        settings=SimpleNamespace(cluster_name="c"), synced=threading.Event(), informers={},
        indexes={}, optional=set(), watch_errors={},
    )  # fmt: skip
    cluster = SimpleNamespace(api=_OnePage([{**secret("x"), "metadata": meta}]))
    (informer,) = controller.informers(ctx, cluster, [watch])  # type: ignore[arg-type]
    assert informer.list_now() and ctx.watch_errors == {}
    assert informer.get(("ns", "x")) == {"kind": "Secret", "metadata": identity, "digest": ""}


# ---- the executor: the steps carried out -------------------------------------------------------


@pytest.fixture
def one_secret() -> Iterator[tuple[World, Any]]:
    """A fleet whose opted-in namespace holds the Secret hf-token on the manager, and the
    dispatcher's context over it (for the executor's tests)."""
    made, ctx = fleet([namespace(), secret("hf-token")])
    try:
        yield made, ctx
    finally:
        made.close()


def _ensure(ctx: Any, obj: Dict, owner: Dict = OWNER) -> bool | None:
    """One copy of the manager's `obj` written to worker1 by the executor, as a pass's plan
    asks (the skeleton from what the manager's cache holds of it)."""
    held = ctx.manager.get(dependencies.KINDS[obj["kind"]], obj["metadata"]["name"], "ns")
    kind = obj["kind"]
    content = {"kind": kind, **{k: held[k] for k in dependencies.CONTENT[kind] if k in held}}
    source = dependencies.Source(
        kind, obj["metadata"]["name"], held["metadata"]["uid"], dependencies.digest(content)
    )
    want = dependencies.skeleton(source, "ns", ctx.settings.origin, owner)
    return dependencies_io.ensure(ctx.workers, RemoteAction("worker1", "ensure", want))


def _no_turns(ctx: Any) -> None:
    ctx.workers.copies = copy_ledger.CopyLedger(per_second=1e-9, burst=32)
    while ctx.workers.copies.allowed("ns"):
        pass


def test_a_workers_own_runtime_is_judged_without_its_namespaces_turn() -> None:
    """A worker's own runtime of the copy's name is read against the manager's to judge it,
    which spends no copy refresh: served as it is while the namespace has none left."""
    made, ctx = fleet([OWN, namespace()], {"worker1": [copy.deepcopy(OWN)], "worker2": []})
    try:
        _no_turns(ctx)
        before = made.apis["worker1"].object(c.TRAINING_RUNTIME, "own", "ns")
        assert _ensure(ctx, OWN) is True
        assert made.apis["worker1"].object(c.TRAINING_RUNTIME, "own", "ns") == before
    finally:
        made.close()


@pytest.mark.parametrize(
    ("theirs", "result"),
    [(OWN, True), (secret("hf-token", "theirs"), False)],
    ids=["the worker's own runtime of the manager's spec", "anyone else's Secret"],
)
def test_an_object_not_ours_once_remembered_as_needing_a_write_spends_no_turn_again(
    theirs: Dict, result: bool
) -> None:
    """A copy remembered as needing a write (read while its namespace had no turn left, or
    ours deleted since) whose name now holds an object not ours: served as it is (the
    worker's own runtime of the manager's spec) or its name taken, and forgotten, so the
    passes after it read it without a turn instead of waiting for one."""
    made, ctx = fleet(
        [OWN, namespace(), secret("hf-token")], {"worker1": [copy.deepcopy(theirs)], "worker2": []}
    )
    try:
        where = ("worker1", "ns", f"{theirs['kind']}/{theirs['metadata']['name']}")
        ctx.workers.copies = copy_ledger.CopyLedger(per_second=1e-9, burst=1)
        ctx.workers.copies.note(where, "", [])  # what a held read of nothing remembers
        mine = OWN if theirs["kind"] == c.TRAINING_RUNTIME_KIND else secret("hf-token")
        assert _ensure(ctx, mine) is result  # the one turn spent on it
        assert not ctx.workers.copies.allowed("ns")
        assert _ensure(ctx, mine) is result  # none left, none needed
        assert not ctx.workers.copies.needs_write(where, "any", OWNER["uid"])
        kind, name = dependencies.KINDS[theirs["kind"]], theirs["metadata"]["name"]
        kept = made.get("worker1", kind, name)  # never written
        assert kept is not None and "ownerReferences" not in kept["metadata"]
        for key in dependencies.CONTENT[theirs["kind"]]:
            assert kept.get(key) == theirs.get(key)
    finally:
        made.close()


@pytest.mark.parametrize(
    ("there", "result"),
    [("ours", True), ("theirs", False)],
)
def test_a_copy_made_meanwhile_is_judged_as_found(
    there: str, result: bool, one_secret: tuple[World, Any]
) -> None:
    """The worker held nothing when read, then the create meets an object of the name (made
    meanwhile): ours is brought up to date in the same pass (owned by this job too), anyone
    else's is left as it is and the name noted as taken."""
    made, ctx = one_secret
    theirs = secret("hf-token", "theirs")
    if there == "ours":
        assert _ensure(ctx, secret("hf-token"), OTHER_OWNER) is True
    else:
        made.apis["worker1"].put(theirs)
    made.apis["worker1"].fail(Fault(404, "GET", "secrets"))  # the first read finds nothing
    assert _ensure(ctx, secret("hf-token")) is result
    kept = made.get("worker1", SECRET, "hf-token")
    assert kept is not None
    if there == "ours":
        owners = [o["uid"] for o in kept["metadata"]["ownerReferences"]]
        assert owners == [OTHER_OWNER["uid"], OWNER["uid"]]
    else:
        assert kept["data"] == theirs["data"] and "ownerReferences" not in kept["metadata"]
        assert ctx.workers.taken("worker1", "ns", "Secret/hf-token") is not None


def test_a_copy_found_in_place_is_remembered_and_not_read_again(
    one_secret: tuple[World, Any],
) -> None:
    """Our copy found on the worker holding what the job needs, owned by its Workload copy:
    in place, and noted so that the next pass asks the worker nothing."""
    made, ctx = one_secret
    assert _ensure(ctx, secret("hf-token")) is True  # made
    ctx.workers.copies = copy_ledger.CopyLedger(per_second=1.0, burst=32)  # a new leader
    worker = made.apis["worker1"]
    since = len(worker.requests)
    assert _ensure(ctx, secret("hf-token")) is True
    assert _ensure(ctx, secret("hf-token")) is True
    assert [m for m, p in worker.requests[since:] if p.endswith("/hf-token")] == ["GET"]


def _action(ctx: Any, obj: Dict, owner: Dict = OWNER) -> RemoteAction:
    """`_ensure`'s action, built apart so that the manager can change before it runs."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    held = ctx.manager.get(dependencies.KINDS[kind], name, "ns")
    content = {"kind": kind, **{k: held[k] for k in dependencies.CONTENT[kind] if k in held}}
    source = dependencies.Source(kind, name, held["metadata"]["uid"], dependencies.digest(content))
    want = dependencies.skeleton(source, "ns", ctx.settings.origin, owner)
    return RemoteAction("worker1", "ensure", want)


def _hf_requests(api: Any, since: int) -> list[str]:
    """The requests sent for the hf-token copy since `since` (a GET finding nothing aside)."""
    return [m for m, p in api.requests[since:] if p.endswith("/hf-token")]


def test_a_copy_is_marked_with_the_uid_of_the_object_read_not_the_one_the_cache_saw() -> None:
    step = dependencies.copy_step(
        _want(secret("hf-token")), None, _source(secret("hf-token"), uid="recreated")
    )
    assert isinstance(step, dependencies.Create)
    annotations = step.body["metadata"]["annotations"]
    assert annotations[c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION] == "recreated"


def test_a_source_that_cannot_be_read_is_tried_again_by_the_next_pass(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    action = _action(ctx, secret("hf-token"))
    made.apis["manager"].fail(Fault(403, "GET", "secrets"))  # once (429 and 5xx are retried)
    assert dependencies_io.ensure(ctx.workers, action) is None
    assert made.get("worker1", SECRET, "hf-token") is None
    assert dependencies_io.ensure(ctx.workers, action) is True


def test_a_source_gone_when_read_makes_no_copy_and_is_not_tried_again(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    action = _action(ctx, secret("hf-token"))
    made.apis["manager"].request("DELETE", SECRET.path("ns", "hf-token"))
    assert dependencies_io.ensure(ctx.workers, action) is False
    assert made.get("worker1", SECRET, "hf-token") is None


def test_a_copy_deleted_before_its_update_is_tried_again_not_a_missing_namespace(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    assert _ensure(ctx, secret("hf-token")) is True
    made.apis["manager"].put(secret("hf-token", "rotated"))
    made.apis["worker1"].fail(Fault(404, "PUT", "secrets"))
    assert _ensure(ctx, secret("hf-token")) is None
    assert _ensure(ctx, secret("hf-token")) is True
    kept = made.get("worker1", SECRET, "hf-token")
    assert kept is not None and kept["data"] == {"token": _b64("rotated")}


def test_a_copy_read_while_its_namespace_waits_still_serves_the_jobs_that_own_it(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    assert _ensure(ctx, secret("hf-token"), OTHER_OWNER) is True
    _no_turns(ctx)  # a new leader whose namespace has no turn left
    assert _ensure(ctx, secret("hf-token")) is None  # read once, remembered as found
    worker = made.apis["worker1"]
    since = len(worker.requests)
    assert _ensure(ctx, secret("hf-token"), OTHER_OWNER) is True  # its owner: no wait
    assert _hf_requests(worker, since) == []


def test_a_copy_made_or_brought_up_to_date_is_remembered_and_not_read_again(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    worker = made.apis["worker1"]
    assert _ensure(ctx, secret("hf-token")) is True  # made
    since = len(worker.requests)
    assert _ensure(ctx, secret("hf-token")) is True
    made.apis["manager"].put(secret("hf-token", "rotated"))
    assert _ensure(ctx, secret("hf-token")) is True  # brought up to date
    assert _ensure(ctx, secret("hf-token")) is True
    assert _hf_requests(worker, since) == ["GET", "PUT"]


def test_a_copy_found_in_place_is_remembered_with_all_its_owners(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    assert _ensure(ctx, secret("hf-token"), OTHER_OWNER) is True
    assert _ensure(ctx, secret("hf-token")) is True  # owned by both
    ctx.workers.copies = copy_ledger.CopyLedger(per_second=1.0, burst=32)  # a new leader
    worker = made.apis["worker1"]
    since = len(worker.requests)
    assert _ensure(ctx, secret("hf-token")) is True
    assert _ensure(ctx, secret("hf-token"), OTHER_OWNER) is True
    assert _hf_requests(worker, since) == ["GET"]


def test_a_copy_made_and_deleted_meanwhile_is_made_by_the_next_pass(
    one_secret: tuple[World, Any],
) -> None:
    made, ctx = one_secret
    made.apis["worker1"].fail(Fault(409, "POST", "secrets"))  # made meanwhile, then gone
    assert _ensure(ctx, secret("hf-token")) is None
    assert ctx.workers.taken("worker1", "ns", "Secret/hf-token") is None
    assert made.get("worker1", SECRET, "hf-token") is None
    assert _ensure(ctx, secret("hf-token")) is True
    assert made.get("worker1", SECRET, "hf-token") is not None


def test_fields_of_the_wrong_type_name_nothing_and_the_rest_is_found_where_it_is() -> None:
    """A pod template is the tenant's, and the CRDs leave it open: a list that is not one, an
    entry or a source that is not an object, names nothing (never an exception in the pass),
    and what is well formed beside it is found at its own index."""
    pod = {
        "initContainers": "not a list",
        "containers": [
            None,
            {"env": 5, "envFrom": {"secretRef": {"name": "x"}}},
            {"env": ["A", {"valueFrom": "s"}, {"valueFrom": {"secretKeyRef": {"name": "s"}}}]},
            {"envFrom": [{"configMapRef": {"name": "first"}}, {"secretRef": {"name": "second"}}]},
        ],
        "volumes": [
            {"name": "v0", "projected": "x", "secret": ["s"]},
            {"name": "v1", "projected": {"sources": {"secret": {"name": "no"}}}},
            {"name": "v2", "projected": {"sources": [3, {"configMap": {"name": "cm"}}]}},
            {"name": "v3", "configMap": {"name": "mounted", "optional": True}},
        ],
        "imagePullSecrets": [None, {"name": "pull"}],
    }
    refs = references([{"name": "node", "template": {"spec": pod}}])
    where = "spec.podSets[node].template.spec"
    assert refs == [
        Ref("Secret", "s", False, f"{where}.containers[2].env[2].valueFrom.secretKeyRef"),
        Ref("ConfigMap", "first", False, f"{where}.containers[3].envFrom[0].configMapRef"),
        Ref("Secret", "second", False, f"{where}.containers[3].envFrom[1].secretRef"),
        Ref("ConfigMap", "cm", False, f"{where}.volumes[2].projected.sources[1].configMap"),
        Ref("ConfigMap", "mounted", True, f"{where}.volumes[3].configMap"),
        Ref("Secret", "pull", False, f"{where}.imagePullSecrets[1]"),
    ]


def test_a_copys_owner_is_the_workload_copy_that_needs_it() -> None:
    workload = ObjectView({"metadata": {"name": "wl", "namespace": "ns", "uid": "u"}})
    assert dependencies.owner_of(workload) == {
        "apiVersion": c.KUEUE_API,
        "kind": "Workload",
        "name": "wl",
        "uid": "u",
    }


def test_whether_a_workers_runtime_serves_as_it_is_is_kept_per_object_not_per_version() -> None:
    """Two workers' runtimes of one resourceVersion (each API server counts its own) and
    another spec: each is judged on its own, never on the other's kept answer."""
    source = ObjectView(
        {**make_runtime("own", kind=c.TRAINING_RUNTIME_KIND), "kind": c.TRAINING_RUNTIME_KIND}
    )
    edit(source.raw).uid("manager").resource_version("3")
    same = edit(copy.deepcopy(source.raw)).uid("a").resource_version("5").obj()
    other = edit(make_runtime("own", ml_policy={"numNodes": 7})).uid("b").resource_version("5")
    assert dependencies.usable_as_is(ObjectView(same), source)
    assert not dependencies.usable_as_is(ObjectView(other.obj()), source)
