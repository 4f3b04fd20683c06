"""Make the manager's kubeconfig Secret for one worker, from a ServiceAccount token of that worker,
and renew the tokens in those Secrets before they expire.

    trainjob-worker-secret --worker-kubeconfig worker1.kubeconfig --name worker1 > secret.yaml
    kubectl --context manager apply -f secret.yaml
    trainjob-worker-secret renew [--kubeconfig manager.kubeconfig]   # the chart's CronJob

The first form asks the worker for a token of the identity deploy/worker installs for the
manager (`trainjob-system/trainjob-multikueue`, TokenRequest API), writes a kubeconfig holding
the worker's API server address, its CA and that token (no files, no exec plugins), checks it
with the rules Kueue's MultiKueue applies (and refuses what Kueue would refuse), and prints the
Secret for the manager's Kueue namespace, labelled `trainjob.dev/worker-kubeconfig`. The worker
kubeconfig given is used only to ask.

`renew` reads those Secrets on the manager; for each whose token has less than
`--renew-before-seconds` left, it asks the worker for a new token of the same ServiceAccount
with the token itself (the worker grants that identity `serviceaccounts/token` for itself
only) and writes it into the Secret. The dispatcher and Kueue read the Secret again on change.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from dispatcher.workers.kubeconfigs import check_kubeconfig
from kubebase.objects import Dict

LABEL = "trainjob.dev/worker-kubeconfig"  # its value: the worker's (MultiKueueCluster's) name


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
        "metadata": {"name": f"{name}-secret", "namespace": namespace, "labels": {LABEL: name}},
        "type": "Opaque",
        "stringData": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)},
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["renew"]:
        return renew(argv[1:])
    parser = argparse.ArgumentParser(
        prog="trainjob-worker-secret",
        description=__doc__.split("\n\n")[0],
        epilog="`trainjob-worker-secret renew --help`: renew the tokens of existing Secrets",
    )
    add_worker_arguments(parser)
    args = parser.parse_args(argv)
    try:
        secret = make_secret(args)
    except SecretError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    sys.stdout.write(yaml.safe_dump(secret))
    return 0


def add_worker_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """What making a worker's Secret needs, for each command that makes one (`required`
    False: a command that may name the worker another way checks it itself)."""
    parser.add_argument("--worker-kubeconfig", type=Path, required=required)
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
        help="token lifetime asked for (the API server may grant less: the Secret's token "
        "ends at the lifetime granted; `renew` renews it)",
    )


class SecretError(Exception):
    """Why a worker's Secret could not be made; `code` is the exit status to give."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def make_secret(args: argparse.Namespace) -> Dict:
    """The manager's Secret for the worker `args` name (add_worker_arguments), its token
    asked of the worker; SecretError saying why not."""
    cfg = client.Configuration()
    try:
        config.load_kube_config(
            config_file=str(args.worker_kubeconfig), context=args.context, client_configuration=cfg
        )
    except Exception as exc:
        raise SecretError(f"--worker-kubeconfig {args.worker_kubeconfig}: {exc}", 2) from exc
    try:
        token = request_token(
            client.ApiClient(cfg),
            args.service_account_namespace,
            args.service_account,
            args.duration_seconds,
        )
    except client.ApiException as exc:
        where = f"{args.service_account_namespace}/{args.service_account}"
        raise SecretError(
            f"cannot get a token for ServiceAccount {where} on the worker "
            f"({exc.status} {exc.reason}); is deploy/worker installed there?"
        ) from exc
    if not cfg.ssl_ca_cert:
        raise SecretError("the worker kubeconfig names no certificate authority", 2)
    ca_pem = Path(cfg.ssl_ca_cert).read_bytes()
    kubeconfig = build_worker_kubeconfig(args.name, args.server or cfg.host, ca_pem, token)
    try:
        vetted(kubeconfig, f"{args.name}-secret")
    except ValueError as exc:
        raise SecretError(str(exc)) from exc
    return build_secret(args.name, args.namespace, kubeconfig)


def vetted(kubeconfig: Dict, secret: str) -> str:
    """The kubeconfig as the Secret's YAML, once it passes Kueue's MultiKueue rules (else
    ValueError with Kueue's reason)."""
    text = yaml.safe_dump(kubeconfig, sort_keys=False)
    _, problem = check_kubeconfig(text, secret)
    if problem is not None:
        raise ValueError(f"Kueue would refuse it: {problem.reason}: {problem.message}")
    return text


def request_token(api: client.ApiClient, namespace: str, service_account: str, seconds: int) -> str:
    """A token of the ServiceAccount (TokenRequest API), `seconds` long at most."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    return str(answer.status.token)


def token_claims(token: str) -> Dict:
    """The claims of a ServiceAccount token (a JWT), read without checking its signature:
    only to learn when it ends and whose it is. ValueError if it is not a JWT."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error) as exc:
        raise ValueError("its token is not a JWT") from exc
    if not isinstance(claims, dict):
        raise ValueError("its token is not a JWT")
    return claims


