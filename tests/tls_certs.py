"""Test certificates made at test time: a CA, a server certificate for localhost/127.0.0.1 and a
client certificate, as PEM files (and a PKCS#12 keystore) in a directory."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TestPki:
    ca_pem: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_p12: Path
    p12_password: str = "p12-secret"


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key, issuer_name, issuer_key, *, ca: bool, sans=()):
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = dt.datetime.now(dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        alt = [x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans]
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> TestPki:
    """Write a CA, a localhost server pair and a client pair (PEM + PKCS#12) into ``directory``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12

    pem = serialization.Encoding.PEM

    def key_pem(k) -> bytes:
        return k.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("kafka-reassign test CA", ca_key, _name("kafka-reassign test CA"), ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("localhost", server_key, ca.subject, ca_key, ca=False, sans=("localhost", "127.0.0.1"))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("kafka-reassign client", client_key, ca.subject, ca_key, ca=False)
    directory.mkdir(parents=True, exist_ok=True)
    pki = TestPki(*(directory / n for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key",
                                            "client.p12")))
    pki.ca_pem.write_bytes(ca.public_bytes(pem))
    pki.server_cert.write_bytes(server.public_bytes(pem))
    pki.server_key.write_bytes(key_pem(server_key))
    pki.client_cert.write_bytes(client.public_bytes(pem))
    pki.client_key.write_bytes(key_pem(client_key))
    pki.client_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", client_key, client, [ca],
        serialization.BestAvailableEncryption(pki.p12_password.encode())))
    return pki
