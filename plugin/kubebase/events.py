"""Events: what a plan asks to record, and the core/v1 Event object for it. Pure."""

from __future__ import annotations

from typing import NamedTuple

from kubebase.objects import Dict


class Event(NamedTuple):
    """An Event a plan records on its object once its writes are done."""

    type: str  # Normal | Warning
    reason: str
    message: str
    name: str | None = None  # an Event recorded once only (`build_event`)


# An Event's message is kept to 1 KiB (events.k8s.io's limit for a note), counted in bytes of
# UTF-8 as the API server counts a string's length.
MESSAGE_BYTES = 1024


def _cut(text: str, most: int) -> str:
    """`text` in at most `most` bytes of UTF-8, never a character cut in two."""
    data = text.encode()
    return text if len(data) <= most else data[:most].decode(errors="ignore")


def build_event(
    obj: Dict,
    etype: str,
    reason: str,
    message: str,
    component: str,
    now: str,
    name: str | None = None,
) -> Dict:
    """A core/v1 Event about `obj` (what `kubectl describe` shows); `name`, when given, makes
    it once only (a second create of the same name is refused)."""
    meta = obj["metadata"]
    naming = {"name": name} if name else {"generateName": f"{meta['name']}."}
    # An Event about a cluster-scoped object lives in "default", as client-go records it.
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**naming, "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": etype,
        "reason": reason,
        "message": _cut(message, MESSAGE_BYTES),
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