def _service_account(claims: Dict) -> tuple[str, str]:
    parts = str(claims.get("sub", "")).split(":")
    if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
        raise ValueError(f"its token is not a ServiceAccount's (sub {claims.get('sub')!r})")
    return parts[2], parts[3]


def _user(kubeconfig: Dict) -> Dict:
    context = next(c for c in kubeconfig["contexts"] if c["name"] == kubeconfig["current-context"])
    user: Dict = next(u for u in kubeconfig["users"] if u["name"] == context["context"]["user"])
    return user["user"]  # type: ignore[no-any-return]


def _when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def renew_one(
    secret: Any, renew_before: float, seconds: int, now: float
) -> tuple[str, Dict | None]:
    """What to say about one Secret, and its new kubeconfig if its token is to be renewed.
    ValueError names what is wrong with it."""
    try:
        raw = base64.b64decode((secret.data or {})["kubeconfig"], validate=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError("its key 'kubeconfig' is missing or not base64") from exc
    # Vetted before the client library sees it (which would run an exec or auth-provider
    # command while loading), and only the fields vetted build the client.
    kubeconfig, problem = check_kubeconfig(raw, str(secret.metadata.name))
    if kubeconfig is None:
        assert problem is not None
        raise ValueError(f"{problem.reason}: {problem.message}")
    user = _user(kubeconfig)
    if "token" not in user:
        raise ValueError("its kubeconfig's user has no inline token (made by another tool?)")
    claims = token_claims(user["token"])
    if "exp" not in claims:
        return "kept: its token does not expire", None
    left = float(claims["exp"]) - now
    if left <= 0:
        raise ValueError(
            f"its token expired at {_when(claims['exp'])}; make the Secret again with "
            "trainjob-worker-secret --worker-kubeconfig ..."
        )
    if left > renew_before:
        return f"kept: its token is valid until {_when(claims['exp'])}", None
    namespace, name = _service_account(claims)
    cfg = client.Configuration()
    config.load_kube_config_from_dict(kubeconfig, client_configuration=cfg)
    user["token"] = request_token(client.ApiClient(cfg), namespace, name, seconds)
    ends = token_claims(user["token"]).get("exp")
    return f"renewed: the new token is valid until {_when(ends) if ends else 'never'}", kubeconfig


def renew(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="trainjob-worker-secret renew",
        description="Renew the tokens of the worker kubeconfig Secrets (label "
        f"{LABEL}) on the manager before they expire.",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="the manager's (default: in a pod, its ServiceAccount; else $KUBECONFIG or "
        "~/.kube/config)",
    )
    parser.add_argument("--context", help="context of --kubeconfig (default: current)")
    parser.add_argument("--namespace", default="kueue-system", help="the manager's Kueue namespace")
    parser.add_argument(
        "--renew-before-seconds",
        type=int,
        default=2 * 24 * 3600,
        help="renew a token with less than this left (default: 2 days)",
    )
    parser.add_argument(
        "--duration-seconds",
        type=int,
        default=7 * 24 * 3600,
        help="lifetime asked for each new token (default: 7 days)",
    )
    args = parser.parse_args(argv)
    cfg = client.Configuration()
    try:
        if args.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(
                config_file=str(args.kubeconfig) if args.kubeconfig else None,
                context=args.context,
                client_configuration=cfg,
            )
    except Exception as exc:
        print(f"error: the manager's credentials: {exc}", file=sys.stderr)
        return 2
    core = client.CoreV1Api(client.ApiClient(cfg))
    try:
        secrets = core.list_namespaced_secret(args.namespace, label_selector=LABEL).items
    except client.ApiException as exc:
        print(f"error: cannot list Secrets in {args.namespace} ({exc.status} {exc.reason})",
              file=sys.stderr)  # fmt: skip
        return 1
    if not secrets:
        print(f"no Secret labelled {LABEL} in {args.namespace}", file=sys.stderr)
    failed = 0
    for secret in secrets:
        where = f"{args.namespace}/{secret.metadata.name}"
        try:
            said, kubeconfig = renew_one(
                secret, args.renew_before_seconds, args.duration_seconds, time.time()
            )
            if kubeconfig is not None:
                data = base64.b64encode(vetted(kubeconfig, secret.metadata.name).encode())
                core.patch_namespaced_secret(
                    secret.metadata.name,
                    args.namespace,
                    {"data": {"kubeconfig": data.decode()}},
                )
        except Exception as exc:  # one Secret's trouble (or its worker's) never stops the rest
            reason = f"{exc.status} {exc.reason}" if isinstance(exc, client.ApiException) else exc
            print(f"error: {where}: {reason}", file=sys.stderr)
            failed += 1
            continue
        print(f"{where}: {said}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
