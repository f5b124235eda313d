"""The shipped fleet (or a lab's) on hollow control planes under the real engine: one hollow cluster per stack, each
stack's config its own stack file plus what stands in for the cloud (``gpu-fleet:standInKubeconfig``), the
federation certificates of the cluster's own test CA, the chart archives of ``../shared/charts`` and the central
Grafana's password."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

from components.kubernetes.gateway import server_name
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.pod_contract import BENCHMARK_NAMESPACE
from fleet.model.core.stack_settings import STACK_SETTINGS
from tests.conftest import shared_data
from tests.real.admissions import AdmissionLedger
from tests.real.central import TierCentral
from tests.real.controllers import RealControllers
from tests.real.engine import RealEngine
from tests.real.hollow import HollowCluster, cluster_node_specs

#: What stands in for the cloud's cluster: the hollow control plane's kubeconfig.
KUBECONFIG_SETTING = "gpu-fleet:standInKubeconfig"
#: Every tier stack that can names a pull-request preview identity (gpu-fleet:previewPrincipal), can_i.yaml's user.
PREVIEW_PRINCIPAL = "gpu-fleet-preview"
PREVIEW_SETTING = STACK_SETTINGS["previewPrincipal"]


def has_preview_identity(cluster: Cluster) -> bool:
    """Whether the tier gives ``cluster``'s stack a preview identity: where its cloud takes the setting."""
    return PREVIEW_SETTING.applies_to(cluster.cloud)


def stack_order(fleet: Fleet) -> list[str]:
    """The stacks in the order they can come up: those no other stack reads first, then the central cluster (it reads
    every leaf's federation outputs), then the queues' manager (it reads every worker's)."""
    manager = fleet.dispatch.manager if fleet.dispatch else None

    def rank(cluster: Cluster) -> tuple[int, str]:
        return (2 if cluster.name == manager else 1 if cluster.central else 0, cluster.name)

    return [c.name for c in sorted(fleet.clusters.values(), key=rank)]


def provide_site_claim(on: StackOnHollow) -> None:
    """What a site makes for its cluster's ``checkpoint_claim`` once the stack has made the benchmarks namespace
    (docs/sweeps.md: an existing ReadWriteMany claim there): the claim, bound to a volume of its own (an NFS export
    in name only, which no KWOK node mounts). Without it the sweep pods wait for the claim (found by the tier)."""
    claim = on.cluster.checkpoint_claim
    if claim is None or on.hollow.kubectl("-n", BENCHMARK_NAMESPACE, "get", "pvc", claim, check=False).returncode == 0:
        return
    size = {"storage": "100Gi"}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"site-{claim}"},
        "spec": {
            "capacity": size,
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "nfs": {"server": "nfs.site.invalid", "path": f"/{claim}"},
            "claimRef": {"namespace": BENCHMARK_NAMESPACE, "name": claim},
        },
    }
    request = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": BENCHMARK_NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": f"site-{claim}",
            "resources": {"requests": size},
        },
    }
    on.hollow.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [volume, request]})
    )


@dataclass
class StackOnHollow:
    """One stack of the fleet and the hollow cluster standing in for its cloud's."""

    cluster: Cluster
    hollow: HollowCluster
    stack: auto.Stack
    controllers: RealControllers
    engine: RealEngine


@dataclass
class FleetTier:
    """The fleet's stacks, each on its hollow cluster, under one real engine in ``folder``."""

    fleet: Fleet
    folder: Path
    stacks: dict[str, StackOnHollow] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.engine = RealEngine(self.folder / "engine")
        self.charts = shared_data("GPU_FLEET_CHART_CACHE", "charts", "the pinned Helm charts")
        # where the fleet has queues: the central's Prometheus (collecting before any stack comes up) and what the
        # manager admitted (watched from before its first up, which dispatches the queued workloads it declares)
        self.central: TierCentral | None = None
        self.admissions: AdmissionLedger | None = None

    def on_hollow(self, name: str) -> StackOnHollow:
        """Stack ``name`` on its hollow cluster, started (with every node of its pools) on first use."""
        if name in self.stacks:
            return self.stacks[name]
        cluster = self.fleet.cluster(name)
        hollow = HollowCluster(name, self.folder / "clusters" / name)
        controllers = RealControllers(hollow, index=len(self.stacks) + 1)
        try:
            hollow.start()
            hollow.add_nodes(cluster_node_specs(cluster))
            controllers.start()
            dispatch = self.fleet.dispatch
            if dispatch is not None and self.central is None and shutil.which("prometheus"):
                # without Debian's prometheus only the report's check skips (it says why), not the stacks' ups; kept
                # before it starts, so that stop() ends its process however the start goes
                self.central = TierCentral(self.fleet, self.folder / "central")
                self.central.start()
            if dispatch is not None and name == dispatch.manager:
                checks = frozenset(q.cluster_queue for q in dispatch.queues)
                self.admissions = AdmissionLedger(hollow, checks).start()
        except BaseException:
            controllers.stop()
            hollow.stop()
            raise
        secret_values = {
            KUBECONFIG_SETTING: hollow.kubeconfig.read_text(),
            "gpu-fleet:grafanaAdminPassword": secrets.token_urlsafe(24),
            **{
                f"gpu-fleet:federationCertificates.{part}": pem
                for part, pem in hollow.pki().federation(server_name(name)).items()
            },
        }
        plain = {"gpu-fleet:chartCache": str(self.charts)}
        if has_preview_identity(cluster):
            plain[f"gpu-fleet:{PREVIEW_SETTING.name}"] = PREVIEW_PRINCIPAL
        stack = self.engine.stack(name, plain=plain, secrets=secret_values)
        self.stacks[name] = StackOnHollow(cluster, hollow, stack, controllers, self.engine)
        return self.stacks[name]

    def after_up(self, on: StackOnHollow) -> None:
        """What follows a stack's first ``up``: the central scrapes the cluster's Kueue where it has a part in the
        queues."""
        dispatch = self.fleet.dispatch
        if self.central is not None and dispatch is not None and dispatch.role(on.cluster.name) is not None:
            self.central.scrape_kueue(on)

    def stop(self) -> None:
        """Stop every hollow cluster (each process by its PID), the central's Prometheus and the admissions' watch."""
        if self.admissions is not None:
            self.admissions.stop()
        if self.central is not None:
            self.central.stop()
        for each in self.stacks.values():
            each.controllers.stop()
            each.hollow.stop()

    def __iter__(self) -> Iterator[StackOnHollow]:
        return iter(self.stacks.values())
