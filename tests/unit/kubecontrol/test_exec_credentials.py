"""Tokens from exec credential plugins: real plugins (small scripts) run as client-go runs them."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

from kubecontrol import exec_credentials
from kubecontrol.credentials import KubeconfigError, credentials_from_kubeconfig
from kubecontrol.exec_credentials import CredentialPluginError, ExecPlugin, ExecTokens

V1 = "client.authentication.k8s.io/v1"


def plugin(tmp_path: Path, body: str) -> str:
    """An executable plugin: Python `body` with `runs` (the count file), `info` (the parsed
    KUBERNETES_EXEC_INFO) and `say(status)` (print an ExecCredential) defined."""
    script = tmp_path / "plugin"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        f"runs = {str(tmp_path / 'runs')!r}\n"
        "open(runs, 'a').write('x')\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "def say(status, version=info['apiVersion']):\n"
        "    print(json.dumps({'apiVersion': version, 'kind': 'ExecCredential', "
        "'status': status}))\n" + body
    )
    script.chmod(0o755)
    return str(script)


def runs(tmp_path: Path) -> int:
    return len((tmp_path / "runs").read_text())


def kubeconfig(exec_: dict, cluster: dict | None = None) -> dict:
    return {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": cluster or {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"exec": exec_}}],
    }


def test_the_token_is_kept_until_refused_and_the_plugin_told_of_the_cluster(
    tmp_path: Path,
) -> None:
    command = plugin(tmp_path, "say({'token': 'tok-' + info['spec']['cluster']['config']['n']})")
    cluster = {
        "server": "https://10.0.0.1:6443",
        "certificate-authority-data": "Q0E=",
        "extensions": [{"name": exec_credentials.EXEC_EXTENSION, "extension": {"n": "7"}}],
    }
    creds = credentials_from_kubeconfig(
        kubeconfig({"apiVersion": V1, "command": command, "provideClusterInfo": True}, cluster)
    )
    assert creds.exec_plugin is not None
    tokens = ExecTokens(creds.exec_plugin)
    assert tokens.token() == "tok-7" and tokens.token() == "tok-7"
    assert runs(tmp_path) == 1  # no expiry given: kept
    tokens.refused()  # a 401
    assert tokens.token() == "tok-7" and runs(tmp_path) == 2
    told = json.loads(creds.exec_plugin.exec_info())
    assert told["spec"]["cluster"]["server"] == "https://10.0.0.1:6443"
    assert told["spec"]["cluster"]["certificate-authority-data"] == "Q0E="
    assert told["spec"]["interactive"] is False


def test_a_token_about_to_expire_is_renewed_and_env_and_args_are_passed(tmp_path: Path) -> None:
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)).isoformat()
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    command = plugin(
        tmp_path,
        f"say({{'token': os.environ['WHO'] + sys.argv[1], 'expirationTimestamp': {soon!r}}})"
        f" if open(runs).read() == 'x' else say({{'token': 'new', 'expirationTimestamp': "
        f"{later!r}}})",
    )
    tokens = ExecTokens(ExecPlugin(command, ("-a",), (("WHO", "me"),), V1))
    assert tokens.token() == "me-a"  # expires within the 30 s margin: not kept
    assert tokens.token() == "new" and tokens.token() == "new"
    assert runs(tmp_path) == 2


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("sys.stderr.write('no login'); sys.exit(3)", "exited with 3: no login"),
        ("print('hello')", "printed no JSON ExecCredential"),
        ("say({'token': 't'}, version='client.authentication.k8s.io/v1beta1')", "not the"),
        ("say({'clientCertificateData': 'c', 'clientKeyData': 'k'})", "only tokens"),
        ("say({})", "gave no status.token"),
        ("say({'token': 't', 'expirationTimestamp': 'soon'})", "is not a time"),
        ("time.sleep(5)", "no answer within"),
    ],
)
def test_a_plugin_that_gives_no_token_is_a_connection_error_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, said: str
) -> None:
    monkeypatch.setattr(exec_credentials, "RUN_SECONDS", 1.0)
    tokens = ExecTokens(ExecPlugin(plugin(tmp_path, body), api_version=V1))
    with pytest.raises(CredentialPluginError, match=said) as raised:
        tokens.token()
    assert isinstance(raised.value, ConnectionError)


def test_a_missing_plugin_is_named(tmp_path: Path) -> None:
    tokens = ExecTokens(ExecPlugin(str(tmp_path / "nowhere"), api_version=V1))
    with pytest.raises(CredentialPluginError, match="not found"):
        tokens.token()


@pytest.mark.parametrize(
    ("exec_", "said"),
    [
        ({"apiVersion": V1}, "exec.command"),
        ({"command": "x"}, "exec.apiVersion"),
        ({"command": "x", "apiVersion": V1, "args": "-a"}, "exec.args"),
        ({"command": "x", "apiVersion": V1, "env": [{"value": "v"}]}, r"exec.env\[0\]"),
    ],
)
def test_a_bad_exec_section_is_refused_naming_the_field(exec_: dict, said: str) -> None:
    with pytest.raises(KubeconfigError, match=said):
        credentials_from_kubeconfig(kubeconfig(exec_))
