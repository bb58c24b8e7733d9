"""Certificates and kubeconfigs of hack/local-cluster: a throw-away CA, the API server's serving cert, one
client cert per component identity, the service-account key pair, and TLS contexts to check health.

Why a module of its own: the cluster script grew past what reads in one sitting; this part only turns a
directory into a PKI with the openssl CLI (the cluster needs nothing but the standard library and openssl)
and knows nothing about processes or nodes. hack/local-cluster imports it from hack/lib/.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

CLIENTS = {  # kubeconfig name -> certificate subject (RBAC identity)
    "admin": "/O=system:masters/CN=kubernetes-admin",
    "kube-controller-manager": "/CN=system:kube-controller-manager",
    "kube-scheduler": "/CN=system:kube-scheduler",
    "kwok": "/O=system:masters/CN=kwok",
}


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(pki: Path) -> None:
    """CA, API server serving cert, one client cert per CLIENTS entry, service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    new_key = ["-newkey", "rsa:2048", "-nodes", "-days", "3650"]
    openssl("req", "-x509", *new_key, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=ais-local-ca", cwd=pki)
    openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    sans = "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    certs = {"apiserver": ("/CN=kube-apiserver", f"extendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")}
    certs |= {name: (subj, "extendedKeyUsage=clientAuth\n") for name, subj in CLIENTS.items()}
    for name, (subject, ext) in certs.items():
        (pki / f"{name}.ext").write_text("keyUsage=critical,digitalSignature,keyEncipherment\n" + ext)
        openssl(
            "req",
            "-new",
            *new_key,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=pki,
        )
        sign = f"x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650".split()
        openssl(*sign, "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki)


def kubeconfig(server: str, pki: Path, user: str) -> dict[str, object]:
    ca, base = str(pki / "ca.crt"), str(pki / user)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ais-local", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": user, "user": {"client-certificate": f"{base}.crt", "client-key": f"{base}.key"}}],
        "contexts": [{"name": "ais-local", "context": {"cluster": "ais-local", "user": user}}],
        "current-context": "ais-local",
    }


def serving_cert(pki: Path, name: str, out: Path) -> None:
    """`out`/tls.crt and tls.key: a serving cert for 127.0.0.1 signed by the CA (a webhook the API server calls)."""
    out.mkdir(parents=True, exist_ok=True)
    (pki / f"{name}.ext").write_text(
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n"
    )
    openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(out / "tls.key"),
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=pki)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "3650", "-extfile", f"{name}.ext", "-out", str(out / "tls.crt"), cwd=pki)  # fmt: skip


def tls_context(pki: Path, *, verify: bool) -> ssl.SSLContext:
    if not verify:  # the controller-manager and scheduler serve self-signed certs on 127.0.0.1
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx
