"""The accelerator catalogue: which machine of which cloud carries each card (data in catalogue.yaml)."""

from __future__ import annotations

import dataclasses
import datetime
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pydantic

from fleet.model.core import pod_contract
from fleet.model.core.clouds import cloud_rules, sweep_pool_clouds
from fleet.model.core.taints import Taint
from fleet.model.core.validation import StrictModel, validate_document
from fleet.model.core.yaml_source import read_yaml

CATALOGUE_FILE = Path(__file__).with_name("catalogue.yaml")

Cloud = Literal["gcp", "aws", "azure", "openstack", "existing"]
CLOUDS: tuple[str, ...] = ("openstack", "gcp", "aws", "azure", "existing")


class Reservations(StrictModel):
    """How a cloud's nodes reserve CPU and memory for the system: a published formula (``reserved_by``)."""

    formula: Literal["gke", "eks", "aks"]
    max_pods: int = pydantic.Field(ge=1)  # pods per node unless the machine type says otherwise
    source: str


# A GCP AI zone: `<region>-ai<deployment group><letter>` (Compute Engine "Regions and zones", "AI zone")
AI_ZONE = re.compile(r"^(?P<region>.+)-ai[0-9]+[a-z]$")


class Locations(StrictModel):
    """Where a cloud's clusters may be: its regions (Azure: locations), and on GCP each region's zone letters."""

    source: str
    cited_as: str  # the source in a few words, for messages
    regions: list[str] = []
    zones: dict[str, list[str]] = {}  # region -> zone letters (GCP: us-central1 -> [a, b, c, f])

    @property
    def all_regions(self) -> list[str]:
        """Every region, listed ones and those the zones name."""
        return [*self.regions, *(r for r in self.zones if r not in self.regions)]

    @property
    def all_zones(self) -> list[str]:
        """Every listed zone by its full name (``us-central1-a``)."""
        return [f"{region}-{letter}" for region, letters in self.zones.items() for letter in letters]

    def has_zone(self, zone: str) -> bool:
        """Whether ``zone`` is a listed zone, or an AI zone (not listed) of a known region."""
        ai = AI_ZONE.match(zone)
        return zone in self.all_zones or bool(ai and ai["region"] in self.zones)


class KubernetesVersions(StrictModel):
    """The Kubernetes minor versions a managed service supports, each with the end of its last support, as of a date."""

    as_of: datetime.date
    end_of_support: dict[str, datetime.date]
    source: str
    cited_as: str  # the source in a few words, for messages

    @property
    def supported(self) -> list[str]:
        """The minor versions still supported on ``as_of``, oldest first."""
        return sorted((v for v, end in self.end_of_support.items() if end >= self.as_of), key=version_key)


def version_key(text: str) -> tuple[int, int]:
    """``"1.33"`` as (1, 33), for comparing Kubernetes minor versions; (0, 0) for anything else."""
    major, _, minor = text.partition(".")
    try:
        return int(major), int(minor.split(".")[0])
    except ValueError:
        return (0, 0)


class CloudFacts(StrictModel):
    """What one cloud does around GPU pools, independent of the card."""

    title: str
    system_machine_type: str
    spot_node_labels: dict[str, str] = {}
    spot_taints: list[Taint] = []
    provides_device_plugin: bool
    gpu_scale_from_zero: bool
    scale_from_zero_note: str = ""
    # The node label a pod selects to land on a card's pool; "{card}" is replaced by the card name, "{pool}" by the
    # pool's name (a label that tells each pool apart by itself, as Magnum's node-group role does).
    pool_selector: dict[str, str] = {"gpu": "{card}"}
    # The node label of the system pool, which the fleet's own services (Prometheus, gateway) select; empty
    # where we do not know the cluster's pools (existing clusters).
    system_selector: dict[str, str] = {"role": "system"}
    # Whether a new cluster has a default StorageClass; where not, a stack that needs a volume (the central
    # Prometheus) must name one in gpu-fleet:storageClass.
    default_storage_class: bool
    # GPU sharing a pool can have here (policy: sharing): time-slicing (the cloud's own, or our device plugin's
    # configuration selected by a node label), and MIG partitions the cloud creates for a pool itself.
    time_slicing: bool = False
    mig_partitioning: bool = False
    # where the cloud's device plugin mounts the NVIDIA driver in GPU containers without telling them (empty: the
    # NVIDIA container toolkit sets the container up itself)
    gpu_driver_dir: str = ""
    # the system reservations of its nodes (None: not known, e.g. a site's OpenStack; pods are placed by labels only)
    reservations: Reservations | None = None
    # where its clusters may be (None: anywhere, a site's own cloud)
    locations: Locations | None = None
    # the Kubernetes versions its managed clusters support (None: the site decides, e.g. Magnum's kube_tag)
    kubernetes_versions: KubernetesVersions | None = None
    source: str


