"""Our API client's pure parts: quantities, credentials from kubeconfigs and from a pod."""

from __future__ import annotations

import base64
import datetime as dt
import os
import subprocess
import sys
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pycurl
import pytest
import yaml
from kubernetes.utils import parse_quantity as client_parse_quantity

from kubecontrol.certs import issue
from kubecontrol.client import ApiClient, ApiException, _answer_error, _curl_setup
from kubecontrol.credentials import (
    KubeconfigError,
    credentials_from_kubeconfig,
    in_cluster_credentials,
    load_credentials,
)
from trainjob_api.quantity import parse_quantity

VALID = [
    "0", "1", "-1", "+2", "1.5", ".5", "5.", "100m", "250u", "3n", "2k", "4M", "1G", "2T", "1P",
    "1E", "1Ki", "512Mi", "4Gi", "1Ti", "1Pi", "1Ei", "1.5Gi", "0.1", "1e3", "1E3", "1e-3",
    "2.5E+2", "9223372036854775807",
]  # fmt: skip


@pytest.mark.parametrize("text", VALID)
def test_quantities_read_as_the_kubernetes_client_reads_them(text: str) -> None:
    assert parse_quantity(text) == client_parse_quantity(text)


@pytest.mark.parametrize(
    "text", ["", "Mi", "1.5ki", "1KiB", "NaN", "Infinity", "1 Gi", "--1", "1e", "0x10", "1.2.3"]
)
def test_what_is_not_a_quantity_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


def test_numbers_from_json_are_quantities_too() -> None:
    assert parse_quantity(4) == Decimal(4)
    assert parse_quantity(0.5) == Decimal("0.5")
    for bad in (True, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            parse_quantity(bad)


CA = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))


