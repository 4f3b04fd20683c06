"""A person who submits jobs, played as one: a ServiceAccount of one namespace on the manager
bound to a built-in role there (or to nothing), with a kubeconfig of its own token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from clusters.bed import Bed
from clusters.kube import api_client, service_account_token, write_token_kubeconfig

API = "/apis/view.trainjob.dev/v1alpha1"


def story_path(ns: str, name: str, sub: str = "story") -> str:
    """A TrainJob's story or log (`sub`) in the dispatcher's aggregated API."""
    return f"{API}/namespaces/{ns}/trainjobs/{name}/{sub}"


class Tenant:
    """A ServiceAccount of namespace `ns` on the manager, bound to a built-in role there (or
    to nothing), as the people who submit jobs are."""

    def __init__(self, bed: Bed, ns: str, name: str, role: str | None, tmp_path: Path) -> None:
        """`role`: a ClusterRole bound in `ns` (`edit`, `view`, ...), None for no rights."""
        manager = bed.config.managers[0].name
        admin = bed.api(manager)
        client.CoreV1Api(admin).create_namespaced_service_account(ns, {"metadata": {"name": name}})
        if role is not None:
            client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(
                ns,
                {
                    "metadata": {"name": name},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
                },
            )
        self.kubeconfig = tmp_path / f"{ns}-{name}.kubeconfig"
        self.token = token = service_account_token(admin, ns, name)
        write_token_kubeconfig(bed.kubeconfig(manager), token, self.kubeconfig)
        self.api = api_client(self.kubeconfig)

    def get(self, path: str, **query: str) -> tuple[int, Any]:
        """GET a path of the API server as this tenant: (status, decoded body or text)."""
        try:
            body, code, _ = self.api.call_api(
                path,
                "GET",
                query_params=list(query.items()),
                response_type="object" if not path.endswith("/log") else "str",
                auth_settings=["BearerToken"],
                _return_http_data_only=False,
                _preload_content=True,
                _request_timeout=30,
            )
            return code, body
        except client.ApiException as exc:
            return exc.status, exc.body
