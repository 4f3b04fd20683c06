"""plugin/kubebase/kubeconfig.py: kubeconfigs from others are vetted before any library sees
them, and the renewal job and `kubectl trainjob` build clients from the vetted fields only."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatcher.commands.worker_secret import renew_one
from kubebase.kubeconfig import MAX_KUBECONFIG_BYTES, minimal_kubeconfig, vet_kubeconfig
from tests.support.kubeconfigs import CA_DATA, kubeconfig

Dict = dict[str, Any]


def _jwt(claims: Dict) -> str:
    def part(value: Dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def _hostile(marker: Path) -> Dict:
    """A kubeconfig whose user asks the client library to run a command while it loads (the
    gcp auth-provider's cmd-path runs when its token has no expiry), next to a real token."""
    cfg: Dict = yaml.safe_load(kubeconfig())
    token = _jwt({"exp": time.time() + 60, "sub": "system:serviceaccount:trainjob-system:sa"})
    cfg["users"][0]["user"] = {
        "token": token,
        "auth-provider": {
            "name": "gcp",
            "config": {"cmd-path": "/usr/bin/touch", "cmd-args": str(marker)},
        },
    }
    return cfg


def test_the_client_library_runs_a_kubeconfigs_command_while_loading_it(tmp_path: Path) -> None:
    """Why the vetting comes first: loading this kubeconfig runs its command."""
    marker = tmp_path / "ran"
    script = (
        "import json, sys\n"
        "from kubernetes import client, config\n"
        "try:\n"
        "    config.load_kube_config_from_dict(json.loads(sys.argv[1]),"
        " client_configuration=client.Configuration())\n"
        "except Exception:\n"
        "    pass\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, json.dumps(_hostile(marker))], timeout=60, check=True
    )
    assert marker.exists()


def test_renewal_refuses_a_kubeconfig_with_a_command_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    raw = base64.b64encode(yaml.safe_dump(_hostile(marker)).encode()).decode()
    secret = types.SimpleNamespace(
        data={"kubeconfig": raw}, metadata=types.SimpleNamespace(name="w-secret")
    )
    with pytest.raises(ValueError, match=r"InsecureKubeConfig: .* uses auth-provider"):
        renew_one(secret, renew_before=3600, seconds=3600, now=time.time())
    assert not marker.exists()


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)
    ]
    raw = "\n".join(levels).encode()
    assert len(raw) < 1024
    cfg, problem = vet_kubeconfig(raw, "Secret 's'")
    assert cfg is None and problem is not None
    assert problem.message == (
        "Secret 's' is not valid YAML (line 2, column 8: YAML aliases are not allowed)"
    )


def test_kubeconfigs_over_the_size_cap_are_refused_unread() -> None:
    raw = b"#" * (MAX_KUBECONFIG_BYTES + 1)
    _, problem = vet_kubeconfig(raw, "Secret 's'")
    assert problem is not None
    assert problem.message == f"Secret 's' is {MAX_KUBECONFIG_BYTES + 1} bytes, over 65536"


def test_a_yaml_error_never_quotes_the_line_it_is_on() -> None:
    raw = kubeconfig().replace(b"token: abc", b"token: 'sekrit-token\n  bad: [")
    _, problem = vet_kubeconfig(raw, "Secret 's'")
    assert problem is not None and problem.reason == "BadKubeConfig"
    assert "sekrit" not in problem.message and "line" in problem.message


def test_http_servers_are_refused_the_token_would_travel_in_clear() -> None:
    _, problem = vet_kubeconfig(kubeconfig({"server": "http://10.0.0.1:6443"}), "Secret 's'")
    assert problem is not None and problem.reason == "InsecureKubeConfig"
    assert "is not an https URL" in problem.message


def test_only_the_fields_a_connection_needs_are_kept() -> None:
    cfg: Dict = yaml.safe_load(kubeconfig())
    cfg["clusters"][0]["cluster"]["extensions"] = [{"name": "x", "extension": {"a": 1}}]
    cfg["clusters"].append({"name": "other", "cluster": {"server": "https://other"}})
    cfg["users"][0]["user"]["as"] = "system:admin"
    cfg["preferences"] = {"colors": True}
    vetted, problem = vet_kubeconfig(yaml.safe_dump(cfg).encode(), "Secret 's'")
    assert problem is None
    assert vetted == {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "w",
        "clusters": [
            {
                "name": "w",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": CA_DATA,
                },
            }
        ],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "abc"}}],
    }
    assert minimal_kubeconfig(vetted) == vetted
