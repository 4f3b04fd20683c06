"""Our client's in-cluster credentials against a real API server: what a pod's service
account gives it (token and CA files, the namespace, KUBERNETES_SERVICE_HOST/PORT), as a
controller installed in a cluster reads them when it has no kubeconfig.

The bed runs our controllers with a kubeconfig holding their ServiceAccount's token (it has
no kubelet to mount the files at the path a pod has them); this checks the other way in."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pycurl
import pytest
from kubernetes import client

from clusters.bed import Bed
from clusters.kube import service_account_token
from kubebase.kinds import CONFIG_MAP, SECRET, Kind
from kubecontrol import client as kubeclient
from kubecontrol.certs import issue
from kubecontrol.client import ApiClient, ApiException, TransportError
from kubecontrol.cluster import Cluster
from kubecontrol.credentials import in_cluster_credentials

pytestmark = pytest.mark.bed


def test_in_cluster_credentials_act_as_the_service_account_and_follow_its_token(
    bed: Bed, namespace_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = bed.config.managers[0].name
    ns = namespace_factory(manager, "in-cluster")
    core = client.CoreV1Api(bed.api(manager))
    rbac = client.RbacAuthorizationV1Api(bed.api(manager))
    for account in ("reader", "nobody"):
        core.create_namespaced_service_account(ns, {"metadata": {"name": account}})
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    rbac.create_namespaced_role(ns, {"metadata": {"name": "read"}, "rules": [rule]})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "reader-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        },
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "hello"}, "data": {"a": "b"}})

    def token(account: str) -> str:
        return service_account_token(bed.api(manager), ns, account)

    # What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount, and the env.
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(token("reader"))
    (sa_dir / "ca.crt").write_bytes(bed.ca().cert_pem())
    (sa_dir / "namespace").write_text(ns)
    server = urlsplit(bed.server(manager))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))

    credentials = in_cluster_credentials(sa_dir)
    assert credentials.namespace == ns
    kube = Cluster(manager, ApiClient(credentials), "tests")
    assert kube.get(CONFIG_MAP, "hello", ns)["data"] == {"a": "b"}

    def refused(kind: Kind, name: str) -> str:
        with pytest.raises(ApiException) as denied:
            kube.get(kind, name, ns)
        assert denied.value.status == 403, denied.value
        return denied.value.body

    # The API server knows it as the ServiceAccount, and gives it only what its Role allows.
    assert f"system:serviceaccount:{ns}:reader" in refused(SECRET, "anything")

    # The kubelet rewrites a projected token before it expires: the new one is read.
    (sa_dir / "token").write_text(token("nobody"))
    monkeypatch.setattr(kubeclient, "TOKEN_REREAD_SECONDS", 0.0)
    assert f"system:serviceaccount:{ns}:nobody" in refused(CONFIG_MAP, "hello")

    # The CA file is what the server's certificate is checked against.
    (sa_dir / "ca.crt").write_bytes(issue(["elsewhere"], dt.datetime.now(dt.UTC)).ca_crt)
    stranger = ApiClient(in_cluster_credentials(sa_dir))
    with pytest.raises(TransportError) as untrusted:
        stranger.request("GET", f"/api/v1/namespaces/{ns}/configmaps/hello")
    assert untrusted.value.code == pycurl.E_PEER_FAILED_VERIFICATION, untrusted.value
