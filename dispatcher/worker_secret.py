"""Make the manager's kubeconfig Secret for one worker, from a ServiceAccount token of that worker.

    trainjob-worker-secret --worker-kubeconfig worker1.kubeconfig --name worker1 > secret.yaml
    kubectl --context manager apply -f secret.yaml

It asks the worker for a token of the identity deploy/worker installs for the manager
(`trainjob-system/trainjob-multikueue`, TokenRequest API), writes a kubeconfig holding the
worker's API server address, its CA and that token (no files, no exec plugins), checks it with
the rules Kueue's MultiKueue applies (and refuses what Kueue would refuse), and prints the
Secret for the manager's Kueue namespace. The worker kubeconfig given is used only to ask.
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from dispatcher.kubeconfigs import check_kubeconfig

Dict = dict[str, Any]


def build_worker_kubeconfig(name: str, server: str, ca_pem: bytes, token: str) -> Dict:
    """A self-contained kubeconfig for one worker: server, inline CA, bearer token."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": f"{name}-trainjob-multikueue", "user": {"token": token}}],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": name, "user": f"{name}-trainjob-multikueue"},
            }
        ],
        "current-context": name,
    }


def build_secret(name: str, namespace: str, kubeconfig: Dict) -> Dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-secret", "namespace": namespace},
        "type": "Opaque",
        "stringData": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="trainjob-worker-secret", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--worker-kubeconfig", type=Path, required=True)
    parser.add_argument("--context", help="context of --worker-kubeconfig (default: current)")
    parser.add_argument("--name", required=True, help="the MultiKueueCluster's name")
    parser.add_argument(
        "--server",
        help="the worker's API server as the manager reaches it (default: from the kubeconfig)",
    )
    parser.add_argument("--service-account", default="trainjob-multikueue")
    parser.add_argument("--service-account-namespace", default="trainjob-system")
    parser.add_argument("--namespace", default="kueue-system", help="the manager's Kueue namespace")
    parser.add_argument(
        "--duration-seconds",
        type=int,
        default=365 * 24 * 3600,
        help="token lifetime asked for (the API server may grant less; renew before it ends)",
    )
    args = parser.parse_args(argv)
    cfg = client.Configuration()
    try:
        config.load_kube_config(
            config_file=str(args.worker_kubeconfig), context=args.context, client_configuration=cfg
        )
    except Exception as exc:
        print(f"error: --worker-kubeconfig {args.worker_kubeconfig}: {exc}", file=sys.stderr)
        return 2
    api = client.ApiClient(cfg)
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=args.duration_seconds)
    )
    try:
        token = (
            client.CoreV1Api(api)
            .create_namespaced_service_account_token(
                args.service_account, args.service_account_namespace, request
            )
            .status.token
        )
    except client.ApiException as exc:
        where = f"{args.service_account_namespace}/{args.service_account}"
        print(
            f"error: cannot get a token for ServiceAccount {where} on the worker "
            f"({exc.status} {exc.reason}); is deploy/worker installed there?",
            file=sys.stderr,
        )
        return 1
    if cfg.ssl_ca_cert:
        ca_pem = Path(cfg.ssl_ca_cert).read_bytes()
    else:
        print("error: the worker kubeconfig names no certificate authority", file=sys.stderr)
        return 2
    kubeconfig = build_worker_kubeconfig(args.name, args.server or cfg.host, ca_pem, token)
    _, problem = check_kubeconfig(yaml.safe_dump(kubeconfig), f"{args.name}-secret")
    if problem is not None:
        print(f"error: Kueue would refuse it: {problem.reason}: {problem.message}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump(build_secret(args.name, args.namespace, kubeconfig)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
