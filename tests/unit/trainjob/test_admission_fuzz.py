"""A property-based fuzzer over the pure code a tenant's objects reach: TrainJobs and
TrainingRuntimes generated from our own CRDs' schemas (`strategy`, below) go through the
webhooks' rules (trainjob/admission.py), the runtime framework, the Kueue Workload build and
the worker controller's decision. Whatever the input, each answers (a refusal, a problem, a
plan) and raises nothing else.

The schemas are the CRDs' openAPIV3Schema as the API server applies them before any webhook:
unknown fields pruned, but the CEL rules (x-kubernetes-validations) left out, so the fuzzer
also sends what only a CEL rule would refuse. FUZZ_EXAMPLES (default 700 per property) sets
the depth: `FUZZ_EXAMPLES=5000 pytest tests/unit/trainjob/test_admission_fuzz.py` for a long run.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.builders import edit, make_runtime, mpi_runtime
from tests.support.files import YAML_LOADER
from trainjob import admission
from trainjob.models import InvalidObject, parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob.workload import build_workload
from trainjob_api import constants as c
from trainjob_api.views import RuntimeView, TrainJobView
from worker_controller.decide import Observed, Plan, decide, parse

Dict = dict[str, Any]
CRDS = Path(__file__).resolve().parents[3] / "crds"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "700"))
NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=os.environ.get("CI") == "true",  # CI runs the same inputs every time
)

# Words the code under test looks for, so that open objects (pod templates, runtime
# specs) often hold what it reads, beside random keys and values.
_WORDS = [
    "spec", "template", "metadata", "labels", "annotations", "containers", "initContainers",
    "name", "node", "launcher", "trainer", "image", "command", "env", "value", "resources",
    "requests", "limits", "cpu", "memory", "nvidia.com/gpu", "volumeMounts", "volumes",
    "mountPath", "parallelism", "completions", "replicas", "successPolicy", "operator",
    "targetReplicatedJobs", "nodeSelector", "tolerations", "dataset-initializer",
    "model-initializer", "trainer.kubeflow.org/trainjob-ancestor-step",
    "kueue.x-k8s.io/podset-required-topology", "claims", "persistentVolumeClaim",
    "volumeClaimPolicies", "templates", "retentionPolicy", "whenDeleted", "Delete",
    "1e5000", "-1", "0", "500m", "4Gi", "auto", "", "x" * 70,
]  # fmt: skip
_SCALARS = st.one_of(
    st.sampled_from(_WORDS),
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_KEYS = st.one_of(st.sampled_from(_WORDS), st.text(max_size=8))
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)


def strategy(schema: Dict) -> st.SearchStrategy[Any]:
    """Values an OpenAPI v3 structural schema admits, as the API server's schema checks them
    before any webhook: types, enums, bounds, patterns and required fields; objects without
    x-kubernetes-preserve-unknown-fields hold only their properties (the API server prunes
    the rest); the CEL rules are left out. Lists and maps are kept short."""
    if "anyOf" in schema:
        return st.one_of([strategy(alt) for alt in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        return _object(schema)
    if kind == "array":
        items = strategy(schema.get("items") or {})
        low = int(schema.get("minItems", 0))
        return st.lists(
            items, min_size=low, max_size=max(low, min(int(schema.get("maxItems", 3)), 3))
        )
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        low, high = int(schema.get("minLength", 0)), int(schema.get("maxLength", 80))
        if "pattern" in schema:
            text = st.from_regex(schema["pattern"], fullmatch=True)
        else:
            text = st.one_of(st.sampled_from(_WORDS), st.text(max_size=min(high, 40)))
        return text.filter(lambda v: low <= len(v) <= high)
    if kind == "integer":
        return st.integers(
            min_value=schema.get("minimum", -(2**31)), max_value=schema.get("maximum", 2**31)
        )
    if kind == "boolean":
        return st.booleans()
    if schema.get("x-kubernetes-int-or-string"):
        return st.one_of(st.integers(), st.sampled_from(_WORDS))
    return _JSON


def _object(schema: Dict) -> st.SearchStrategy[Any]:
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    if not props:
        if isinstance(extra, dict):
            return st.dictionaries(_KEYS, strategy(extra), max_size=3)
        return st.dictionaries(_KEYS, _JSON, max_size=4)
    required = set(schema.get("required") or [])
    fields = {k: strategy(v) for k, v in props.items() if k in required}
    optional = {k: strategy(v) for k, v in props.items() if k not in required}
    known = st.fixed_dictionaries(fields, optional=optional)
    if not schema.get("x-kubernetes-preserve-unknown-fields"):
        return known
    return st.tuples(known, st.dictionaries(_KEYS, _JSON, max_size=2)).map(
        lambda both: {**both[1], **both[0]}
    )


_METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["name"],
}


def _crd_strategy(file: str) -> st.SearchStrategy[Any]:
    crd = yaml.load((CRDS / file).read_text(), Loader=YAML_LOADER)
    schema = dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    props = {k: v for k, v in schema["properties"].items() if k in ("spec",)}
    schema = {**schema, "properties": {**props, "metadata": _METADATA}}
    schema["required"] = ["metadata", "spec"]
    return strategy(schema)


def _stored(body: Dict, kind: str) -> Dict:
    """The object as the API server would hand it to a controller."""
    meta = {**body["metadata"], "namespace": "ns", "uid": "uid-fuzz", "resourceVersion": "1"}
    return {**body, "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": meta}


TRAINJOBS = _crd_strategy("trainer.kubeflow.org_trainjobs.yaml").map(
    lambda b: _stored(b, "TrainJob")
)
RUNTIMES = _crd_strategy("trainer.kubeflow.org_trainingruntimes.yaml").map(
    lambda b: _stored(b, "TrainingRuntime")
)


# Runtimes people run (examples/ and the suite's own), beside generated ones: a generated
# runtime is almost always refused, so on its own it leaves the framework's and the Workload
# build's paths for a runnable pair nearly untried.
_KNOWN_RUNTIMES = [
    _stored({"metadata": d["metadata"], "spec": d["spec"]}, "TrainingRuntime")
    for path in sorted((CRDS.parent / "examples").rglob("*.yaml"))
    for d in yaml.safe_load_all(path.read_text())
    if d and d.get("kind") in ("ClusterTrainingRuntime", "TrainingRuntime")
] + [_stored(make_runtime(), "TrainingRuntime"), _stored(mpi_runtime(), "TrainingRuntime")]
PAIRED_RUNTIMES = st.one_of(RUNTIMES, st.sampled_from(_KNOWN_RUNTIMES))


def _named_by(trainjob: Dict, runtime: Dict) -> Dict:
    """The runtime under the name and kind the TrainJob's runtimeRef gives."""
    ref = trainjob["spec"]["runtimeRef"]
    kind = ref.get("kind", "ClusterTrainingRuntime")
    return {**runtime, "kind": kind, "metadata": {**runtime["metadata"], "name": ref["name"]}}