def kubeconfig(user: dict[str, object], cluster: dict[str, object] | None = None) -> dict:  # type: ignore[type-arg]
    return {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "ns"}}],
        "clusters": [
            {
                "name": "k",
                "cluster": cluster
                or {
                    "server": "https://127.0.0.1:6443/",
                    "certificate-authority-data": base64.b64encode(CA.ca_crt).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": user}],
    }


def test_a_token_kubeconfig_gives_server_ca_token_and_namespace() -> None:
    creds = credentials_from_kubeconfig(kubeconfig({"token": "t0k"}))
    assert creds.server == "https://127.0.0.1:6443"
    assert creds.ca_pem == CA.ca_crt.decode() and creds.token == "t0k"
    assert creds.namespace == "ns"
    client = ApiClient(creds)  # builds the TLS context: the CA loads
    assert client.bearer_token() == "t0k"
    assert client.url("/api/v1/pods", {"labelSelector": "a=b", "fieldSelector": ""}) == (
        "/api/v1/pods?labelSelector=a%3Db"
    )
    behind_proxy = ApiClient(replace(creds, server="https://proxy.example/k8s/clusters/c1/"))
    assert behind_proxy.url("/api/v1/pods") == "/k8s/clusters/c1/api/v1/pods"


def test_inline_client_certificates_load(tmp_path: Path) -> None:
    user = {
        "client-certificate-data": base64.b64encode(CA.tls_crt).decode(),
        "client-key-data": base64.b64encode(CA.tls_key).decode(),
    }
    creds = credentials_from_kubeconfig(kubeconfig(user))
    assert creds.cert_pem == CA.tls_crt and creds.key_pem == CA.tls_key
    ApiClient(creds)  # loads the chain from memory (through a private temporary directory)


def test_relative_files_are_read_from_the_kubeconfigs_directory(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA.ca_crt)
    (tmp_path / "token").write_text("from-file\n")
    cfg = kubeconfig(
        {"tokenFile": "token"},
        {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"},
    )
    creds = credentials_from_kubeconfig(cfg, base_dir=tmp_path)
    assert creds.ca_file == str(tmp_path / "ca.crt")
    assert ApiClient(creds).bearer_token() == "from-file"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(cfg))  # a file: its own directory
    assert load_credentials(tmp_path / "kubeconfig") == creds


@pytest.mark.parametrize(
    ("user", "fragment"),
    [
        ({"exec": {"command": "aws"}}, "exec.apiVersion"),  # exec: only as client-go runs it
        ({"auth-provider": {"name": "oidc"}}, "'auth-provider'"),
        ({"username": "a", "password": "b"}, "'username'"),
        ({"client-key-data": "%%"}, "client-key-data is not base64"),
        ({"client-certificate": "/crt"}, "has a client certificate but no client-key"),
        ({"client-key-data": "S0VZ"}, "has a client key but no client-certificate"),
        ({"as-groups": ["g"]}, "need 'as'"),
    ],
)
def test_what_the_client_cannot_do_is_refused_naming_the_field(
    user: dict[str, object], fragment: str
) -> None:
    with pytest.raises(KubeconfigError, match=fragment) as err:
        credentials_from_kubeconfig(kubeconfig(user))
    assert "aws" not in str(err.value) and "oidc" not in str(err.value)


def test_contexts_clusters_and_users_must_be_listed() -> None:
    cfg = kubeconfig({"token": "t"})
    cfg["contexts"][0]["context"]["cluster"] = "gone"
    with pytest.raises(KubeconfigError, match="cluster 'gone' is not listed"):
        credentials_from_kubeconfig(cfg)
    with pytest.raises(KubeconfigError, match="context 'other' is not listed"):
        credentials_from_kubeconfig(kubeconfig({"token": "t"}), context="other")


def test_in_cluster_credentials_read_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in (("token", "sa-token"), ("ca.crt", CA.ca_crt.decode()), ("namespace", "sys")):
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    creds = in_cluster_credentials(tmp_path)
    assert creds.server == "https://[fd00::1]:443" and creds.namespace == "sys"
    client = ApiClient(creds)
    assert client.bearer_token() == "sa-token"
    (tmp_path / "token").write_text("rotated")
    client._token_read -= 61  # a minute on: kubelet may have rotated it
    assert client.bearer_token() == "rotated"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(KubeconfigError, match="not in a cluster"):
        in_cluster_credentials(tmp_path)


def test_api_exception_carries_status_reason_and_body() -> None:
    exc = ApiException(409, "Conflict", '{"message":"x"}', {"Retry-After": "1"})
    assert (exc.status, exc.reason, exc.headers["Retry-After"]) == (409, "Conflict", "1")
    assert "(409) Reason: Conflict" in str(exc) and '"message"' in str(exc)


def test_an_error_answer_keeps_the_final_status_lines_reason_and_headers() -> None:
    head = [
        b"HTTP/1.1 100 Continue\r\n", b"X-Early: 1\r\n", b"\r\n",
        b"HTTP/1.1 429 Too Many Requests\r\n", b"Retry-After: 1\r\n",
        b"Content-Type: application/json\r\n", b"\r\n",
    ]  # fmt: skip
    exc = _answer_error(429, head, b'{"code":429}')
    assert (exc.status, exc.reason, exc.body) == (429, "Too Many Requests", '{"code":429}')
    assert exc.headers == {"Retry-After": "1", "Content-Type": "application/json"}
    assert _answer_error(500, [b"HTTP/1.1 500\r\n"], b"").reason == ""


def test_curl_is_given_the_kubeconfigs_tls_settings(tmp_path: Path) -> None:
    creds = credentials_from_kubeconfig(kubeconfig({"token": "t"}))
    origin, options = _curl_setup(creds)
    settings = dict(options)
    assert origin == "https://127.0.0.1:6443"
    assert settings[pycurl.CAINFO_BLOB] == CA.ca_crt and settings[pycurl.PROXY] == ""
    assert pycurl.SSL_VERIFYPEER not in settings  # verified, as by default
    for unset in (pycurl.CAINFO, pycurl.CAPATH, pycurl.PROXY_CAINFO, pycurl.PROXY_CAPATH):
        assert settings[unset] is None, unset
    assert settings[pycurl.PROXY_CAINFO_BLOB] == CA.ca_crt
    import ssl as _ssl

    found = _ssl.get_default_verify_paths()
    system = dict(_curl_setup(replace(creds, ca_pem=None))[1])
    assert [
        system[o] for o in (pycurl.CAINFO, pycurl.CAPATH, pycurl.PROXY_CAINFO, pycurl.PROXY_CAPATH)
    ] == [found.cafile, found.capath] * 2
    # A connection not made in 10 s fails; idle ones are probed (a peer gone without a word).
    assert settings[pycurl.CONNECTTIMEOUT_MS] == 10_000 and settings[pycurl.TCP_KEEPALIVE] == 1
    assert (settings[pycurl.TCP_KEEPIDLE], settings[pycurl.TCP_KEEPINTVL]) == (30, 10)

    insecure = dict(_curl_setup(replace(creds, ca_pem=None, insecure=True))[1])
    assert insecure[pycurl.SSL_VERIFYPEER] == 0 and insecure[pycurl.SSL_VERIFYHOST] == 0
    assert insecure[pycurl.PROXY_SSL_VERIFYPEER] == 0 and insecure[pycurl.PROXY_SSL_VERIFYHOST] == 0

    files = replace(creds, ca_pem=None, ca_file="/ca", cert_file="/crt", key_file="/key")
    from_files = dict(_curl_setup(files)[1])
    assert (from_files[pycurl.CAINFO], from_files[pycurl.SSLCERT]) == ("/ca", "/crt")
    assert (
        from_files[pycurl.PROXY_CAINFO],
        from_files[pycurl.CAPATH],
        from_files[pycurl.PROXY_CAPATH],
    ) == ("/ca", None, None)
    inline = dict(_curl_setup(replace(creds, cert_pem=b"C", key_pem=b"K"))[1])
    assert (inline[pycurl.SSLCERT_BLOB], inline[pycurl.SSLKEY_BLOB]) == (b"C", b"K")

    v6 = replace(creds, server="https://[fd00::1]:443", tls_server_name="kube.internal")
    origin, options = _curl_setup(v6)
    assert origin == "https://kube.internal:443"
    assert dict(options)[pycurl.CONNECT_TO] == ["kube.internal:443:[fd00::1]:443"]
    no_port = replace(creds, server="https://[fd00::1]", tls_server_name="kube.internal")
    origin, options = _curl_setup(no_port)
    assert origin == "https://kube.internal:443"
    assert dict(options)[pycurl.CONNECT_TO] == ["kube.internal:443:[fd00::1]:443"]
    by_address = replace(creds, server="https://[fd00::1]:443", tls_server_name="fd00::2")
    origin, options = _curl_setup(by_address)
    assert origin == "https://[fd00::2]:443"
    assert dict(options)[pycurl.CONNECT_TO] == ["[fd00::2]:443:[fd00::1]:443"]


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        ("kube.internal", "kube.internal"),
        ("api.example.com.", "api.example.com."),
        ("10.0.0.1", "10.0.0.1"),
        ("fd00:0::1", "fd00::1"),
        ("::ffff:10.0.0.1", "10.0.0.1"),  # as its IPv4 address, which a certificate names
        ("API.Example.COM", "API.Example.COM"),
        ("a." * 126 + "a", "a." * 126 + "a"),  # 253 characters
        ("x" * 63 + ".example", "x" * 63 + ".example"),
        ("", None),
        (None, None),
        ("10.example", "10.example"),
        ("kube.1a", "kube.1a"),
    ],
)
def test_tls_server_name_is_a_host_name_or_an_address(given: object, taken: str | None) -> None:
    cluster = {"server": "https://127.0.0.1:6443", "tls-server-name": given}
    assert credentials_from_kubeconfig(kubeconfig({"token": "t"}, cluster)).tls_server_name == taken


