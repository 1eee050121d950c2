"""Many sites, each with its own certificate (issue 40), for test_many_sites.py and
bench/many_sites.py: a CA and N ECDSA P-256 leaves made with `cryptography` (openssl req per
certificate would take a process each), a document root per site with content of its own, and
the --config file that names them all.

make(dir, n) writes, under dir:
  ca.crt                        the CA every leaf is signed by
  certs/NAME.crt, certs/NAME.key  one leaf per site, naming NAME only
  roots/NAME/index.html         "site NAME\n"
  sites.yaml                    tls-port 0, one site per NAME with its pair
and returns the names (s00000.test ...)."""

import datetime
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def site_name(i):
    return f"s{i:05d}.test"


def _cert(subject_cn, issuer, issuer_key, pub, sans=None, ca=False, days=3):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
         .issuer_name(issuer)
         .public_key(pub)
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]),
                            critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_leaf(d, ca_cert, ca_key, name, sans=None):
    """certs/NAME.crt and certs/NAME.key under d, signed by the CA, naming sans (or NAME)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert(name, ca_cert.subject, ca_key, key.public_key(), sans or [name])
    certs = pathlib.Path(d) / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    (certs / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (certs / f"{name}.key").write_bytes(_pem_key(key))
    return certs / f"{name}.crt", certs / f"{name}.key"


def make_ca(d):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ringhttpd many-sites CA")])
    cert = _cert("ringhttpd many-sites CA", name, key, key.public_key(), ca=True)
    (pathlib.Path(d) / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def write_config(d, names, top=""):
    lines = ["tls-port: 0", top, "sites:"] if top else ["tls-port: 0", "sites:"]
    for n in names:
        lines += [f"  - hosts: [{n}]", f"    root: {d}/roots/{n}",
                  f"    tls-cert: {d}/certs/{n}.crt", f"    tls-key: {d}/certs/{n}.key"]
    conf = pathlib.Path(d) / "sites.yaml"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def make(d, n):
    d = pathlib.Path(d)
    ca_cert, ca_key = make_ca(d)
    names = [site_name(i) for i in range(n)]
    for name in names:
        make_leaf(d, ca_cert, ca_key, name)
        root = d / "roots" / name
        root.mkdir(parents=True, exist_ok=True)
        (root / "index.html").write_text(f"site {name}\n")
    write_config(d, names)
    return names
