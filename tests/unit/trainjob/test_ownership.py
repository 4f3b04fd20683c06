"""Is this ours? (trainjob/ownership.py): each answer against what a stranger could write
into an object to be taken for ours."""

from __future__ import annotations

from typing import Any

import pytest

from kubebase.objects import Dict
from trainjob.ownership import (
    controlled_by,
    controlled_by_a_trainjob,
    controller_ref,
    controller_uid,
    has_owner,
    is_dependency_copy,
    is_our_copy,
    made_for,
    made_for_trainjob,
    managed_by_builtin,
    origin_uid,
)
from trainjob_api import constants as c
from trainjob_api.views import ObjectView

TJ_API = "trainer.kubeflow.org/v1alpha1"
TRAINJOB = {"metadata": {"name": "tj", "namespace": "ns", "uid": "uid-tj"}}


def ref(
    uid: str, controller: bool | None = True, kind: str = "TrainJob", api: str = TJ_API
) -> Dict:
    out: Dict = {"apiVersion": api, "kind": kind, "name": "x", "uid": uid}
    if controller is not None:
        out["controller"] = controller
    return out


def obj(
    *refs: Any, kind: str = "Job", labels: Dict | None = None, annotations: Dict | None = None
) -> Dict:
    meta: Dict = {"name": "x", "namespace": "ns"}
    if refs:
        meta["ownerReferences"] = list(refs)
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"kind": kind, "metadata": meta}


@pytest.mark.parametrize(
    ("found", "controlled", "owner", "uid", "trainjobs"),
    [
        (obj(ref("uid-tj")), True, True, "uid-tj", True),
        (obj(ref("uid-tj", controller=False)), False, True, None, False),  # an owner only
        (obj(ref("uid-tj", controller=None)), False, True, None, False),
        (obj(ref("other"), ref("uid-tj", controller=False)), False, True, "other", True),
        (obj(ref("uid-tj", kind="JobSet")), True, True, "uid-tj", False),  # by UID, any kind
        (obj(ref("uid-tj", api="evil.example/v1")), True, True, "uid-tj", False),
        (obj(ref("uid-tj", api="trainer.kubeflow.org.evil/v1")), True, True, "uid-tj", False),
        (obj(ref("")), False, False, None, True),  # a reference without its UID names no one
        (obj(ref("uid-other")), False, False, "uid-other", True),
        (obj(), False, False, None, False),
        (obj("not-a-reference"), False, False, None, False),  # a stranger's garbage
        ({"metadata": {"ownerReferences": "uid-tj"}}, False, False, None, False),
        ({}, False, False, None, False),
    ],
)
def test_owner_references(
    found: Dict, controlled: bool, owner: bool, uid: str | None, trainjobs: bool
) -> None:
    assert controlled_by(found, "uid-tj") is controlled
    assert has_owner(found, "uid-tj") is owner
    assert controller_uid(found) == uid
    assert controlled_by_a_trainjob(found) is trainjobs


def test_the_controller_is_the_first_reference_that_says_so() -> None:
    owner, controller = ref("uid-a", controller=False), ref("uid-b")
    assert controller_ref(obj(owner, controller, ref("uid-c"))) is controller
    assert controller_ref(obj(owner)) is None and controller_ref(obj("garbage")) is None
    assert controller_ref(None) is None


def test_an_empty_uid_names_nothing() -> None:
    """An object read before the API gave it a UID is no one's owner."""
    assert not controlled_by(obj(ref("")), "") and not has_owner(obj(ref("")), "")


MADE_FOR = c.CLAIM_MADE_FOR_ANNOTATION