@pytest.mark.parametrize(
    "given",
    [
        "evil.example/api?x=",  # a path: every request's URL would change
        "evil.example/api",
        "kube.internal\n",
        "kube.internal ",
        "bad-.example",
        "a..b",
        "kubé.example",
        "kube_internal",
        "a." * 126 + "ab",  # 254 characters
        "10.0.0.1/8",
        "fe80::1%eth0",  # a zone: libcurl would connect to fe80::1 itself
        "fe80::1%a@b",
        "2130706433",  # libcurl reads each of these as 127.0.0.1 (or 15.0.0.1), and connects there
        "127.1",
        "0x7f.0.0.1",
        "017.0.0.1",
        "0x7f000001",
        "127.1.",
        "kube.1",
        "999.1.1.1",
        0,
        False,
        [],
        "user@evil.example",
        "evil.example:8443",
        "a b",
        "-bad.example",
        "x" * 64 + ".example",
        "a." * 127 + "a",
        ["kube.internal"],
        7,
    ],
)
def test_a_tls_server_name_that_is_no_host_is_refused_with_its_field(given: object) -> None:
    cluster = {"server": "https://127.0.0.1:6443", "tls-server-name": given}
    with pytest.raises(KubeconfigError, match="cluster 'k': tls-server-name must be a host name"):
        credentials_from_kubeconfig(kubeconfig({"token": "t"}, cluster))


