"""Worker kubeconfigs the way Kueue's MultiKueue takes them: from a Secret or a file under a
path prefix, vetted by plugin/kubebase/kubeconfig.py, with reasons and fixes."""

from __future__ import annotations

import functools
import json
import os

from kubebase.kubeconfig import KubeconfigProblem, vet_kubeconfig
from kubebase.objects import Dict
from kubecontrol.client import ApiClient
from kubecontrol.credentials import KubeconfigError, credentials_from_kubeconfig

__all__ = ["KubeconfigProblem", "check_kubeconfig", "check_kubeconfig_file"]


def check_kubeconfig(
    raw: bytes | str | None, secret: str
) -> tuple[Dict | None, KubeconfigProblem | None]:
    """Parse and vet a worker kubeconfig from the Secret `secret`; returns (kubeconfig, None)
    or (None, problem)."""
    return vet_kubeconfig(raw, f"Secret {secret!r} key 'kubeconfig'", connect_problem)


def check_kubeconfig_file(
    raw: bytes | str | None, path: str
) -> tuple[Dict | None, KubeconfigProblem | None]:
    """`check_kubeconfig` for a kubeconfig read from the file `path` (locationType Path)."""
    return vet_kubeconfig(raw, f"file {path!r}", connect_problem)


def connect_problem(cfg: Dict) -> str | None:
    """Whether our client can build a connection from a vetted kubeconfig, TLS included (the
    last word of the vetting)."""
    return _connect_problem(json.dumps(cfg, sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _connect_problem(kubeconfig: str) -> str | None:
    """`connect_problem` of a kubeconfig as JSON text: a resync checks the same few kubeconfigs
    over and over, and a TLS context costs a millisecond or two to build."""
    try:
        ApiClient(credentials_from_kubeconfig(json.loads(kubeconfig)))
    except KubeconfigError as exc:  # names the field, never its value
        return f"cannot connect with it: {exc}"
    except Exception as exc:  # ssl's errors (a CA, certificate or key that does not load)
        return f"cannot connect with it ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def kubeconfig_path_problem(raw_path: str, prefix: str) -> tuple[str | None, str | None]:
    """Kueue's rules for `kubeConfig.locationType: Path` (its MultiKueueKubeConfigPathValidation,
    on by default): an absolute path without "..", which, symlinks resolved, lies under
    `prefix`. Returns (the resolved path, None) or (None, why not)."""
    if not raw_path:
        return None, "the kubeconfig path must not be empty"
    cleaned = os.path.normpath(raw_path)
    if ".." in cleaned.split(os.sep):
        return None, f'{raw_path!r} is not allowed: the path contains ".."'
    if not os.path.isabs(cleaned):
        return None, f"{raw_path!r} is not allowed: the path must be absolute"
    if not os.path.isdir(prefix):
        return None, f"{cleaned!r} is not under {os.path.normpath(prefix)!r} (no such directory)"
    allowed = os.path.realpath(prefix)
    if not os.path.exists(cleaned):
        return None, f"{cleaned!r} does not exist"
    resolved = os.path.realpath(cleaned)
    if not (resolved + os.sep).startswith(allowed + os.sep):
        return None, f"{resolved!r} is not under {allowed!r}"
    return resolved, None