class Machine(StrictModel):
    """A machine type carrying ``count`` cards (one of an offer's other sizes)."""

    machine_type: str
    count: int = pydantic.Field(ge=1)
    source: str


class Offer(StrictModel):
    """One card on one cloud: the machine that carries it, or the fact that it was retired."""

    status: Literal["available", "retired"] = "available"
    machine_type: str = ""
    accelerator_type: str = ""  # GKE guest accelerator; empty where the machine type implies the card
    count: int = pydantic.Field(default=1, ge=1)
    ami_type: str = ""  # EKS AMI family; empty means the cloud default for the card's vendor
    node_labels: dict[str, str] = {}
    retired_on: datetime.date | None = None
    note: str = ""
    alternatives: list[str] = []
    source: str
    # the same card on machines with other card counts, for the scaling sweeps (fleet/model/sweeps/)
    machines: list[Machine] = []
    # MIG profiles the cloud can partition this card into, each with the instances one card holds
    mig_profiles: dict[str, int] = {}
    mig_source: str = ""
    # The zones that offer the card, where the cloud offers it in some zones only (a TPU): a pool elsewhere would
    # never get a node; empty: wherever the cloud is. Only zones checked upstream are listed (zones_source).
    zones: list[str] = []
    zones_source: str = ""

    @pydantic.model_validator(mode="after")
    def _complete(self) -> Offer:
        if self.status == "available" and not self.machine_type:
            raise ValueError("an available offer needs a machine_type")
        if self.status == "retired" and (self.retired_on is None or not self.alternatives):
            raise ValueError("a retired offer needs retired_on and alternatives")
        if self.mig_profiles and not self.mig_source:
            raise ValueError("mig_profiles need their mig_source")
        if self.zones and not self.zones_source:
            raise ValueError("zones need their zones_source")
        counts = [self.count, *(m.count for m in self.machines)]
        if len(set(counts)) != len(counts):
            raise ValueError(f"machines must each hold a different number of cards (counts {counts})")
        return self

    def zone_warning(self, card: str, cloud: str, zone: str) -> str | None:
        """Why ``zone`` may give the card no node: it is not among the zones that offer it (the catalogue lists only
        those read upstream, with zones_source); None if it is, or the card is offered in every zone."""
        if not self.zones or zone in self.zones:
            return None
        region = zone.rsplit("-", 1)[0]
        read = region in {z.rsplit("-", 1)[0] for z in self.zones}
        why = "not among them" if read else f"in {region}, whose zones were not read"
        return (
            f"{card} is offered in {', '.join(self.zones)} ({self.zones_source}); {zone} is {why}: a pool there "
            f"may never get a node. Use one of them, such as zone: {self.zones[0]}, or, if that page lists {zone}, "
            "add it to fleet/model/core/catalogue.yaml"
        )

    def sizes(self) -> list[Machine]:
        """Every machine of this card on this cloud, the offer's own first, then by card count."""
        own = Machine(machine_type=self.machine_type, count=self.count, source=self.source)
        return [own, *sorted(self.machines, key=lambda m: m.count)]


