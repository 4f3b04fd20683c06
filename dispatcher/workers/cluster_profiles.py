"""Workers named by a ClusterProfile (the Cluster Inventory API), as Kueue 0.19 connects them.

A MultiKueueCluster's `spec.clusterSource.clusterProfileRef.name` names a ClusterProfile in
Kueue's namespace. Its `status.accessProviders` (and the deprecated `credentialProviders`)
say, per provider name, how to reach the cluster: server, CA, proxy, and in the cluster's
extension `client.authentication.k8s.io/exec` the plugin's own settings. The operator's
configuration (Kueue's `multiKueue.clusterProfile.accessProviders`, our
`clusterProfileProviders`) gives, per provider name, the exec credential plugin that gets a
token. The first configured provider the profile offers is used, as the Cluster Inventory
API's access library picks it. What comes out is a kubeconfig our client runs the plugin for
(`kubecontrol/exec_credentials.py`); the reasons on the Active condition are Kueue's:
BadClusterProfile (no profile, no provider in common) and BadRestConfig (an endpoint that is
not an IP address or DNS name, or not https).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubebase.kubeconfig import https_host_ok
from kubebase.objects import Dict

GROUP = "multicluster.x-k8s.io"


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str


def accessors(profile: Dict) -> dict[str, Dict]:
    """The profile's access providers by name (accessProviders over credentialProviders)."""
    status = profile.get("status") or {}
    out: dict[str, Dict] = {}
    for key in ("credentialProviders", "accessProviders"):
        for item in status.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                out[item["name"]] = item
    return out


def kubeconfig_for(
    profile: Dict | None, ref: str, namespace: str, providers: list[tuple[str, Dict]]
) -> Dict | Problem:
    """The kubeconfig that reaches the cluster `profile` describes with the first of
    `providers` ((name, exec config) in the operator's order) it offers, or why there is none.
    `profile` None: it does not exist in `namespace`."""
    if profile is None:
        return Problem(
            "BadClusterProfile",
            f'load client config failed: clusterprofiles.{GROUP} "{ref}" not found in {namespace}',
        )
    offered = accessors(profile)
    chosen = next(((name, ex) for name, ex in providers if name in offered), None)
    if chosen is None:
        configured = ", ".join(name for name, _ in providers) or "none configured"
        return Problem(
            "BadClusterProfile",
            f"load client config failed: no matching cluster accessor found for cluster "
            f"profile {ref!r} (it offers {', '.join(sorted(offered)) or 'none'}; the "
            f"dispatcher's providers: {configured})",
        )
    name, exec_config = chosen
    cluster = offered[name].get("cluster") or {}
    server = str(cluster.get("server") or "")
    if not https_host_ok(server):
        return Problem(
            "BadRestConfig",
            f"load client config failed: untrusted server endpoint {server[:200]!r} from "
            f"provider {name!r} (an https URL with an IP address or DNS name)",
        )
    # What the access library keeps of the profile's cluster: server, CA, proxy, and the
    # extensions (the plugin's own settings travel in them).
    kept = {"server": server}
    for key in ("certificate-authority-data", "proxy-url", "extensions"):
        if cluster.get(key):
            kept[key] = cluster[key]
    user = {
        "exec": {
            **{k: v for k, v in exec_config.items() if k != "interactiveMode"},
            "interactiveMode": "Never",
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "worker",
        "clusters": [{"name": "worker", "cluster": kept}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": name}}],
    }
