"""The coordinates of a kind of object in the API, and those of the core kinds the runtime
itself reads and writes (the domain's own kinds are in plugin/trainjob/constants.py)."""

from __future__ import annotations

from typing import Any, NamedTuple


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
        """The API path of an object of this kind (of its collection when `name` is None)."""
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        path = f"{base}/{name}" if name else base
        return f"{path}/{subresource}" if subresource else path

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
