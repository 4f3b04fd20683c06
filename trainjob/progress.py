"""Training progress as Kubeflow Trainer defines it (its TrainJobStatus feature, KEP-2779),
the pure parts: where a TrainJob's pods report (the path and the token audience), what the
pods are given to do so (three environment variables and one projected volume holding a
token for that audience and the CA of the server's certificate), what a report may hold, the
status patch it becomes, and how often one is written.

The names, path, audience and payload are Trainer's, so a script written for Trainer (the
Kubeflow SDK's `update_trainjob_status`, HuggingFace Transformers' callback, a raw POST)
reports here unchanged.
"""

from __future__ import annotations

import base64
import datetime as dt
import threading
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson

from kubebase.objects import Dict
from kubebase.shares import Rates
from trainjob.runtime import PodSet
from trainjob_api import constants as c

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
TOKEN_FILE = "token"
CA_FILE = "ca.crt"
VOLUME = "kubeflow-trainer-token"
TOKEN_SECONDS = 3600  # the projected token's life; the kubelet renews it before it ends

MAX_REPORT_BYTES = 64 * 1024  # as Trainer's server
MAX_METRICS = 256
MAX_METRIC_CHARS = 64
INT32_MAX = 2**31 - 1
FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


def status_path(namespace: str, name: str) -> str:
    """The path a TrainJob's pods POST their reports to."""
    return f"/apis/{c.TRAINER_API}/namespaces/{namespace}/trainjobs/{name}/status"


def audience(namespace: str, name: str) -> str:
    """The audience a report's token must be issued for: one TrainJob's, so a token given to
    the pods of one TrainJob is refused for any other."""
    return f"{c.TRAINER_API}/namespaces/{namespace}/trainjobs/{name}/status"


def ca_config_map_name(trainjob: str) -> str:
    """The ConfigMap, in the TrainJob's namespace, that hands the server's CA to its pods."""
    return f"{trainjob}-tls-config"


# ---- what the pods are given --------------------------------------------------------------


@dataclass(frozen=True)
class Wiring:
    """Where this cluster's server is (its base URL) and the PEM of the CA its pods trust."""

    base_url: str
    ca_pem: str

    def url(self, namespace: str, trainjob: str) -> str:
        return self.base_url + status_path(namespace, trainjob)


def ca_config_map(namespace: str, trainjob: str, ca_pem: str) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ca_config_map_name(trainjob), "namespace": namespace},
        "data": {CA_FILE: ca_pem},
    }


def wire(pod_sets: list[PodSet], url: str, namespace: str, trainjob: str) -> None:
    """Give every container of the trainer PodSets (the runtime's replicatedJobs labelled
    as the trainer step) the server's URL, and the token and CA files in a projected volume.
    What the runtime set under the same names is replaced, as Trainer does."""
    env = [
        {"name": ENV_URL, "value": url},
        {"name": ENV_CA_CERT, "value": f"{MOUNT_PATH}/{CA_FILE}"},
        {"name": ENV_TOKEN, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    volume = {
        "name": VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": audience(namespace, trainjob),
                        "expirationSeconds": TOKEN_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                {
                    "configMap": {
                        "name": ca_config_map_name(trainjob),
                        "items": [{"key": CA_FILE, "path": CA_FILE}],
                    }
                },
            ]
        },
    }
    for ps in pod_sets:
        if ps.role != c.STEP_TRAINER:
            continue
        spec = ps.pod_template.setdefault("spec", {})
        for container in spec.get("containers") or []:
            container["env"] = _upsert(container.get("env"), env)
            container["volumeMounts"] = _upsert(container.get("volumeMounts"), [mount])
        spec["volumes"] = _upsert(spec.get("volumes"), [volume])


def _upsert(have: list[Dict] | None, want: list[Dict]) -> list[Dict]:
    names = {w["name"] for w in want}
    return [*(h for h in have or [] if h.get("name") not in names), *want]


# ---- what a report may hold ---------------------------------------------------------------


