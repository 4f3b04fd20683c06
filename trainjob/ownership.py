"""Is this ours? One answer per meaning, each named for it (pure).

- `controlled_by(obj, uid)`: we made it for that object (a controller ownerReference to
  the UID); `controller_uid(obj)`: who made it.
- `controlled_by_a_trainjob(obj)`: some TrainJob's (a controller ownerReference to a
  TrainJob of any UID).
- `has_owner(obj, uid)`: already adopted (any ownerReference to the UID: a prebuilt
  Workload's TrainJob is an owner of it, not its controller).
- `made_for_trainjob(obj, trainjob)`: ours to write for this TrainJob (`controlled_by` its UID,
  or a claim kept after its job and marked as made for a TrainJob of its namespace and name).
- `is_our_copy(found, copy)`: the dispatcher's copy of that manager object (the origin label
  and the origin UID annotation both the copy's).
- `is_dependency_copy(obj, origin)`: the dispatcher's copy of a dependency (the origin label
  only: a Secret rotated by delete and create on the manager keeps its copy, so the UID it
  was made from is not asked for).
- `managed_by_builtin(managed_by)`: a TrainJob the local controller runs (`spec.managedBy`
  unset or Trainer's built-in value).

Labels and annotations can be written by anyone who may write the object; an ownerReference
too, by someone who may write in that namespace and knows the UID. So no answer admits
anything across namespaces, and what fails an answer is never written over (the caller says
NameTaken or leaves it). Within one namespace an answer is only as strong as its rule: a
tenant who may write there can put our origin label on an object of its own
(`is_dependency_copy`), or a controller reference to its TrainJob's UID (`controlled_by`),
and have it taken for ours; what we then write there is what that tenant may read."""

from __future__ import annotations

from kubebase.objects import Dict
from trainjob_api import constants as c
from trainjob_api.views import ObjectView


def owner_refs(obj: Dict | None) -> list[Dict]:
    """An object's ownerReferences that are objects (a malformed entry is no owner)."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def controlled_by(obj: Dict | None, uid: str) -> bool:
    """A controller ownerReference to the object of UID `uid`: the best sign that we made it
    for that object."""
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in owner_refs(obj))


def controller_ref(obj: Dict | None) -> Dict | None:
    """The object's controller: its first ownerReference with `controller: true` (the API
    server allows one); None when it has none."""
    return next((ref for ref in owner_refs(obj) if ref.get("controller")), None)


def controller_uid(obj: Dict | None) -> str | None:
    """The UID of the object's controller (its owner with `controller: true`)."""
    ref = controller_ref(obj)
    return (str(ref.get("uid") or "") or None) if ref is not None else None


def controlled_by_a_trainjob(obj: Dict | None) -> bool:
    """A controller ownerReference to a TrainJob of any UID (the caller keeps its own)."""
    return any(
        ref.get("controller")
        and ref.get("kind") == c.TRAINJOB.kind
        and str(ref.get("apiVersion", "")).startswith(f"{c.TRAINER_GROUP}/")
        for ref in owner_refs(obj)
    )


def has_owner(obj: Dict | None, uid: str) -> bool:
    """Any ownerReference to the object of UID `uid`, controller or not."""
    return bool(uid) and any(r.get("uid") == uid for r in owner_refs(obj))


def made_for_trainjob(obj: Dict, trainjob: Dict) -> bool:
    """Whether an object found under a name we want was made by us for this TrainJob: the
    TrainJob (this very UID) as its controller, or a kept claim marked as made for a TrainJob
    of this namespace and name (one that outlives its job is meant for the next)."""
    meta = trainjob.get("metadata") or {}
    if controlled_by(obj, str(meta.get("uid", ""))):
        return True
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    made_for = annotations.get(c.CLAIM_MADE_FOR_ANNOTATION)
    return obj.get("kind") == c.PERSISTENT_VOLUME_CLAIM.kind and made_for == (
        f"{meta.get('namespace')}/{meta.get('name')}"
    )


def origin_uid(copy: ObjectView | Dict) -> str | None:
    """The UID of the manager object a worker's copy was made for: MultiKueue's origin-uid
    annotation (None when it names none)."""
    view = copy if isinstance(copy, ObjectView) else ObjectView(copy)
    return view.annotations.get(c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION) or None


def made_for(copy: ObjectView | Dict | None, uid: str | None) -> bool:
    """Whether a worker's copy was made for the manager object of UID `uid`: it names that
    very UID (a copy made for an earlier object of the same name names another; an object
    without a UID has no copy)."""
    return copy is not None and bool(uid) and origin_uid(copy) == uid


def _origin(obj: ObjectView) -> tuple[str | None, str | None]:
    return (
        obj.labels.get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL),
        obj.annotations.get(c.KUEUE_MULTIKUEUE_ORIGIN_UID_ANNOTATION),
    )


def is_our_copy(found: ObjectView, copy: ObjectView) -> bool:
    """Whether an object on a worker is a copy we made of the same manager object: our origin
    label, and the manager object's UID in its origin-uid annotation."""
    origin = _origin(copy)
    return None not in origin and _origin(found) == origin


def is_dependency_copy(obj: Dict, origin: str) -> bool:
    """Whether an object on a worker is a dependency's copy made by this manager: its origin
    label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(origin) and labels.get(c.KUEUE_MULTIKUEUE_ORIGIN_LABEL) == origin


def managed_by_builtin(managed_by: str | None) -> bool:
    """Whether a TrainJob of this `spec.managedBy` is the local controller's to run."""
    return managed_by in (None, "", c.MANAGED_BY_BUILTIN)
