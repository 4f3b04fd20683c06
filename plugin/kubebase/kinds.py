"""The coordinates of a kind of object in the API, and those of the core kinds the runtime
itself reads and writes (the domain's own kinds are in plugin/trainjob_api/constants.py)."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

# A path segment the product may send: the characters Kubernetes names are made of (DNS
# subdomains, and the colons of RBAC names), at most 253 of them, never "." or "..". client-go
# refuses a name with "/" or "%" or equal to "." or ".." (`IsValidPathSegmentName`) and escapes
# the rest; no object we read or write has a name outside this set, so nothing is escaped here:
# anything else is refused before a request is made (a "?" would start a query, a "../" would
# climb out of the collection).
_SEGMENT = re.compile(r"[A-Za-z0-9._:-]{1,253}")
# Kubernetes' own name rules (apimachinery's validation), for `fullmatch`: an RFC 1123 label
# (a namespace, a Service), an RFC 1123 subdomain (most objects' names, a pod's, a label key's
# prefix), and a qualified name's name part (a label value, a label key's name).
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")
LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def is_label_key(key: object) -> bool:
    """A label key: an optional DNS-subdomain prefix and "/", then a name of 63 at most."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and not DNS_SUBDOMAIN.fullmatch(prefix):  # "/x": an empty prefix is none
        return False
    return bool(LABEL_NAME.fullmatch(name))


def is_label_value(value: object) -> bool:
    return isinstance(value, str) and (not value or bool(LABEL_NAME.fullmatch(value)))


def _is_segment(value: object) -> bool:
    return isinstance(value, str) and bool(_SEGMENT.fullmatch(value)) and value not in (".", "..")


class InvalidName(ValueError):
    """A namespace, name or path that no object of the API can have: refused before any
    request is made (never retried: the same string is as invalid the next time)."""

    def __init__(self, what: str, value: object) -> None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        super().__init__(f"{what} {shown} is not a valid Kubernetes name: no request made")
        self.what, self.value = what, value


def checked_namespace(namespace: str) -> str:
    """`namespace` when it is a namespace's name (an RFC 1123 label); else `InvalidName`."""
    if not isinstance(namespace, str) or not DNS_LABEL.fullmatch(namespace):
        raise InvalidName("namespace", namespace)
    return namespace


def checked_segment(value: str, what: str = "name") -> str:
    """`value` when it may stand as one segment of an API path; else `InvalidName`."""
    if not _is_segment(value):
        raise InvalidName(what, value)
    return value


def checked_path(path: str) -> str:
    """`path` when every segment of it may be sent as it is ("/" and segments of
    `checked_segment`); else `InvalidName`. The client's last check on every request, whoever
    built the path."""
    head, *segments = path.split("/")
    if head or not segments or not all(_is_segment(s) for s in segments):
        raise InvalidName("path", path)
    return path


class Kind(NamedTuple):
    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None, subresource: str | None = None) -> str:
        """The API path of an object of this kind (of its collection when `name` is None).
        A namespace that is not a namespace's name, or a name or subresource that cannot be
        one segment of a path, raises `InvalidName`: nothing a tenant wrote chooses the path.
        An empty name is refused too, never read as the collection (a GET of one object would
        otherwise list them all), and so is a subresource without a name (a collection has
        none: `("ns", None, "status")` would name the object called `status`)."""
        if name is None and subresource is not None:
            raise InvalidName("name", name)
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{checked_namespace(namespace)}"
        base += f"/{self.plural}"
        path = base if name is None else f"{base}/{checked_segment(name)}"
        if subresource is None:
            return path
        return f"{path}/{checked_segment(subresource, 'subresource')}"

    def object_path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        """The path of one object: as `path`, but a name that is not a string (None, read
        from an object that has none) raises `InvalidName` rather than naming the collection,
        where a DELETE would delete every object of the kind. A namespaced kind's object needs
        its namespace: without one the path is no object's."""
        if not isinstance(name, str):
            raise InvalidName("name", name)
        if self.namespaced and not namespace:
            raise InvalidName("namespace", namespace)
        return self.path(namespace, name, subresource)

    def stamped(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` with this kind's apiVersion and kind (the same dict when it has them)."""
        if obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind:
            return obj
        return {**obj, "apiVersion": self.api_version, "kind": self.kind}


API_SERVICE = Kind("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
CONFIG_MAP = Kind("", "v1", "configmaps", "ConfigMap", True)
CUSTOM_RESOURCE_DEFINITION = Kind(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
EVENT = Kind("", "v1", "events", "Event", True)
LEASE = Kind("coordination.k8s.io", "v1", "leases", "Lease", True)
NAMESPACE = Kind("", "v1", "namespaces", "Namespace", False)
POD = Kind("", "v1", "pods", "Pod", True)
SECRET = Kind("", "v1", "secrets", "Secret", True)
MUTATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)
VALIDATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
WEBHOOK_CONFIGURATIONS = (MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION)
