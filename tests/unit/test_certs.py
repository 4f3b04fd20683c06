"""The webhook certificate's pure parts: issuing, renewal rules, the Secret's shape."""

from __future__ import annotations

import datetime as dt

from cryptography import x509

from trainjob.certs import Material, issue, needs_renewal, service_names

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