@pytest.mark.parametrize(
    ("package", "watches"),
    [
        ("dispatcher", "dispatcher.controller.watches"),
        ("worker_controller", "worker_controller.watches"),
    ],
)
def test_the_controllers_never_load_the_kubernetes_client(package: str, watches: str) -> None:
    """The entry point keeps it out, although it is installed here (the tests use it)."""
    code = (
        "import contextlib, sys\n"
        f"from {package}.__main__ import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"  # imports the whole controller, then exits
        f"assert '{watches}' in sys.modules\n"
        "loaded = [m for m, mod in sys.modules.items() if m.startswith('kubernetes') and mod]\n"
        "print('loaded:', loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )  # fmt: skip
    assert out.stdout.strip().endswith("loaded: []"), out.stdout


@pytest.mark.parametrize("value", ["false", "true", 0, "no"])
def test_insecure_skip_tls_verify_must_be_a_boolean(value: object) -> None:
    """A quoted "false" read as truthy would turn verification off: refused, as client-go
    refuses it."""
    cluster = {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": value}
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify must be true or false"):
        credentials_from_kubeconfig(kubeconfig({"token": "t"}, cluster))
    for flag, insecure in ((True, True), (False, False), (None, False)):
        cluster["insecure-skip-tls-verify"] = flag
        assert credentials_from_kubeconfig(kubeconfig({"token": "t"}, cluster)).insecure is insecure


def test_a_certificate_file_goes_with_inline_key_data_and_data_wins(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(CA.tls_crt)
    (tmp_path / "old.key").write_bytes(b"not this one")
    user = {
        "client-certificate": "tls.crt",
        "client-key-data": base64.b64encode(CA.tls_key).decode(),
        "client-key": "old.key",
    }
    creds = credentials_from_kubeconfig(kubeconfig(user), base_dir=tmp_path)
    assert creds.client_cert() == (CA.tls_crt, CA.tls_key)
    ApiClient(creds)  # the chain loads
    settings = dict(_curl_setup(creds)[1])
    assert (settings[pycurl.SSLCERT_BLOB], settings[pycurl.SSLKEY_BLOB]) == (CA.tls_crt, CA.tls_key)


def test_impersonation_and_proxy_url_are_used_not_ignored() -> None:
    user = {
        "token": "t",
        "as": "alice",
        "as-uid": "1234",
        "as-groups": ["team-a", "system:authenticated"],
        "as-user-extra": {"scopes/x": ["read", "write"]},
    }
    cluster = {"server": "https://127.0.0.1:6443", "proxy-url": "socks5://127.0.0.1:1080"}
    creds = credentials_from_kubeconfig(kubeconfig(user, cluster))
    assert creds.impersonate == (
        ("Impersonate-User", "alice"),
        ("Impersonate-Uid", "1234"),
        ("Impersonate-Group", "team-a"),
        ("Impersonate-Group", "system:authenticated"),
        ("Impersonate-Extra-scopes%2Fx", "read"),
        ("Impersonate-Extra-scopes%2Fx", "write"),
    )
    assert dict(_curl_setup(creds)[1])[pycurl.PROXY] == "socks5://127.0.0.1:1080"
    cluster["proxy-url"] = "ftp://proxy"
    with pytest.raises(KubeconfigError, match="proxy-url must be an http, https or socks5 URL"):
        credentials_from_kubeconfig(kubeconfig(user, cluster))


def test_a_refused_token_from_a_file_is_read_again_at_once(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("old")
    creds = credentials_from_kubeconfig(
        kubeconfig({"tokenFile": str(tmp_path / "token")}), base_dir=tmp_path
    )
    client = ApiClient(creds)
    assert client.bearer_token() == "old"
    (tmp_path / "token").write_text("rotated")
    assert client.bearer_token() == "old"  # within the minute: the cached one
    assert client.token_refused()  # a 401: the file is read at the next request
    assert client.bearer_token() == "rotated"
    inline = ApiClient(credentials_from_kubeconfig(kubeconfig({"token": "t"})))
    assert not inline.token_refused()  # nothing to read again: the 401 stands


class _Handle:
    """Records what a request sets on its libcurl handle."""

    def __init__(self) -> None:
        self.options: dict[int, object] = {}

    def setopt(self, option: int, value: object) -> None:
        self.options[option] = value

    def unsetopt(self, option: int) -> None:
        self.options.pop(option, None)


@pytest.mark.parametrize(
    ("timeout", "sent"), [(None, 0), (0.0, 1), (0.0004, 1), (0.25, 250), (30.0, 30_000)]
)
def test_a_timeout_goes_to_libcurl_in_milliseconds_and_never_as_none_by_rounding(
    timeout: float | None, sent: int
) -> None:
    """libcurl takes 0 for "no timeout": a deadline's last fraction of a millisecond, or one
    already passed, is sent as 1 ms; only None means none."""
    api = ApiClient(credentials_from_kubeconfig(kubeconfig({"token": "t"})))
    handle = _Handle()
    api._prepare(
        handle, "GET", "/api", None, None, "application/json", "application/json", timeout, None
    )  # type: ignore[arg-type]
    assert handle.options[pycurl.TIMEOUT_MS] == sent
