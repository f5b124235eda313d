"""The certificates of one hollow cluster, made with the openssl command: a CA, the API server's serving certificate,
one client certificate per identity, and the service-account signing key."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path.name, cwd=path.parent)


@dataclass(frozen=True)
class Pki:
    """The files under ``folder``: ``ca.crt``/``ca.key``, ``apiserver.crt``/``.key``, ``sa.key``/``sa.pub`` and a
    ``<name>.crt``/``<name>.key`` pair per client made with ``client``."""

    folder: Path

    @classmethod
    def create(cls, folder: Path) -> Pki:
        """A new CA, the API server's certificate (for 127.0.0.1 and the in-cluster names) and the SA key pair."""
        folder.mkdir(parents=True, exist_ok=True)
        _key(folder / "ca.key")
        _openssl(
            "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=gpu-fleet-hollow-ca", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", "ca.crt", cwd=folder,
        )  # fmt: skip
        pki = cls(folder)
        names = "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1"
        pki._sign("apiserver", "/CN=kube-apiserver", "serverAuth", names)
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=folder)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
        return pki

    def _sign(self, name: str, subject: str, usage: str, alt_names: str | None = None) -> None:
        _key(self.folder / f"{name}.key")
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=self.folder)
        extensions = self.folder / f"{name}.ext"
        lines = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature",
            f"extendedKeyUsage={usage}",
        ]
        if alt_names:
            lines.append(f"subjectAltName={alt_names}")
        extensions.write_text("\n".join(lines) + "\n")
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", extensions.name, "-out", f"{name}.crt", cwd=self.folder,
        )  # fmt: skip

    def client(self, name: str, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate for Kubernetes user ``user`` in ``groups``; returns (certificate, key)."""
        subject = "".join(f"/O={group}" for group in groups) + f"/CN={user}"
        self._sign(name, subject, "clientAuth")
        return self.folder / f"{name}.crt", self.folder / f"{name}.key"

    def federation(self, server_name: str) -> dict[str, str]:
        """The five PEM parts of ``gpu-fleet:federationCertificates`` from this CA: its certificate, the gateway's
        serving certificate for ``server_name`` and the central Prometheus' client certificate, with their keys."""
        self._sign("federation-server", f"/CN={server_name}", "serverAuth", f"DNS:{server_name}")
        self._sign("federation-client", "/O=gpu-fleet/CN=gpu-fleet central prometheus", "clientAuth")
        read = lambda name: (self.folder / name).read_text()  # noqa: E731
        return {
            "caCert": read("ca.crt"),
            "serverCert": read("federation-server.crt"),
            "serverKey": read("federation-server.key"),
            "clientCert": read("federation-client.crt"),
            "clientKey": read("federation-client.key"),
        }

    @property
    def ca(self) -> Path:
        """The CA certificate every client and the API server trust."""
        return self.folder / "ca.crt"
