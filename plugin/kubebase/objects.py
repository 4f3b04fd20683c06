"""The one name for an API object as JSON decodes it (or as we build one to send)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

Dict = dict[str, Any]


class OwnerReference(TypedDict):
    """One of metadata.ownerReferences, as we write it on an object we make."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: NotRequired[bool]
    blockOwnerDeletion: NotRequired[bool]