class BadReport(Exception):
    """A report refused: the HTTP code, the Status reason, and a message naming the field."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def _invalid(message: str) -> BadReport:
    return BadReport(422, "Invalid", message)


class Metric(TypedDict):
    name: str
    value: str


class TrainerStatus(TypedDict, total=False):
    """A report as `parse_report` passes it: Trainer's `trainerStatus`, checked, in its
    stored form (`lastUpdatedTime` always given)."""

    progressPercentage: int
    estimatedRemainingSeconds: int
    metrics: list[Metric]
    lastUpdatedTime: str


def parse_report(body: bytes) -> TrainerStatus | None:
    """The report's `trainerStatus`, checked against Trainer's schema and in its stored form
    (lastUpdatedTime in RFC 3339 UTC seconds); None when the report has none (answered, and
    nothing written, as Trainer does). Unknown fields are ignored, as Go's decoder does."""
    if len(body) > MAX_REPORT_BYTES:
        raise BadReport(
            413, "RequestEntityTooLarge", f"a report is at most {MAX_REPORT_BYTES} bytes"
        )
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReport(400, "BadRequest", f"the report is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadReport(400, "BadRequest", "the report must be a JSON object {trainerStatus: ...}")
    status = doc.get("trainerStatus")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise _invalid("trainerStatus: must be an object")
    percent = _count("progressPercentage", status.get("progressPercentage"), 100)
    seconds = _count(
        "estimatedRemainingSeconds", status.get("estimatedRemainingSeconds"), INT32_MAX
    )
    metrics = _metrics(status.get("metrics"))
    when = _time(status.get("lastUpdatedTime"))
    out = TrainerStatus()  # in Trainer's order of the fields (FIELDS)
    if percent is not None:
        out["progressPercentage"] = percent
    if seconds is not None:
        out["estimatedRemainingSeconds"] = seconds
    if metrics:
        out["metrics"] = metrics
    out["lastUpdatedTime"] = when
    return out


def _count(key: str, value: Any, top: int) -> int | None:
    """The report's count `key`, from 0 to `top` (None: not given)."""
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value <= top:
        raise _invalid(f"trainerStatus.{key}: must be an integer from 0 to {top}, got {value!r}")
    count: int = value
    return count


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _metrics(value: Any) -> list[Metric]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _invalid("trainerStatus.metrics: must be a list of {name, value}")
    if len(value) > MAX_METRICS:
        raise _invalid(f"trainerStatus.metrics: at most {MAX_METRICS} items, got {len(value)}")
    out = []
    for i, metric in enumerate(value):
        if not isinstance(metric, dict):
            raise _invalid(f"trainerStatus.metrics[{i}]: must be an object {{name, value}}")
        name, text = (_metric_text(f"{i}].{key}", metric.get(key)) for key in ("name", "value"))
        out.append(Metric(name=name, value=text))
    return out


def _metric_text(where: str, text: Any) -> str:
    """A metric's name or value (`where`: its index and field)."""
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_METRIC_CHARS:
        raise _invalid(
            f"trainerStatus.metrics[{where}: must be a string of 1 to {MAX_METRIC_CHARS} characters"
        )
    return text


def _time(value: Any) -> str:
    if value is None:
        raise _invalid("trainerStatus.lastUpdatedTime: is required when trainerStatus is present")
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise _invalid(
            f"trainerStatus.lastUpdatedTime: must be an RFC 3339 time, got {str(value)[:64]!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    try:
        when = when.astimezone(dt.UTC)
    except OverflowError:  # an offset that takes it past year 1 or 9999
        raise _invalid(
            f"trainerStatus.lastUpdatedTime: out of range, got {str(value)[:64]!r}"
        ) from None
    # the year in four digits, as RFC 3339 (and the CRD's date-time) has it: %Y gives 999
    return f"{when.year:04d}-{when:%m-%dT%H:%M:%S}Z"


def status_patch(trainer_status: TrainerStatus) -> Dict:
    """The merge patch that makes `status.trainerStatus` the report: a field the report leaves
    out is removed (the report replaces the last one, as Trainer's apply does)."""
    return {"status": {"trainerStatus": {f: trainer_status.get(f) for f in FIELDS}}}


# ---- the token, before anyone is asked about it --------------------------------------------


@dataclass(frozen=True)
class Claims:
    """What a token says of itself: when it expires (seconds since the epoch; None: it does
    not say) and its audiences."""

    expires: float | None
    audiences: list[str]


def claims(token: str) -> Claims | None:
    """A JWT's claims, read without checking its signature (the API server checks that):
    enough to turn away, without asking anyone, a token that is not one, has expired or is
    for another audience."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        found = orjson.loads(payload)
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(found, dict):
        return None
    exp, aud = found.get("exp"), found.get("aud")
    expires = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
    if isinstance(aud, str):
        return Claims(expires, [aud])
    return Claims(expires, [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else [])


# ---- how often a TrainJob's reports are written ---------------------------------------------


@dataclass
class _Slot:
    written: float  # when the last report of this TrainJob was written (monotonic seconds)
    held: TrainerStatus | None = None  # the newest report since, waiting for its turn


@dataclass
class Offer:
    write: bool  # write this report now
    flush_in: float | None = None  # a report is held: take it (`Throttle.take`) after this long


class Full(Exception):
    """More TrainJobs report at once than the throttle keeps."""


# The writes of one namespace's TrainJobs together: on average, and at once. A namespace
# with more TrainJobs reporting than this allows has each written less often (its reports
# wait their turn, the newest kept), so one tenant's count of TrainJobs never sets the
# status writes every other tenant's share of the API servers pays for.
NAMESPACE_WRITES_PER_SECOND = 10.0
NAMESPACE_WRITES_BURST = 50
RETRY_SECONDS = 1.0  # a report held for its namespace's budget is tried again after this


@dataclass
class Throttle:
    """At most one write per `interval` seconds for each TrainJob, and at most
    `namespace_rate` a second for all of a namespace's. A report that comes sooner is held
    until its turn and replaced by any later one, so the newest report is always written, at
    most `interval` late (later when its namespace writes more than its share); a chatty pod
    costs the API servers nothing more."""

    interval: float
    limit: int = 10_000
    namespace_rate: float = NAMESPACE_WRITES_PER_SECOND
    namespace_burst: int = NAMESPACE_WRITES_BURST
    _slots: dict[tuple[str, str], _Slot] = field(default_factory=dict)
    _budgets: Rates = field(init=False)
    # Reports come to two listeners (the progress port, and the webhook port for pods of an
    # older version), each on an event loop of its own thread.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._budgets = Rates(self.namespace_rate, self.namespace_burst)

    def offer(self, key: tuple[str, str], report: TrainerStatus, now: float) -> Offer:
        with self._lock:
            return self._offer(key, report, now)

    def _offer(self, key: tuple[str, str], report: TrainerStatus, now: float) -> Offer:
        slot = self._slots.get(key)
        if slot is None or (slot.held is None and now - slot.written >= self.interval):
            if slot is None and len(self._slots) >= self.limit:
                self._forget(now)
                if len(self._slots) >= self.limit:
                    raise Full(f"{self.limit} TrainJobs report at once")
            if self._budgets.take(key[0], now):
                self._slots[key] = _Slot(written=now)
                return Offer(write=True)
            # its namespace has written its share: held, as if not its turn yet
            slot = self._slots.setdefault(key, _Slot(written=now - self.interval))
            slot.held = report
            return Offer(write=False, flush_in=RETRY_SECONDS)
        first = slot.held is None
        slot.held = report
        return Offer(
            write=False, flush_in=max(0.0, slot.written + self.interval - now) if first else None
        )

    def take(self, key: tuple[str, str], now: float) -> TrainerStatus | None:
        """The report held for `key`, now due (its turn is taken), or None: nothing held, or
        its namespace's share taken (`holds` says, and it is tried again after
        RETRY_SECONDS)."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None or slot.held is None or not self._budgets.take(key[0], now):
                return None
            report, slot.held, slot.written = slot.held, None, now
            return report

    def holds(self, key: tuple[str, str]) -> bool:
        with self._lock:
            slot = self._slots.get(key)
            return slot is not None and slot.held is not None

    def _forget(self, now: float) -> None:
        for key, slot in list(self._slots.items()):
            if slot.held is None and now - slot.written >= self.interval:
                del self._slots[key]

    def __len__(self) -> int:
        return len(self._slots)
