"""Events (plugin/kubebase/events.py): the core/v1 Event for what a plan records, as
`kubectl describe` shows it and client-go would have made it."""

from __future__ import annotations

import pytest

from kubebase.events import build_event

TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "tj", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
}
NOW = "2026-12-04T10:00:00Z"


def test_an_event_about_an_object_names_it_whole() -> None:
    event = build_event(TRAINJOB, "Warning", "RuntimeInvalid", "bad", "dispatcher", NOW)
    assert event == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "tj.", "namespace": "ns"},
        "involvedObject": {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
        },
        "type": "Warning",
        "reason": "RuntimeInvalid",
        "message": "bad",
        "source": {"component": "dispatcher"},
        "reportingComponent": "dispatcher",
        "reportingInstance": "dispatcher",
        "firstTimestamp": NOW,
        "lastTimestamp": NOW,
        "count": 1,
    }


def test_a_named_event_is_made_once_only() -> None:
    event = build_event(TRAINJOB, "Normal", "Started", "m", "c", NOW, name="tj.started.u1")
    assert event["metadata"] == {"name": "tj.started.u1", "namespace": "ns"}


def test_an_event_about_a_cluster_scoped_object_lives_in_default() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    event = build_event(node, "Normal", "Seen", "m", "c", NOW)
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"]["namespace"] is None


def test_a_long_message_is_cut_to_what_the_api_keeps() -> None:
    """A message holds what a tenant wrote (a runtime's field, a pod's log tail): it is cut
    to 1 KiB (events.k8s.io's limit for a note), so a tenant's string never makes an Event
    large."""
    event = build_event(TRAINJOB, "Warning", "R", "x" * 5000, "c", NOW)
    assert event["message"] == "x" * 1024


def test_a_message_of_many_byte_characters_is_cut_by_its_bytes_on_a_character() -> None:
    event = build_event(TRAINJOB, "Warning", "R", "é" * 1000, "c", NOW)  # 2 bytes each
    assert event["message"] == "é" * 512 and len(event["message"].encode()) == 1024
    odd = build_event(TRAINJOB, "Warning", "R", "a" + "€" * 400, "c", NOW)  # 1 + 3 bytes each
    assert odd["message"] == "a" + "€" * 341 and len(odd["message"].encode()) == 1024
    short = "ünïcødé"
    assert build_event(TRAINJOB, "Warning", "R", short, "c", NOW)["message"] == short


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("a" + "é" * 1000, "a" + "é" * 511),  # byte 1024 is the first half of an é
        ("€" * 400, "€" * 341),  # ... the first third of a €
        ("ab" + "\U0001f600" * 300, "ab" + "\U0001f600" * 255),  # ... half of a 4-byte emoji
        ("x" * 1023 + "\U0001f600", "x" * 1023),  # a lone byte's room is no character
    ],
)
def test_a_character_the_limit_falls_inside_is_dropped_whole(message: str, kept: str) -> None:
    """Where the 1 KiB limit falls inside a character, the character goes: no half of it and
    no replacement character are kept."""
    assert build_event(TRAINJOB, "Warning", "R", message, "c", NOW)["message"] == kept