class Accelerator(StrictModel):
    """A card (or other accelerator) with the Kubernetes resource it is scheduled by."""

    model: str
    memory_gib: int
    resource: str
    node_labels: dict[str, str] = {}
    # a pod takes every card of its machine (TPU VMs): a sweep point needs a machine of exactly its size
    whole_host: bool = False
    offers: dict[Cloud, Offer]

    @property
    def taint(self) -> Taint:
        """The taint every pool of this card carries: ``<resource>=present:NoSchedule``."""
        return Taint(key=self.resource, value="present", effect="NoSchedule")

    @property
    def is_nvidia(self) -> bool:
        """Whether the NVIDIA device plugin serves this card."""
        return self.resource == "nvidia.com/gpu"


class MachineSize(StrictModel):
    """A machine type's vCPU and memory as the cloud sells it, and the pods a node takes where the machine sets it."""

    vcpu: int = pydantic.Field(ge=1)
    memory_gib: float = pydantic.Field(gt=0)
    max_pods: int | None = pydantic.Field(default=None, ge=1)


class MachineTypes(StrictModel):
    """One cloud's machine sizes, with their source."""

    source: str
    types: dict[str, MachineSize]


MIB = 2**20
GIB = 2**30
# AKS kube-reserved CPU by the host's cores (AKS docs "Node resource reservations"); between two rows, the larger
AKS_CPU_RESERVED_MILLI = ((1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740))


def _tiered(total: float, tiers: tuple[tuple[float, float], ...]) -> float:
    """``total`` reserved by tiers of (upper bound, fraction): each fraction applies to the part of ``total`` below its
    bound and above the previous one."""
    reserved, lower = 0.0, 0.0
    for upper, fraction in tiers:
        if total > lower:
            reserved += (min(total, upper) - lower) * fraction
        lower = upper
    return reserved


# GKE "Plan GKE Standard node sizes" (and amazon-eks-ami nodeadm getCPUMillicoresToReserve, the same tiers)
_CPU_TIERS = ((1000, 0.06), (2000, 0.01), (4000, 0.005), (float("inf"), 0.0025))
# GKE's memory tiers, in GiB (also AKS before Kubernetes 1.29)
_MEMORY_TIERS = ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (float("inf"), 0.02))


@dataclasses.dataclass(frozen=True)
class Allocatable:
    """What a node of one machine type offers pods: millicores, bytes and pods, and how it was computed."""

    machine_type: str
    cpu_milli: int
    memory_bytes: int
    pods: int
    how: str

    def as_resources(self) -> dict[str, int]:
        """``cpu`` (millicores), ``memory`` (bytes) and ``pods``, keyed as NodeResourcesFit keys them."""
        return {"cpu": self.cpu_milli, "memory": self.memory_bytes, "pods": self.pods}


def reserved_by(reservations: Reservations, size: MachineSize, kubernetes_version: str) -> tuple[int, int, int, str]:
    """The system's CPU (millicores) and memory (bytes, the eviction threshold included) on a node of ``size``, and its
    pods, by the cloud's published formula (each in catalogue.yaml with its source)."""
    cores_milli = size.vcpu * 1000
    memory = size.memory_gib * GIB
    pods = size.max_pods or reservations.max_pods
    if reservations.formula in ("gke", "eks"):
        cpu = _tiered(cores_milli, _CPU_TIERS)
    else:  # aks: its table by cores, the next row up between two
        cpu = next((m for c, m in AKS_CPU_RESERVED_MILLI if size.vcpu <= c), AKS_CPU_RESERVED_MILLI[-1][1])
    if reservations.formula == "gke":
        kube = 255 * MIB if size.memory_gib < 1 else _tiered(size.memory_gib, _MEMORY_TIERS) * GIB
        mem, how = kube + 100 * MIB, "GKE: tiered memory and CPU reservations + 100 MiB eviction threshold"
    elif reservations.formula == "eks":
        mem = (11 * pods + 255) * MIB + 100 * MIB
        how = f"EKS AL2023 nodeadm: 11 MiB x {pods} pods + 255 MiB + 100 MiB eviction, CPU tiers"
    elif version_key(kubernetes_version) >= (1, 29):
        # "MB" in the AKS docs; taken as MiB, the larger reading
        mem = min(20 * pods + 50, 0.25 * memory / MIB) * MIB + 100 * MIB
        how = f"AKS (1.29+): min(20 MB x {pods} pods + 50 MB, 25% of memory) + 100 Mi eviction, CPU by cores"
    else:
        mem = _tiered(size.memory_gib, _MEMORY_TIERS) * GIB + 750 * MIB
        how = "AKS (before 1.29): tiered memory reservation + 750 Mi eviction, CPU by cores"
    return int(cpu), int(mem), pods, how


