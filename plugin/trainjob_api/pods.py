"""Typed views of a pod spec as anyone may have written it: a runtime's pod template, a
TrainJob's override, a Workload's PodSet. A tenant writes these; the installed CRDs type them,
but a reader takes no shape on trust (another CRD, an older install): a view reads a list that
is no list as empty, skips the entries that are not objects, and reads an object that is none
as empty. Readers walk typed entries instead of checking each shape again, and none of them
raises on a tenant's shape.

Views read in place (nothing parsed ahead, nothing copied); an entry of a list knows its
position there (`at`), for the field paths of messages. These are for reading; the runtime
framework's editors (trainjob/runtime/templates.py) build on them to write in place."""

from __future__ import annotations

from typing import TypeVar

from kubebase.objects import Dict
from trainjob_api.views import JsonView, mapping, objects

# A pod spec's lists of containers, in the order Kubernetes starts them.
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

_Part = TypeVar("_Part", bound="PodPartView")


class PodPartView(JsonView):
    """Any object of a pod spec: its fields that name an object of the pod's namespace
    (`ref`), and its position in the list it came from (0 outside one)."""

    __slots__ = ("at",)

    def __init__(self, raw: Dict, at: int = 0) -> None:
        super().__init__(raw)
        self.at = at

    def ref(self, key: str) -> RefView | None:
        """The reference under `key`, when that field is an object."""
        found = self.raw.get(key)
        return RefView(found) if isinstance(found, dict) else None

    def part(self, key: str) -> PodPartView:
        """The object under `key` ({} read when absent or no object)."""
        return PodPartView(mapping(self.raw.get(key)))

    def _entries(self, cls: type[_Part], key: str) -> list[_Part]:
        given = self.raw.get(key)
        if not isinstance(given, list):
            return []
        return [cls(x, i) for i, x in enumerate(given) if isinstance(x, dict)]


class RefView(PodPartView):
    """A reference to a Secret or ConfigMap of the pod's namespace (a key ref, an envFrom
    source, a volume, a projection, an image pull secret): its name ("" for none) and
    whether the pod may run without the object."""

    __slots__ = ()

    NAME = "name"

    @property
    def name(self) -> str:
        return self._text(self.NAME)

    @property
    def optional(self) -> bool:
        return bool(self.raw.get("optional"))


class SecretVolumeView(RefView):
    """A `secret` volume source, which names its Secret `secretName`."""

    __slots__ = ()

    NAME = "secretName"


class ResourcesView(PodPartView):
    """A ResourceRequirements (a container's, or the pod's own)."""

    __slots__ = ()

    @property
    def requests(self) -> Dict:
        return mapping(self.raw.get("requests"))

    @property
    def limits(self) -> Dict:
        return mapping(self.raw.get("limits"))

    @property
    def claims(self) -> list[Dict]:
        return objects(self.raw.get("claims"))


class EnvVarView(PodPartView):
    """One env entry of a container."""

    __slots__ = ()

    @property
    def value_from(self) -> PodPartView:
        return self.part("valueFrom")


class ContainerView(PodPartView):
    """A container, init container or ephemeral container."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._text("name")

    @property
    def restart_policy(self) -> str:
        return self._text("restartPolicy")

    @property
    def sidecar(self) -> bool:
        """An init container that keeps running beside the containers."""
        return self.raw.get("restartPolicy") == "Always"

    @property
    def resources(self) -> ResourcesView:
        return ResourcesView(mapping(self.raw.get("resources")))

    @property
    def env(self) -> list[EnvVarView]:
        return self._entries(EnvVarView, "env")

    @property
    def env_from(self) -> list[PodPartView]:
        """Its envFrom sources (each may hold a secretRef or a configMapRef)."""
        return self._entries(PodPartView, "envFrom")


class VolumeView(PodPartView):
    """A pod's volume: the objects it mounts."""

    __slots__ = ()

    @property
    def secret(self) -> SecretVolumeView | None:
        found = self.raw.get("secret")
        return SecretVolumeView(found) if isinstance(found, dict) else None

    @property
    def projected_sources(self) -> list[PodPartView]:
        """The sources of a projected volume (each may hold a secret or a configMap)."""
        return self.part("projected")._entries(PodPartView, "sources")

    @property
    def claim_name(self) -> str:
        """The PersistentVolumeClaim it mounts ("" for none)."""
        return self.part("persistentVolumeClaim")._text("claimName")


class PodSpecView(PodPartView):
    """A pod spec."""

    __slots__ = ()

    @classmethod
    def of_template(cls, template: object) -> PodSpecView:
        """The spec of a pod template (a PodSet's, a Job's)."""
        return cls(mapping(mapping(template).get("spec")))

    def containers_in(self, kind: str) -> list[ContainerView]:
        """Its containers of one of CONTAINER_LISTS."""
        return self._entries(ContainerView, kind)

    @property
    def containers(self) -> list[ContainerView]:
        return self.containers_in("containers")

    @property
    def init_containers(self) -> list[ContainerView]:
        return self.containers_in("initContainers")

    @property
    def volumes(self) -> list[VolumeView]:
        return self._entries(VolumeView, "volumes")

    @property
    def image_pull_secrets(self) -> list[RefView]:
        return self._entries(RefView, "imagePullSecrets")

    @property
    def resources(self) -> ResourcesView:
        """The pod's own resources (pod-level resources)."""
        return ResourcesView(mapping(self.raw.get("resources")))

    @property
    def overhead(self) -> Dict:
        return mapping(self.raw.get("overhead"))

    @property
    def runtime_class_name(self) -> str:
        return self._text("runtimeClassName")

    @property
    def resource_claims(self) -> list[Dict]:
        return objects(self.raw.get("resourceClaims"))