@FUZZ
@given(TRAINJOBS, st.one_of(st.none(), RUNTIMES), st.booleans())
def test_the_webhooks_rules_answer_every_trainjob(
    trainjob: Dict, runtime: Dict | None, multikueue: bool
) -> None:
    named = RuntimeView(_named_by(trainjob, runtime)) if runtime is not None else None
    under = admission.Admitted({"object": trainjob, "namespace": "ns"})
    why = admission.runtime_refusal(under, named)
    assert why is None or (isinstance(why, str) and why)
    changes = admission.mutate_on_create(under, NOW, multikueue_queue=multikueue, queue="q")
    admission.trainjob_patch(under, changes, queue="q")


# How far the generated pairs got in the test below: a fuzzer whose inputs are all refused
# at the first step tests nothing after it.
REACHED: Counter[str] = Counter()
# Shares of the pairs that must reach each step (measured at 700 examples: parsed 100%,
# resolved and built 22-25% when this module runs alone, 15% inside the whole suite's run
# with the same seed; with generated runtimes alone, 3%).
FLOORS = {"parsed": 0.9, "resolved": 0.1, "built": 0.1}


@FUZZ
@given(TRAINJOBS, PAIRED_RUNTIMES)
def _framework_and_workload(trainjob: Dict, runtime: Dict) -> None:
    REACHED["pairs"] += 1
    try:
        tj = parse_trainjob(trainjob)
    except InvalidObject:
        return  # a refusal naming the field (the API server's schema would refuse it too)
    REACHED["parsed"] += 1
    info, problem = resolve_runtime_info(tj, RuntimeView(_named_by(trainjob, runtime)))
    assert (info is None) != (problem is None)
    if info is not None:
        REACHED["resolved"] += 1
        build_workload(tj, info, "q")
        REACHED["built"] += 1


