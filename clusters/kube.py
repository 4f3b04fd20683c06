"""Kubeconfigs and the few API calls the bed makes (apply manifests, wait for CRDs)."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import (
    NotFoundError,
    ResourceNotFoundError,
    UnprocessibleEntityError,
)

from clusters.builds import binary
from clusters.errors import BedError

FIELD_MANAGER = "trainjob-bed"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build_kubeconfig(
    name: str, server: str, ca_pem: bytes, user: str, cert_pem: bytes, key_pem: bytes
) -> dict[str, Any]:
    """A self-contained kubeconfig: CA and client credentials inline, no file references."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }


def write_kubeconfig(path: Path, kubeconfig: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
    path.chmod(0o600)
    return path


def api_client(kubeconfig: Path) -> client.ApiClient:
    """A client for one cluster, built from its own kubeconfig (never the global config)."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


# libyaml's safe loader (PyYAML's wheels carry it): the installed CRDs are 2.6 MB of YAML,
# which the pure-Python loader reads in about 4 s and libyaml's in 0.3 s.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_manifests(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if doc]


class Applier:
    """Server-side apply of arbitrary manifests to one cluster."""

    def __init__(self, api: client.ApiClient) -> None:
        self._dyn = DynamicClient(api)

    def _resource(self, obj: dict[str, Any]) -> Any:
        try:
            return self._dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            self._dyn.resources.invalidate_cache()
            return self._dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def apply(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        for attempt in range(3):
            try:
                self._dyn.server_side_apply(
                    self._resource(obj),
                    body=obj,
                    name=meta["name"],
                    namespace=meta.get("namespace"),
                    field_manager=FIELD_MANAGER,
                    force_conflicts=True,
                )
                return
            except UnprocessibleEntityError as exc:
                # Seen on a loaded 2-core machine (kube-apiserver 1.36.3): the apply that
                # creates the kube-dns Service (a fixed clusterIP) is answered 422 "provided IP
                # is already allocated" while the API server logs that allocation for this
                # very Service and keeps it (the symptom of kubernetes/kubernetes#136475). The
                # Service is there; applying again updates it.
                if attempt == 2 or "is already allocated" not in str(exc.body):
                    raise
                time.sleep(1)

    def apply_all(self, objs: list[dict[str, Any]]) -> None:
        for obj in objs:
            self.apply(obj)

    def delete_all(self, objs: list[dict[str, Any]]) -> None:
        """Delete each object (already gone is fine)."""
        for obj in objs:
            meta = obj["metadata"]
            with contextlib.suppress(NotFoundError):
                self._resource(obj).delete(name=meta["name"], namespace=meta.get("namespace"))

    def remove_all(self, objs: list[dict[str, Any]], timeout: float = 180.0) -> None:
        """Delete each object and wait until every one is gone. The objects of a CRD being
        deleted lose their finalizers on the way: with their controller stopped, nothing
        else would remove them, and the CRD would never go."""
        self.delete_all(objs)
        deadline = time.monotonic() + timeout
        while left := [obj for obj in objs if self._exists(obj)]:
            for crd in left:
                if crd["kind"] == "CustomResourceDefinition":
                    self._drop_finalizers(crd)
            if time.monotonic() > deadline:
                names = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in left)
                raise BedError(f"still there {timeout:.0f}s after deletion: {names}")
            time.sleep(0.5)

    def _exists(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        try:
            self._resource(obj).get(name=meta["name"], namespace=meta.get("namespace"))
        except (NotFoundError, ResourceNotFoundError):
            return False
        return True

    def _drop_finalizers(self, crd: dict[str, Any]) -> None:
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("storage"))
        try:
            kind = self._dyn.resources.get(
                api_version=f"{spec['group']}/{version}", kind=spec["names"]["kind"]
            )
            items = kind.get().items
        except (NotFoundError, ResourceNotFoundError):
            return
        for item in items:
            if item.metadata.finalizers:
                with contextlib.suppress(NotFoundError):
                    kind.patch(
                        name=item.metadata.name,
                        namespace=item.metadata.namespace,
                        body={"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json",
                    )

    def wait_crds_established(self, names: list[str], timeout: float = 60.0) -> None:
        crds = self._dyn.resources.get(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
        )
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            for name in sorted(pending):
                try:
                    crd = crds.get(name=name).to_dict()
                except NotFoundError:
                    continue
                conds = crd.get("status", {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise BedError(f"CRDs not established within {timeout:.0f}s: {sorted(pending)}")
            if pending:
                time.sleep(0.2)
        self._dyn.resources.invalidate_cache()


def wait_api_service(
    api: client.ApiClient, name: str, deadline: float, hint: Callable[[], str] = lambda: ""
) -> None:
    """Until the APIService `name` is Available (the API server reaches its server), or
    BedError after `deadline` (time.monotonic()) with its conditions and `hint()`."""
    registration = client.ApiregistrationV1Api(api)
    while True:
        found = registration.read_api_service(name)
        conditions = (found.status.conditions if found.status else None) or []
        if any(cd.type == "Available" and cd.status == "True" for cd in conditions):
            return
        if time.monotonic() > deadline:
            said = [(cd.reason, cd.message) for cd in conditions]
            raise BedError(f"APIService {name} not Available {said}{hint()}")
        time.sleep(0.5)


def render(overlay: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize <overlay>` with the bed's kubectl, as objects."""
    return load_manifests(kustomize(overlay))


def kustomize(overlay: Path) -> str:
    """`kubectl kustomize <overlay>` with the bed's kubectl, as it prints it."""
    kubectl = binary("kubectl")
    if not kubectl.is_file():
        raise BedError(f"kubectl is not built yet ({kubectl}); run `python -m clusters build`")
    out = subprocess.run(
        [str(kubectl), "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise BedError(f"kubectl kustomize {overlay} failed:\n{out.stderr}")
    return out.stdout


TOKEN_SECONDS = 48 * 3600  # a bed lives for hours; a kubelet would refresh it


def service_account_token(api: client.ApiClient, namespace: str, service_account: str) -> str:
    """A token of the ServiceAccount from the TokenRequest API, as a kubelet projects one."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS)
    )
    result = client.CoreV1Api(api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    return str(result.status.token)


def write_token_kubeconfig(admin: Path, token: str, out: Path) -> None:
    """The admin kubeconfig's cluster entry (server, CA), with the token as the only user."""
    cfg = yaml.safe_load(admin.read_text())
    current = next(c for c in cfg["contexts"] if c["name"] == cfg["current-context"])
    cluster = next(c for c in cfg["clusters"] if c["name"] == current["context"]["cluster"])
    out.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "serviceaccount", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "pod",
                        "context": {"cluster": cluster["name"], "user": "serviceaccount"},
                    }
                ],
                "current-context": "pod",
            }
        )
    )
    out.chmod(0o600)