@pytest.mark.parametrize(
    ("found", "ours"),
    [
        (obj(ref("uid-tj")), True),
        (obj(ref("uid-tj"), kind="PersistentVolumeClaim"), True),
        (obj(ref("uid-tj", controller=False)), False),
        # a claim kept after a job of this name: the next one of the name takes it
        (obj(kind="PersistentVolumeClaim", annotations={MADE_FOR: "ns/tj"}), True),
        (obj(kind="PersistentVolumeClaim", annotations={MADE_FOR: "ns/other"}), False),
        (obj(kind="PersistentVolumeClaim", annotations={MADE_FOR: "elsewhere/tj"}), False),
        (obj(kind="PersistentVolumeClaim", annotations={MADE_FOR: "tj"}), False),
        # the marker means something on a claim only
        (obj(kind="ConfigMap", annotations={MADE_FOR: "ns/tj"}), False),
        (obj(kind="Service", annotations={MADE_FOR: "ns/tj"}), False),
        (obj(kind="PersistentVolumeClaim", labels={MADE_FOR: "ns/tj"}), False),
    ],
)
def test_made_for_the_trainjob(found: Dict, ours: bool) -> None:
    assert made_for_trainjob(found, TRAINJOB) is ours


ORIGIN = c.KUEUE_MULTIKUEUE_ORIGIN_LABEL
ORIGIN_UID = c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION
COPY = ObjectView(obj(labels={ORIGIN: "manager"}, annotations={ORIGIN_UID: "uid-tj"}))


@pytest.mark.parametrize(
    ("labels", "annotations", "ours"),
    [
        ({ORIGIN: "manager"}, {ORIGIN_UID: "uid-tj"}, True),
        ({ORIGIN: "manager"}, {ORIGIN_UID: "uid-before"}, False),  # an older object's copy
        ({ORIGIN: "manager"}, {}, False),  # Kueue's own MultiKueue copies carry no UID
        ({ORIGIN: "another-manager"}, {ORIGIN_UID: "uid-tj"}, False),
        ({}, {ORIGIN_UID: "uid-tj"}, False),
        ({}, {}, False),
    ],
)
def test_our_copy_of_a_manager_object(labels: Dict, annotations: Dict, ours: bool) -> None:
    assert is_our_copy(ObjectView(obj(labels=labels, annotations=annotations)), COPY) is ours


def test_a_copy_without_its_origin_is_no_ones() -> None:
    """Two objects that both lack the origin, or its UID, are not each other's copies."""
    bare = ObjectView(obj())
    assert not is_our_copy(bare, bare)
    no_uid = ObjectView(obj(labels={ORIGIN: "manager"}))
    assert not is_our_copy(no_uid, no_uid)
    no_label = ObjectView(obj(annotations={ORIGIN_UID: "uid-tj"}))
    assert not is_our_copy(no_label, no_label)


@pytest.mark.parametrize(
    ("annotations", "uid", "made"),
    [
        ({ORIGIN_UID: "uid-tj"}, "uid-tj", True),
        ({ORIGIN_UID: "uid-before"}, "uid-tj", False),  # made for an earlier one of its name
        ({}, "uid-tj", False),  # Kueue's own MultiKueue copies carry no UID
        ({ORIGIN_UID: ""}, "", False),  # an object without a UID has no copy
        ({}, None, False),
        ({ORIGIN_UID: "uid-tj"}, None, False),
    ],
)
def test_a_copy_made_for_the_manager_object_of_a_uid(
    annotations: Dict, uid: str | None, made: bool
) -> None:
    copy = obj(annotations=annotations)
    assert made_for(copy, uid) is made and made_for(ObjectView(copy), uid) is made
    assert origin_uid(copy) == (annotations.get(ORIGIN_UID) or None)
    assert made_for(None, uid) is False


@pytest.mark.parametrize(
    ("labels", "origin", "ours"),
    [
        ({ORIGIN: "manager"}, "manager", True),
        ({ORIGIN: "other"}, "manager", False),
        ({}, "manager", False),
        ({ORIGIN: ""}, "", False),  # no origin configured: nothing is a copy
        (None, "manager", False),
    ],
)
def test_a_dependency_copy(labels: Dict | None, origin: str, ours: bool) -> None:
    assert is_dependency_copy(obj(labels=labels), origin) is ours


@pytest.mark.parametrize(
    ("managed_by", "here"),
    [
        (None, True),
        ("", True),
        (c.MANAGED_BY_BUILTIN, True),
        (c.MANAGED_BY_MULTIKUEUE, False),
        ("example.com/other", False),
    ],
)
def test_managed_by_the_builtin_controller(managed_by: str | None, here: bool) -> None:
    assert managed_by_builtin(managed_by) is here
