"""Prometheus federation across the fleet: an mTLS gateway on every leaf, federation jobs on the central one.

Leaf side (every non-central cluster): Pulumi generates a CA, a serving certificate for the gateway and a
client certificate for the central Prometheus (pulumi-tls; private keys are secrets). An nginx gateway
requires a client certificate from that CA and proxies only ``/federate`` to the in-cluster Prometheus.
(The operator's own ``web.tlsConfig`` with client certificates breaks the Prometheus pod's probes,
prometheus-operator #5419, and it has no basic auth, #4200.) The gateway's LoadBalancer accepts only the
source ranges in ``gpu-fleet:federationSourceRanges``. The stack exports the address, CA, client
certificate and key (secret) for the central stack.

Central side: one ``StackReference`` per other cluster; its outputs become a Kubernetes Secret mounted in
the central Prometheus and one federation scrape job (``fleet.model.monitoring.prometheus``) per cluster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote_plus

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

from components.kubernetes.deployment import app_labels, single_replica_deployment
from components.kubernetes.images import image
from components.kubernetes.pod_security import container_security, pod_security
from fleet.model.monitoring import prometheus

GATEWAY_PORT = 8443
NGINX_TEMPLATE = Path(__file__).with_name("gateway.nginx.conf")
GATEWAY_NAME = "federation-gateway"
# The user of nginxinc/nginx-unprivileged (its Dockerfile: `USER $UID`, UID=101).
GATEWAY_UID = 101
SECRETS_DIR = "/etc/prometheus/secrets"
# The gateway's memory limit, and what bounds nginx's use of it (gateway.nginx.conf): its workers and their connections,
# and what one stalled TLS handshake keeps (measured on nginx 1.22 with OpenSSL 3: about 46 KiB, issue 44; the
# end-to-end test holds a full house of them and measures the processes' memory under the limit).
GATEWAY_MEMORY_MIB = 128
GATEWAY_WORKERS = 2
GATEWAY_WORKER_CONNECTIONS = 1024
STALLED_HANDSHAKE_KIB = 46


def server_name(cluster: str) -> str:
    """The DNS name in a leaf gateway's certificate; the central checks it whatever the address is."""
    return f"federation.{cluster}.gpu-fleet.internal"


def federate_args_pattern(selectors: Sequence[str]) -> str:
    """The query strings the gateway lets through to ``/federate``: one or more ``match[]`` parameters, each one
    of ``selectors`` (bare metric names), URL-encoded as the central Prometheus sends them.

    Prometheus builds the scrape URL with Go's ``url.Values.Encode`` (prometheus/prometheus scrape/target.go),
    which escapes with ``url.QueryEscape``: ``[`` and ``]`` become ``%5B`` and ``%5D``, ``:`` becomes ``%3A``;
    letters, digits and ``_`` stay as they are. ``urllib.parse.quote_plus`` with ``safe=""`` escapes the same set.
    Any subset and order is accepted, so a leaf deployed before the central (which adds or drops a metric) keeps
    answering; a selector the fleet does not federate, or any other parameter, is refused.
    """
    names = prometheus.check_selectors(list(selectors))
    for name in names:
        if not prometheus.METRIC_NAME.match(name):
            raise ValueError(f"federation selector {name!r} is not a bare metric name: the gateway cannot enforce it")
    key = quote_plus("match[]", safe="")
    choice = "|".join(re.escape(quote_plus(n, safe="")) for n in names)
    return f"^{key}=(?:{choice})(?:&{key}=(?:{choice}))*$"


def gateway_nginx_conf(upstream: str, selectors: Sequence[str]) -> str:
    """nginx configuration of the gateway (the template gateway.nginx.conf beside this module, filled in)."""
    values = {"port": str(GATEWAY_PORT), "args_pattern": federate_args_pattern(selectors), "upstream": upstream}
    lines = NGINX_TEMPLATE.read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(line for line in lines if not line.startswith("#"))  # the template's own notes stay out
    for name, value in values.items():
        text = text.replace(f"@@{name}@@", value)
    if "@@" in text:
        raise ValueError(f"{NGINX_TEMPLATE.name}: a placeholder is left unfilled")
    return text


