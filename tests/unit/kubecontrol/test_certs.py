"""The webhook certificate's pure parts: issuing, renewal rules, the Secret's shape."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization

from kubecontrol.certs import Material, issue, needs_renewal, service_names, unservable

NOW = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
HOSTS = [*service_names("tj-webhook", "tj-system"), "127.0.0.1"]


def test_a_new_certificate_covers_the_service_names_and_ips_and_needs_nothing() -> None:
    material = issue(HOSTS, NOW)
    assert needs_renewal(material, HOSTS, NOW) is None
    cert = x509.load_pem_x509_certificate(material.tls_crt)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "tj-webhook",
        "tj-webhook.tj-system",
        "tj-webhook.tj-system.svc",
        "tj-webhook.tj-system.svc.cluster.local",
    ]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_renewal_when_missing_unreadable_expiring_or_short_of_a_name() -> None:
    material = issue(HOSTS, NOW)
    assert needs_renewal(None, HOSTS, NOW) == "missing"
    broken = Material(material.ca_crt, material.ca_key, b"garbage", material.tls_key)
    assert needs_renewal(broken, HOSTS, NOW) == "unreadable"
    late = NOW + dt.timedelta(days=250)  # a third of the serving certificate's year is left
    assert (needs_renewal(material, HOSTS, late) or "").startswith("expires on")
    assert needs_renewal(material, [*HOSTS, "other.example"], NOW) == (
        "does not cover ['other.example']"
    )


def test_a_renewed_certificate_keeps_a_ca_that_outlives_it() -> None:
    first = issue(HOSTS, NOW)
    second = issue(HOSTS, NOW + dt.timedelta(days=250), first)
    assert second.ca_crt == first.ca_crt and second.tls_crt != first.tls_crt
    assert needs_renewal(second, HOSTS, NOW + dt.timedelta(days=250)) is None
    late = NOW + dt.timedelta(days=3500)  # the CA itself has too little left
    assert issue(HOSTS, late, first).ca_crt != first.ca_crt


def test_the_secret_round_trips_and_a_partial_one_reads_as_none() -> None:
    material = issue(HOSTS, NOW)
    secret = {"data": material.secret_data()}
    assert Material.from_secret(secret) == material
    del secret["data"]["ca.key"]
    assert Material.from_secret(secret) is None


def test_a_new_ca_is_trusted_beside_the_old_one_until_the_old_one_expires() -> None:
    """Replicas still serving the old CA's certificate are not refused while they reload."""
    first = issue(HOSTS, NOW)
    late = NOW + dt.timedelta(days=3500)  # the CA has too little left: a new one
    second = issue(HOSTS, late, first)
    assert second.ca_crt != first.ca_crt and second.previous_ca == first.ca_crt
    bundle = x509.load_pem_x509_certificates(second.bundle(late))
    old_cert = x509.load_pem_x509_certificate(first.tls_crt)
    new_cert = x509.load_pem_x509_certificate(second.tls_crt)
    for cert in (old_cert, new_cert):  # each is signed by a CA of the bundle
        assert any(cert.issuer == ca.subject and _signed_by(cert, ca) for ca in bundle)
    assert Material.from_secret({"data": second.secret_data()}) == second
    # A renewal under the new CA carries the previous one on; once expired, it leaves.
    third = issue(HOSTS, late + dt.timedelta(days=250), second)
    assert third.ca_crt == second.ca_crt and third.previous_ca == first.ca_crt
    after = NOW + dt.timedelta(days=3651)
    assert third.bundle(after) == third.ca_crt
    # A CA replaced after it expired is not kept at all.
    assert issue(HOSTS, after, first).previous_ca == b""


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _handshake(material: Material, tmp: Path) -> None:
    """A TLS handshake in memory: our server's certificate, a client that trusts the CA and
    checks the chain as RFC 5280 asks (OpenSSL's X509_STRICT, Python 3.13's default)."""
    (tmp / "tls.crt").write_bytes(material.tls_crt)
    (tmp / "tls.key").write_bytes(material.tls_key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    client_ctx = ssl.create_default_context(cadata=material.ca_crt.decode())
    client_ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    pipes = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]
    client = client_ctx.wrap_bio(pipes[0][0], pipes[0][1], server_hostname="tj-webhook")
    server = server_ctx.wrap_bio(pipes[1][0], pipes[1][1], server_side=True)
    for _ in range(10):  # pass the bytes each way until both are done
        done = 0
        for side in (client, server):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        pipes[1][0].write(pipes[0][1].read())
        pipes[0][0].write(pipes[1][1].read())
        if done == 2:
            return
    raise AssertionError("no handshake")


def test_a_strict_client_trusts_the_certificate(tmp_path: Path) -> None:
    _handshake(issue(HOSTS, dt.datetime.now(dt.UTC)), tmp_path)


def test_a_ca_made_before_strict_checks_is_replaced_and_its_leaf_renewed() -> None:
    old = issue(HOSTS, NOW)
    without = Material(_strip_ca(old), old.ca_key, old.tls_crt, old.tls_key)
    assert needs_renewal(without, HOSTS, NOW) == "not to RFC 5280 (a strict client refuses it)"
    renewed = issue(HOSTS, NOW, without)
    assert renewed.ca_crt != without.ca_crt and renewed.previous_ca == without.ca_crt


def test_a_standby_serves_what_the_leader_keeps_until_it_cannot() -> None:
    """During a rolling upgrade the leader may be of a version that made its CA without key
    identifiers, or may not have renewed yet: a standby of this version still serves with it
    (and gets ready), as long as the certificate is valid and covers the Service."""
    old = issue(HOSTS, NOW)
    without = Material(_strip_ca(old), old.ca_key, old.tls_crt, old.tls_key)
    assert unservable(without, HOSTS, NOW) is None
    assert unservable(old, HOSTS, NOW + dt.timedelta(days=250)) is None  # renewal due
    assert (unservable(old, HOSTS, NOW + dt.timedelta(days=400)) or "").startswith("expired on")
    assert unservable(old, [*HOSTS, "other.example"], NOW) == "does not cover ['other.example']"
    assert unservable(None, HOSTS, NOW) == "missing"


def _strip_ca(material: Material) -> bytes:
    """The CA of `material` as versions before 0.3 made it: no key identifiers, no usage."""
    key = serialization.load_pem_private_key(material.ca_key, None)
    ca = x509.load_pem_x509_certificate(material.ca_crt)
    bare = (
        x509.CertificateBuilder()
        .subject_name(ca.subject)
        .issuer_name(ca.subject)
        .public_key(ca.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(ca.not_valid_before_utc)
        .not_valid_after(ca.not_valid_after_utc)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())  # type: ignore[arg-type]
    )
    return bare.public_bytes(serialization.Encoding.PEM)
