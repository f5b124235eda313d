"""A hollow cluster: a real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) on loopback,
with KWOK nodes made from a cluster's pools, so that pods are scheduled for real and "run" without a kubelet.

Every process is started here, kept by its PID and stopped by ``stop`` (tests call it from a finalizer). The caller
runs inside a network namespace with only ``lo`` (``tests.real.isolation``): the API server calls webhook and
aggregated-API addresses of the service range (10.96.0.0/16 here), and there they lead nowhere.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.model.core.clusters import Cluster
from fleet.model.placement import pods as placement
from tests.e2e.processes import Process, free_port, patience, wait_for
from tests.real import toolchain
from tests.real.controllers import kwok_exclusion
from tests.real.pki import Pki

SERVICE_RANGE = "10.96.0.0/16"
#: Nodes KWOK takes care of carry this label (``--manage-nodes-with-label-selector``).
KWOK_LABEL = ("gpu-fleet.io/hollow-node", "kwok")
STAGES = Path(__file__).with_name("kwok-stages.yaml")
ADMIN = "gpu-fleet-admin"
FRONT_PROXY = "front-proxy-client"
#: How long a process has to exit after SIGTERM before it is killed: nothing is checked on it, so no test depends on
#: it; it only keeps a stuck process from holding the tier (kube-apiserver drains its watches first).
STOP_GRACE_S = 10.0


@dataclass
class NodeSpec:
    """One KWOK node: its name, labels, taints and allocatable (Kubernetes quantities)."""

    name: str
    pool: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, str]

    def manifest(self) -> dict[str, Any]:
        """The Node object, with the status KWOK's node stage then keeps Ready."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {**self.labels, "kubernetes.io/hostname": self.name, KWOK_LABEL[0]: KWOK_LABEL[1]},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "gpu-fleet.io/pool": self.pool},
            },
            "spec": {"taints": self.taints},
            "status": {"capacity": self.allocatable, "allocatable": self.allocatable},
        }


def _quantities(resources: Mapping[str, int] | None, accelerators: Mapping[str, int]) -> dict[str, str]:
    if resources is None:  # a site flavor whose size the catalogue does not know: a large node with its pool's cards
        return {"cpu": "64", "memory": "256Gi", "pods": "110", **{k: str(v) for k, v in accelerators.items()}}
    out = {}
    for name, value in resources.items():
        if name == "cpu":
            out[name] = f"{value}m"
        else:
            out[name] = str(value)
    return out


def _node_spec(node: placement.Node, index: int, cluster: Cluster, accelerators: Mapping[str, int]) -> NodeSpec:
    """``accelerators``: what the node's pool advertises of its cards (the device plugin's resource, units per node),
    which a node of unknown size gets too (the catalogue's allocatable has them otherwise)."""
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} if t.value else {"key": t.key, "effect": t.effect}
              for t in node.taints]  # fmt: skip
    return NodeSpec(f"{cluster.name}-{node.pool}-{index}", node.pool, dict(node.labels), taints,
                    _quantities(node.allocatable, accelerators))  # fmt: skip


# The API server's audit policy (audit.k8s.io/v1, kubernetes v1.36.3 staging/src/k8s.io/apiserver/pkg/apis/audit/
# v1/types.go): nothing of the admin (system:masters: the tier itself, KWOK), the control plane's components, nodes
# and service accounts (the controllers); the request line and the answer (level Metadata) of every other user, once
# answered (every stage but ResponseComplete omitted).
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted", "Panic"],
    "rules": [
        {
            "level": "None",
            "userGroups": ["system:masters", "system:nodes", "system:serviceaccounts"],
        },
        {"level": "None", "users": ["system:kube-scheduler", "system:kube-controller-manager", "system:apiserver"]},
        {"level": "Metadata"},
    ],
}


def cluster_node_specs(cluster: Cluster) -> list[NodeSpec]:
    """Every node of ``cluster`` at its pools' maximum: the system pool's and each accelerator pool's, each with the
    labels and taints its cloud gives it and the allocatable of its machine (``fleet.model.placement.pods``)."""
    nodes = [placement.system_node(cluster)] * max(cluster.system_pool.max_nodes, 1)
    specs = [_node_spec(node, i, cluster, {}) for i, node in enumerate(nodes)]
    for pool in cluster.all_pools:
        node = placement.pool_node(cluster, pool)
        cards = {pool.resource: pool.units_per_node}
        specs += [_node_spec(node, i, cluster, cards) for i in range(pool.max_nodes)]
    return specs