class Catalogue(StrictModel):
    """All clouds and all accelerators known to the fleet."""

    clouds: dict[Cloud, CloudFacts]
    accelerators: dict[str, Accelerator]
    machine_types: dict[Cloud, MachineTypes] = {}

    def allocatable(self, cloud: str, machine_type: str, kubernetes_version: str) -> Allocatable | None:
        """A node's allocatable on ``cloud`` for ``machine_type``: its size less the cloud's reservations; None where
        the size or the cloud's formula is not known (the node is placed by labels and taints only)."""
        facts = self.clouds.get(cloud)  # type: ignore[call-overload]
        known = self.machine_types.get(cloud)  # type: ignore[call-overload]
        size = known.types.get(machine_type) if known else None
        if facts is None or facts.reservations is None or size is None:
            return None
        cpu, mem, pods, how = reserved_by(facts.reservations, size, kubernetes_version)
        return Allocatable(
            machine_type, size.vcpu * 1000 - cpu, int(size.memory_gib * GIB) - mem, pods,
            f"{size.vcpu} vCPU, {size.memory_gib:g} GiB less {how}",
        )  # fmt: skip

    @pydantic.model_validator(mode="after")
    def _alternatives_exist(self) -> Catalogue:
        for card, acc in self.accelerators.items():
            if card.endswith(pod_contract.CI_POOL_SUFFIX):  # gpu-<card>-ci names the card's CI pool
                raise ValueError(f"{card}: a card's name may not end in {pod_contract.CI_POOL_SUFFIX}")
            for cloud, offer in acc.offers.items():
                for alt in offer.alternatives:
                    alt_acc = self.accelerators.get(alt)
                    if (
                        alt_acc is None
                        or alt_acc.offers.get(cloud, None) is None
                        or alt_acc.offers[cloud].status != "available"
                    ):
                        raise ValueError(f"{card} on {cloud}: alternative {alt!r} is not available on {cloud}")
                if offer.status == "available" and cloud in self.machine_types:
                    for size in offer.sizes():
                        if size.machine_type not in self.machine_types[cloud].types:  # type: ignore[index]
                            raise ValueError(f"{card} on {cloud}: machine_types.{cloud} has no {size.machine_type}")
                if offer.machines and not cloud_rules(cloud).sweep_pools:
                    raise ValueError(
                        f"{card} on {cloud}: other machine sizes are built as sweep pools only on "
                        f"{', '.join(sweep_pool_clouds())}"
                    )
        return self

    def offer(self, card: str, cloud: str) -> Offer | None:
        """The offer of ``card`` on ``cloud``, or None if that cloud never had it."""
        acc = self.accelerators.get(card)
        return None if acc is None else acc.offers.get(cloud)  # type: ignore[call-overload]

    def available_on(self, cloud: str) -> list[str]:
        """Cards a cloud offers today, in catalogue order."""
        return [c for c, a in self.accelerators.items() if cloud in a.offers and a.offers[cloud].status == "available"]  # type: ignore[operator,index]


@lru_cache(maxsize=4)
def load_catalogue(path: Path = CATALOGUE_FILE) -> Catalogue:
    """Read and validate the catalogue file (cached: it does not change while a process runs)."""
    return validate_document(Catalogue, read_yaml(path))