class FederationEndpoint(pulumi.ComponentResource):
    """The authenticated federation endpoint of a leaf cluster (mTLS gateway in front of its Prometheus)."""

    TYPE = "gpufleet:index:FederationEndpoint"

    def __init__(
        self,
        cluster: str,
        namespace: pulumi.Input[str],
        prometheus_url: str,
        source_ranges: list[str],
        selectors: Sequence[str],
        opts: pulumi.ResourceOptions | None = None,
        node_selector: dict[str, str] | None = None,
        *,
        registry: str,
        certificates: dict[str, str] | None = None,
    ):
        """``registry``: where the gateway's nginx image is pulled from (the policy's ``registry``);
        ``certificates``: the site's own (``gpu-fleet:federationCertificates``), else the stack makes a CA and both
        certificates with the TLS provider."""
        super().__init__(self.TYPE, f"{cluster}-federation", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        if certificates:
            # the site's own CA signed them (gpu-fleet:federationCertificates): no TLS resource of ours
            ca_cert: pulumi.Input[str] = certificates["caCert"]
            server_cert: pulumi.Input[str] = certificates["serverCert"]
            server_key = pulumi.Output.secret(certificates["serverKey"])
            self.client_cert = pulumi.Output.from_input(certificates["clientCert"])
            self.client_key = pulumi.Output.secret(certificates["clientKey"])
        else:
            ca_cert, server_cert, server_key, self.client_cert, self.client_key = _stack_made_certificates(
                cluster, child
            )
        self.ca_pem = pulumi.Output.from_input(ca_cert)
        secret = k8s.core.v1.Secret(
            f"{cluster}-federation-gateway-tls",
            metadata={"name": f"{GATEWAY_NAME}-tls", "namespace": namespace},
            type="Opaque",
            string_data={"tls.crt": server_cert, "tls.key": server_key, "ca.crt": ca_cert},
            opts=child,
        )
        conf = k8s.core.v1.ConfigMap(
            f"{cluster}-federation-gateway-conf",
            metadata={"name": f"{GATEWAY_NAME}-conf", "namespace": namespace},
            data={"nginx.conf": gateway_nginx_conf(prometheus_url, selectors)},
            opts=child,
        )
        labels = app_labels(GATEWAY_NAME)
        single_replica_deployment(
            f"{cluster}-federation-gateway",
            GATEWAY_NAME,
            namespace,
            {
                # nginx-unprivileged runs as uid 101 and writes only under /tmp (an emptyDir here).
                "automountServiceAccountToken": False,
                "securityContext": pod_security(GATEWAY_UID),
                "containers": [
                    {
                        "name": "nginx",
                        "image": image("nginx", registry),
                        "args": ["nginx", "-g", "daemon off;", "-c", "/etc/gateway/conf/nginx.conf"],
                        "ports": [{"name": "https", "containerPort": GATEWAY_PORT}],
                        "readinessProbe": {"tcpSocket": {"port": "https"}, "periodSeconds": 10},
                        "resources": {
                            "requests": {"cpu": "20m", "memory": "32Mi"},
                            "limits": {"cpu": "500m", "memory": f"{GATEWAY_MEMORY_MIB}Mi"},
                        },
                        "volumeMounts": [
                            {"name": "tls", "mountPath": "/etc/gateway/tls", "readOnly": True},
                            {"name": "conf", "mountPath": "/etc/gateway/conf", "readOnly": True},
                            {"name": "tmp", "mountPath": "/tmp"},
                        ],
                        "securityContext": container_security(),
                    }
                ],
                "volumes": [
                    {"name": "tmp", "emptyDir": {}},
                    {"name": "tls", "secret": {"secretName": secret.metadata["name"]}},
                    {"name": "conf", "configMap": {"name": conf.metadata["name"]}},
                ],
            },
            child,
            node_selector,
        )
        service = k8s.core.v1.Service(
            f"{cluster}-federation-gateway",
            metadata={"name": GATEWAY_NAME, "namespace": namespace, "labels": labels},
            spec={
                "type": "LoadBalancer",
                "selector": labels,
                "ports": [{"name": "https", "port": 443, "targetPort": "https"}],
                "loadBalancerSourceRanges": source_ranges,
            },
            opts=child,
        )
        ingress = service.status.load_balancer.ingress  # type: ignore[union-attr]
        self.address = ingress.apply(lambda items: f"{(items[0].ip or items[0].hostname)}:443" if items else "")
        self.server_name = server_name(cluster)
        self.register_outputs({"address": self.address, "server_name": self.server_name})


def _stack_made_certificates(
    cluster: str, child: pulumi.ResourceOptions
) -> tuple[pulumi.Output[str], pulumi.Output[str], pulumi.Output[str], pulumi.Output[str], pulumi.Output[str]]:
    """A CA of the stack's own and the gateway's serving and the central's client certificate it signs (the TLS
    provider, state in the stack): (CA, server certificate, server key, client certificate, client key)."""
    tls_provider = tls.Provider(f"{cluster}-tls", opts=child)
    certs = pulumi.ResourceOptions(parent=child.parent, provider=tls_provider)
    ca_key = tls.PrivateKey(f"{cluster}-federation-ca-key", algorithm="ECDSA", ecdsa_curve="P256", opts=certs)
    ca = tls.SelfSignedCert(
        f"{cluster}-federation-ca",
        private_key_pem=ca_key.private_key_pem,
        is_ca_certificate=True,
        subject={"common_name": f"gpu-fleet federation CA {cluster}", "organization": "gpu-fleet"},
        validity_period_hours=24 * 365 * 3,
        early_renewal_hours=24 * 30,
        allowed_uses=["cert_signing", "crl_signing", "digital_signature"],
        opts=certs,
    )

    def signed(
        role: str, common_name: str, dns_names: list[str], uses: list[str]
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        key = tls.PrivateKey(f"{cluster}-federation-{role}-key", algorithm="ECDSA", ecdsa_curve="P256", opts=certs)
        csr = tls.CertRequest(
            f"{cluster}-federation-{role}-csr",
            private_key_pem=key.private_key_pem,
            subject={"common_name": common_name, "organization": "gpu-fleet"},
            dns_names=dns_names or None,
            opts=certs,
        )
        cert = tls.LocallySignedCert(
            f"{cluster}-federation-{role}-cert",
            cert_request_pem=csr.cert_request_pem,
            ca_private_key_pem=ca_key.private_key_pem,
            ca_cert_pem=ca.cert_pem,
            validity_period_hours=24 * 365,
            early_renewal_hours=24 * 30,
            allowed_uses=uses,
            opts=certs,
        )
        return cert.cert_pem, pulumi.Output.secret(key.private_key_pem)

    server_cert, server_key = signed(
        "server",
        server_name(cluster),
        [server_name(cluster)],
        ["digital_signature", "key_encipherment", "server_auth"],
    )
    client_cert, client_key = signed(
        "client", "gpu-fleet central prometheus", [], ["digital_signature", "key_encipherment", "client_auth"]
    )
    return ca.cert_pem, server_cert, server_key, client_cert, client_key