def _kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> dict[str, Any]:
    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hollow", "cluster": {"server": server, "certificate-authority-data": data(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": data(cert), "client-key-data": data(key)}}],
        "contexts": [{"name": "hollow", "context": {"cluster": "hollow", "user": user}}],
        "current-context": "hollow",
    }


@dataclass
class HollowCluster:
    """One control plane under ``folder``; ``start`` it, ``stop`` it (every process by its PID)."""

    name: str
    folder: Path
    processes: list[Process] = field(default_factory=list)
    server: str = ""

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (system:masters)."""
        return self.folder / "admin.kubeconfig"

    def start(self) -> HollowCluster:
        """Start etcd, the API server, the scheduler, the controller manager and KWOK; return when the API server is
        ready."""
        self.folder.mkdir(parents=True, exist_ok=True)
        pki = Pki.create(self.folder / "pki")
        self._pki = pki
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        etcd = f"http://127.0.0.1:{etcd_port}"
        self._run("etcd", [
            "--name", "hollow", "--data-dir", str(self.folder / "etcd"), "--unsafe-no-fsync",
            "--listen-client-urls", etcd, "--advertise-client-urls", etcd,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"hollow=http://127.0.0.1:{peer_port}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
        ])  # fmt: skip
        p = pki.folder
        front_proxy = pki.client(FRONT_PROXY, FRONT_PROXY)
        self._run("kube-apiserver", [
            "--etcd-servers", etcd, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(api_port), "--tls-cert-file", str(p / "apiserver.crt"),
            "--tls-private-key-file", str(p / "apiserver.key"), "--client-ca-file", str(pki.ca),
            "--service-account-key-file", str(p / "sa.pub"), "--service-account-signing-key-file", str(p / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc", "--service-cluster-ip-range", SERVICE_RANGE,
            "--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--enable-aggregator-routing=true",
            "--endpoint-reconciler-type", "none", "--profiling=false",
            # the aggregation layer's front proxy, which an aggregated API (Kueue's visibility API) authenticates
            "--requestheader-client-ca-file", str(pki.ca), "--requestheader-allowed-names", FRONT_PROXY,
            "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", str(front_proxy[0]), "--proxy-client-key-file", str(front_proxy[1]),
            "--audit-policy-file", str(self._audit_policy()), "--audit-log-path", str(self.audit_log),
            "--audit-log-format", "json", "--audit-log-mode", "blocking",
        ])  # fmt: skip
        self._write_kubeconfig(self.kubeconfig, ADMIN, ("system:masters",))
        wait_for(f"{self.name}'s API server", self._ready, patience(), self.processes)
        scheduler = self._write_kubeconfig(self.folder / "scheduler.kubeconfig", "system:kube-scheduler")
        self._run("kube-scheduler", [
            "--kubeconfig", str(scheduler), "--authentication-kubeconfig", str(scheduler),
            "--authorization-kubeconfig", str(scheduler), "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
        ])  # fmt: skip
        manager = self._write_kubeconfig(self.folder / "controller-manager.kubeconfig",
                                         "system:kube-controller-manager")  # fmt: skip
        self._run("kube-controller-manager", [
            "--kubeconfig", str(manager), "--authentication-kubeconfig", str(manager),
            "--authorization-kubeconfig", str(manager), "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--service-account-private-key-file", str(p / "sa.key"), "--root-ca-file", str(pki.ca),
            "--use-service-account-credentials=true", "--service-cluster-ip-range", SERVICE_RANGE,
            "--cluster-signing-cert-file", str(pki.ca), "--cluster-signing-key-file", str(p / "ca.key"),
            "--controllers", "*,-nodeipam,-cloud-node-lifecycle",
        ])  # fmt: skip
        self._run("kwok", [
            "--kubeconfig", str(self.kubeconfig), "--config", str(self._stages()),
            "--manage-all-nodes=false", f"--manage-nodes-with-label-selector={KWOK_LABEL[0]}={KWOK_LABEL[1]}",
            "--server-address", f"127.0.0.1:{free_port()}", "--node-lease-duration-seconds", "40",
        ])  # fmt: skip
        return self

    @property
    def audit_log(self) -> Path:
        """The API server's audit log: one JSON event per request of a user that is not the cluster's own."""
        return self.folder / "audit.log"

    def _audit_policy(self) -> Path:
        """Who the audit log follows (``AUDIT_POLICY``): every user but the admin, the control plane, nodes and
        service accounts, i.e. the identities the tests act as (the preview identity's requests and their answers)."""
        path = self.folder / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(AUDIT_POLICY))
        return path

    def audited(self, user: str) -> list[dict[str, Any]]:
        """The audit log's events of ``user``, each answered (stage ResponseComplete), in order."""
        if not self.audit_log.is_file():
            return []
        events = [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("user", {}).get("username") == user]

    def _stages(self) -> Path:
        """KWOK's stages (``STAGES``), the pods of the real controllers left out of the one that runs pods."""
        stages = list(yaml.safe_load_all(STAGES.read_text()))
        for stage in stages:
            if stage["metadata"]["name"] == "gpu-fleet-pod-running":
                stage["spec"]["selector"]["matchExpressions"].append(kwok_exclusion())
        path = self.folder / "kwok-stages.yaml"
        path.write_text(yaml.safe_dump_all(stages))
        return path

    def _run(self, binary: str, args: list[str]) -> Process:
        process = Process([str(toolchain.binary(binary)), *args], self.folder / f"{binary}.log")
        self.processes.append(process)
        return process

    def _write_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...] = ()) -> Path:
        cert, key = self._pki.client(user.replace(":", "-"), user, groups)
        path.write_text(yaml.safe_dump(_kubeconfig(self.server, self._pki.ca, cert, key, user)))
        return path

    def pki(self) -> Pki:
        """The cluster's certificates (made by ``start``)."""
        return self._pki

    def client_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for Kubernetes user ``user`` (client certificate) in ``groups``."""
        return self._write_kubeconfig(self.folder / f"{user.replace(':', '-')}.kubeconfig", user, groups)

    def admin_context(self) -> ssl.SSLContext:
        """A TLS context for this API server as its admin (the cluster's CA, the admin's client certificate)."""
        context = ssl.create_default_context(cafile=str(self._pki.ca))
        admin = self._pki.folder / ADMIN.replace(":", "-")
        context.load_cert_chain(admin.with_suffix(".crt"), admin.with_suffix(".key"))
        return context

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.server}/readyz", context=self.admin_context(), timeout=5) as response:
            return response.status == 200

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run the built kubectl against this cluster (the admin's kubeconfig unless another is given)."""
        command = [str(toolchain.binary("kubectl")), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args]
        result = subprocess.run(command, capture_output=True, text=True, input=input, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def get(self, *args: str) -> dict[str, Any]:
        """``kubectl get ... -o json`` as a dict."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def add_nodes(self, nodes: Iterable[NodeSpec]) -> None:
        """Create the KWOK nodes and wait until every one of them is Ready."""
        specs = list(nodes)
        manifests = {"apiVersion": "v1", "kind": "List", "items": [n.manifest() for n in specs]}
        self.kubectl("create", "-f", "-", input=json.dumps(manifests))

        def all_ready() -> bool:
            items = self.get("nodes", "-l", f"{KWOK_LABEL[0]}={KWOK_LABEL[1]}")["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                for c in n.get("status", {}).get("conditions", [])
                if c["type"] == "Ready" and c["status"] == "True"
            }
            # the node lifecycle controller lifts node.kubernetes.io/not-ready a moment after Ready
            lifecycle = {
                n["metadata"]["name"]
                for n in items
                for t in n.get("spec", {}).get("taints", [])
                if t["key"].startswith("node.kubernetes.io/")
            }
            return {n.name for n in specs} <= ready - lifecycle

        wait_for(f"{self.name}'s {len(specs)} KWOK nodes Ready", all_ready, patience(), self.processes)

    def stop(self) -> None:
        """Stop every process started here, newest first, by its PID."""
        for process in reversed(self.processes):
            if process.alive():
                os.kill(process.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in reversed(self.processes):
            try:
                process.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{process.log.name}: still running {STOP_GRACE_S:g} s after SIGTERM, killed", flush=True)
                os.kill(process.proc.pid, signal.SIGKILL)
            process.stop()
        self.processes.clear()

    def logs(self) -> str:
        """The end of every process' log."""
        return "\n".join(p.logs(tail=2000) for p in self.processes)
