"""The webhook serving certificate, kept by the controller itself (like Kueue's internal cert
management): a CA and a serving certificate in one Secret, written to files for the webhook
server, and the CA injected as `caBundle` into our webhook configurations.

Only the leader creates, renews or restores the Secret and injects the CA; every replica
reads the Secret and serves with it. The leader keeps the last good material in memory, so a
deleted Secret is written back unchanged (the API server's caBundle stays right) rather than
replaced by a new CA. A certificate is renewed when a third of its life is left or when it
does not cover the names it must.

A new CA does not cut off the replicas still serving a certificate of the old one (each reloads
the Secret within its period): the old CA stays in the Secret (`ca-previous.crt`) and in the
caBundle beside the new one until it expires, and the leader injects that bundle before it
writes the new certificate anywhere, so the API server trusts both for the whole switch.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubebase.kinds import API_SERVICE, SECRET, WEBHOOK_CONFIGURATIONS
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster

log = logging.getLogger(__name__)
CA_LIFE = dt.timedelta(days=3650)
CERT_LIFE = dt.timedelta(days=365)
PREVIOUS_CA = "ca-previous.crt"
STRICT_PROBLEM = "not to RFC 5280 (a strict client refuses it)"


KEY_USES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _usage(*allowed: str) -> x509.KeyUsage:
    """A KeyUsage of the named uses only."""
    return x509.KeyUsage(**{use: use in allowed for use in KEY_USES})


CA_USAGE = _usage("digital_signature", "key_cert_sign", "crl_sign")
SERVING_USAGE = _usage("digital_signature")


@dataclass(frozen=True)
class Material:
    """PEM bytes of the CA and the serving certificate with their keys."""

    ca_crt: bytes
    ca_key: bytes
    tls_crt: bytes
    tls_key: bytes
    previous_ca: bytes = b""  # the CA this one replaced, trusted beside it until it expires

    def secret_data(self) -> dict[str, str]:
        pairs = [
            ("ca.crt", self.ca_crt),
            ("ca.key", self.ca_key),
            ("tls.crt", self.tls_crt),
            ("tls.key", self.tls_key),
        ]
        if self.previous_ca:
            pairs.append((PREVIOUS_CA, self.previous_ca))
        return {k: base64.b64encode(v).decode() for k, v in pairs}

    @classmethod
    def from_secret(cls, secret: dict[str, Any] | None) -> Material | None:
        data = (secret or {}).get("data") or {}
        try:
            ca_crt, ca_key, tls_crt, tls_key, previous = (
                base64.b64decode(data[k] if k != PREVIOUS_CA else data.get(k, ""))
                for k in ("ca.crt", "ca.key", "tls.crt", "tls.key", PREVIOUS_CA)
            )
        except (KeyError, ValueError):
            return None
        return cls(ca_crt, ca_key, tls_crt, tls_key, previous)

    def bundle(self, now: dt.datetime) -> bytes:
        """The caBundle: the CA, and the one it replaced while that is still valid."""
        if self.previous_ca and self.previous_ca != self.ca_crt:
            try:
                old = x509.load_pem_x509_certificate(self.previous_ca)
            except ValueError:
                return self.ca_crt
            if old.not_valid_after_utc > now:
                return self.ca_crt.rstrip(b"\n") + b"\n" + self.previous_ca
        return self.ca_crt


def service_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]  # fmt: skip


def needs_renewal(material: Material | None, hosts: list[str], now: dt.datetime) -> str | None:
    """Why `material` should be replaced (None when it need not): it cannot serve `hosts`
    (`unservable`), it is not as strict clients want it, or a third of its life is left."""
    problem = unservable(material, hosts, now)
    if problem is not None or material is None:
        return problem or "missing"
    ca = x509.load_pem_x509_certificate(material.ca_crt)
    cert = x509.load_pem_x509_certificate(material.tls_crt)
    if not (_strict(ca) and _strict(cert)):
        return STRICT_PROBLEM
    for c in (ca, cert):
        life = c.not_valid_after_utc - c.not_valid_before_utc
        if c.not_valid_after_utc - now < life / 3:
            return f"expires on {c.not_valid_after_utc:%Y-%m-%d}"
    return None


def unservable(material: Material | None, hosts: list[str], now: dt.datetime) -> str | None:
    """Why `material` cannot serve `hosts` at all (None when it can): missing, unreadable, not
    signed by its CA, expired, or not covering every host. A standby serves what the leader
    keeps as long as it can, even when the leader (perhaps of an older version, during a
    rolling upgrade) has not renewed it yet."""
    if material is None:
        return "missing"
    try:
        ca = x509.load_pem_x509_certificate(material.ca_crt)
        cert = x509.load_pem_x509_certificate(material.tls_crt)
        serialization.load_pem_private_key(material.tls_key, None)
        serialization.load_pem_private_key(material.ca_key, None)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return "unreadable"
    if cert.issuer != ca.subject:
        return "not signed by its CA"
    for c in (ca, cert):
        if c.not_valid_after_utc <= now:
            return f"expired on {c.not_valid_after_utc:%Y-%m-%d}"
    have = {str(n) for n in names.get_values_for_type(x509.DNSName)} | {
        str(n) for n in names.get_values_for_type(x509.IPAddress)
    }
    missing = [h for h in hosts if h not in have]
    return f"does not cover {missing}" if missing else None


def issue(hosts: list[str], now: dt.datetime, ca: Material | None = None) -> Material:
    """A serving certificate for `hosts` (DNS names or IP addresses), signed by the CA of
    `ca` when it is still good for longer than the new certificate, else by a new CA (which
    keeps `ca`'s, when it is still valid, as the previous one)."""
    ca_key: Any
    previous = b""
    if ca is not None and _ca_outlives(ca, now + CERT_LIFE) and _strict_ca(ca):
        ca_cert = x509.load_pem_x509_certificate(ca.ca_crt)
        ca_key = serialization.load_pem_private_key(ca.ca_key, None)
        ca_crt_pem, ca_key_pem = ca.ca_crt, ca.ca_key
        previous = ca.previous_ca
    else:
        if ca is not None and _ca_outlives(ca, now):
            previous = ca.ca_crt
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook-ca")])
        ca_cert = (
            _builder(name, name, ca_key.public_key(), now, CA_LIFE)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(CA_USAGE, critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        ca_crt_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
        ca_key_pem = _pem_key(ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), now, CERT_LIFE)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(SERVING_USAGE, critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Material(
        ca_crt_pem,
        ca_key_pem,
        cert.public_bytes(serialization.Encoding.PEM),
        _pem_key(key),
        previous,
    )


def _strict(cert: x509.Certificate) -> bool:
    """Whether `cert` has what a strict client asks of ours (OpenSSL's X509_STRICT, the
    default of Python 3.13's `ssl`): a CA its subject key identifier, a serving certificate
    the identifier of the key that signed it."""
    is_ca = cert.issuer == cert.subject
    wanted = x509.SubjectKeyIdentifier if is_ca else x509.AuthorityKeyIdentifier
    try:
        cert.extensions.get_extension_for_class(wanted)
    except x509.ExtensionNotFound:
        return False
    return True


def _strict_ca(ca: Material) -> bool:
    try:
        return _strict(x509.load_pem_x509_certificate(ca.ca_crt))
    except ValueError:
        return False


def _ca_outlives(ca: Material, when: dt.datetime) -> bool:
    try:
        return x509.load_pem_x509_certificate(ca.ca_crt).not_valid_after_utc > when
    except ValueError:
        return False


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: Any, now: dt.datetime, life: dt.timedelta
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + life)
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class CertKeeper:
    """Keeps the Secret, the files and the caBundles in step, in a thread of its own."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        secret: str,
        hosts: list[str],
        configurations: list[str],
        cert_dir: Path,
        leads: Callable[[], bool],
        api_services: list[str] | None = None,
    ) -> None:
        self._cluster, self._ns, self._secret = cluster, namespace, secret
        self._api_services = api_services or []
        self._hosts, self._configs, self._dir, self._leads = hosts, configurations, cert_dir, leads
        self._material: Material | None = None  # the last good one (the leader restores it)
        self.ready = threading.Event()  # the files are there: the webhook server can start

    @property
    def cert_file(self) -> Path:
        return self._dir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self._dir / "tls.key"

    def start(self, stop: threading.Event, period: float = 10.0) -> None:
        def run() -> None:
            waited = 0
            while not stop.is_set():
                try:
                    self.sync()
                except Exception as exc:  # the API may be away; the files in place still serve
                    log.warning(
                        "webhook certificate not kept",
                        extra={
                            "secret": f"{self._ns}/{self._secret}",
                            "error": str(getattr(exc, "reason", exc)),
                        },
                    )
                if not self.ready.is_set():
                    waited += 1
                    if waited % 3 == 0:
                        log.info(
                            "waiting for the webhook certificate (the leader creates it)",
                            extra={"secret": f"{self._ns}/{self._secret}"},
                        )
                stop.wait(period if self.ready.is_set() else 1.0)

        threading.Thread(target=run, name="webhook-certs", daemon=True).start()

    def sync(self) -> None:
        now = dt.datetime.now(dt.UTC)
        secret = self._cluster.get_or_none(SECRET, self._secret, self._ns)
        found = Material.from_secret(secret)
        problem = needs_renewal(found, self._hosts, now)
        material = found if problem is None else None
        if material is None and self._leads():
            kept = (
                self._material if needs_renewal(self._material, self._hosts, now) is None else None
            )
            material = kept or issue(self._hosts, now, found or self._material)
            # The API server trusts the new CA before anything serves with it.
            self._inject(material.bundle(now))
            self._write_secret(secret, material)
            log.info(
                "webhook certificate restored" if kept else "webhook certificate issued",
                extra={"secret": f"{self._ns}/{self._secret}", "why": problem},
            )
        if material is None and unservable(found, self._hosts, now) is None:
            material = found  # a standby serves it until the leader renews it
        if material is None:
            return  # a standby waits for the leader's Secret
        self._material = material
        self._write_files(material)
        self.ready.set()
        if self._leads():
            self._inject(material.bundle(now))

    def _write_secret(self, secret: dict[str, Any] | None, material: Material) -> None:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": self._secret, "namespace": self._ns},
            "data": material.secret_data(),
        }
        if secret is None:
            self._cluster.create(SECRET, body)
        else:
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            self._cluster.replace(SECRET, body)

    def _write_files(self, material: Material) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        for name, data in (
            ("ca.crt", material.ca_crt),
            ("tls.key", material.tls_key),
            ("tls.crt", material.tls_crt),
        ):
            path = self._dir / name
            if path.is_file() and path.read_bytes() == data:
                continue
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_bytes(data)
            os.chmod(tmp, 0o600)
            tmp.replace(path)  # atomic: the webhook server never reads half a file

    def _inject(self, ca_pem: bytes) -> None:
        bundle = base64.b64encode(ca_pem).decode()
        for kind in WEBHOOK_CONFIGURATIONS:
            for name in self._configs:
                try:
                    config = self._cluster.get(kind, name)
                except ApiException as exc:
                    if exc.status == 404:
                        continue  # this install has none of that kind
                    raise
                hooks = config.get("webhooks") or []
                if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
                    continue
                for hook in hooks:
                    hook.setdefault("clientConfig", {})["caBundle"] = bundle
                self._cluster.replace(kind, config)
                log.info(
                    "webhook certificate: caBundle injected",
                    extra={"kind": kind.kind, "object": name},
                )
        for name in self._api_services:
            service = self._cluster.get_or_none(API_SERVICE, name)
            if service is None or (service.get("spec") or {}).get("caBundle") == bundle:
                continue  # none in this install, or up to date
            service.setdefault("spec", {})["caBundle"] = bundle
            self._cluster.replace(API_SERVICE, service)
            log.info(
                "webhook certificate: caBundle injected",
                extra={"kind": "APIService", "object": name},
            )