def test_the_runtime_framework_and_the_workload_build_answer_every_pair() -> None:
    """Every pair is answered (a refusal naming the field, or a Workload); enough of them get
    past parsing into the runtime framework and the Workload build to test those."""
    REACHED.clear()
    _framework_and_workload()
    pairs = REACHED["pairs"]
    shares = {step: REACHED[step] / pairs for step in FLOORS}
    print(f"[figure] fuzz: {pairs} pairs; " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    assert pairs >= min(EXAMPLES, 100), REACHED
    low = {step: share for step, share in shares.items() if share < FLOORS[step]}
    assert not low, f"too few pairs reach {low} (floors {FLOORS})"


DECIDED: Counter[str] = Counter()
# Shares of the pairs whose plan makes the TrainJob's Jobs (measured at 700 examples: see the
# figure this prints); generated runtimes alone reach them about 3% of the time.
JOBS_FLOOR = 0.1


@FUZZ
@given(TRAINJOBS, PAIRED_RUNTIMES)
def _worker_decisions(trainjob: Dict, runtime: Dict) -> None:
    trainjob = edit({**trainjob, "spec": {**trainjob["spec"]}}).spec(managedBy=None).obj()
    # every generated body shares one uid: without a resourceVersion, no earlier one serves
    unversioned = {**trainjob, "metadata": {**trainjob["metadata"], "resourceVersion": None}}
    parsed = parse(TrainJobView(unversioned))  # the pass's boundary
    if isinstance(parsed, Plan):  # one Warning naming the field, and nothing else
        (said,) = parsed.events
        assert (said.type, said.reason) == ("Warning", c.EVENT_INVALID_TRAINJOB), said
        assert said.message.startswith("invalid TrainJob: ") and len(said.message) < 2000
        assert parsed == Plan(events=[said])
        return
    observed = Observed(
        trainjob=parsed,
        runtime=RuntimeView(_named_by(trainjob, runtime)),
        jobs={},
        services=[],
        service_named=None,
        now=NOW,
        pods=[],
    )
    plan = decide(observed)
    DECIDED["pairs"] += 1
    assert plan.status is not None or plan.events or plan.create or plan.patch
    uid = trainjob["metadata"].get("uid")
    assert plan.patch == [] and plan.delete == []  # no Job there to change
    for made in plan.create:
        # whatever the pair, what the plan makes is the TrainJob's own, in its namespace: owned
        # by it, or a claim kept past it (a runtime's retentionPolicy) marked as made for it
        owners = [o.get("uid") for o in made["metadata"].get("ownerReferences") or ()]
        kept = (made["metadata"].get("annotations") or {}).get(c.CLAIM_MADE_FOR_ANNOTATION)
        if made["kind"] == "PersistentVolumeClaim" and not owners:
            assert kept == f"{trainjob['metadata']['namespace']}/{trainjob['metadata']['name']}"
        else:
            owned = made["metadata"].get("ownerReferences") or []
            assert [o.get("uid") for o in owned if o.get("controller")] == [uid], made["kind"]
        assert made["metadata"].get("namespace") == trainjob["metadata"]["namespace"]
    if any(o["kind"] == "Job" for o in plan.create):
        DECIDED["jobs"] += 1


def test_the_worker_controllers_decision_answers_every_pair_and_makes_jobs_often() -> None:
    """Every pair gets a plan; what it makes is owned by the TrainJob, in its namespace; and
    enough pairs get as far as the Jobs to test the run path."""
    DECIDED.clear()
    _worker_decisions()
    share = DECIDED["jobs"] / DECIDED["pairs"]
    print(f"[figure] worker decisions: {DECIDED['pairs']} pairs; Jobs made {share:.0%}")
    assert DECIDED["pairs"] >= min(EXAMPLES, 100), DECIDED
    assert share >= JOBS_FLOOR, f"only {share:.0%} of the pairs make Jobs ({JOBS_FLOOR:.0%})"
