"""The accelerator catalogue: which machine of which cloud carries each card (data in catalogue.yaml)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import pydantic

from fleet.model.validation import StrictModel, validate_document
from fleet.model.yaml_source import read_yaml

CATALOGUE_FILE = Path(__file__).with_name("catalogue.yaml")

Cloud = Literal["gcp", "aws", "azure", "openstack", "existing"]
CLOUDS: tuple[str, ...] = ("openstack", "gcp", "aws", "azure", "existing")


class Taint(StrictModel):
    """A Kubernetes taint in Kubernetes spelling (effect ``NoSchedule``)."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def as_string(self) -> str:
        """``key=value:Effect``, the spelling AKS and kubectl use."""
        return f"{self.key}={self.value}:{self.effect}"

    def tolerated_by(self, tolerations: Iterable[Mapping[str, Any]]) -> bool:
        """Whether one of a pod's tolerations (``key``, ``operator``, ``value``, ``effect``; unset or None alike)
        tolerates this taint, as Kubernetes decides it (k8s.io/api core/v1 toleration.go ToleratesTaint): the effect
        and the key match when given, then ``Exists`` matches any value and ``Equal`` (the default) this one."""
        for t in tolerations:
            if t.get("effect") and t["effect"] != self.effect:
                continue
            if t.get("key") and t["key"] != self.key:
                continue
            operator = t.get("operator") or "Equal"
            if operator == "Exists" or (operator == "Equal" and (t.get("value") or "") == self.value):
                return True
        return False


class CloudFacts(StrictModel):
    """What one cloud does around GPU pools, independent of the card."""

    title: str
    system_machine_type: str
    spot_node_labels: dict[str, str] = {}
    spot_taints: list[Taint] = []
    provides_device_plugin: bool
    gpu_scale_from_zero: bool
    scale_from_zero_note: str = ""
    # The node label a pod selects to land on a card's pool; "{card}" is replaced by the card name.
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
    source: str


# Clouds whose cluster components build the sweep pools of other machine sizes (components/clusters/gke.py, eks.py)
SWEEP_POOL_CLOUDS = ("gcp", "aws")


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
    # the same card on machines with other card counts, for the scaling sweeps (fleet/model/sweeps.py)
    machines: list[Machine] = []
    # MIG profiles the cloud can partition this card into, each with the instances one card holds
    mig_profiles: dict[str, int] = {}
    mig_source: str = ""

    @pydantic.model_validator(mode="after")
    def _complete(self) -> Offer:
        if self.status == "available" and not self.machine_type:
            raise ValueError("an available offer needs a machine_type")
        if self.status == "retired" and (self.retired_on is None or not self.alternatives):
            raise ValueError("a retired offer needs retired_on and alternatives")
        if self.mig_profiles and not self.mig_source:
            raise ValueError("mig_profiles need their mig_source")
        counts = [self.count, *(m.count for m in self.machines)]
        if len(set(counts)) != len(counts):
            raise ValueError(f"machines must each hold a different number of cards (counts {counts})")
        return self

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


class Catalogue(StrictModel):
    """All clouds and all accelerators known to the fleet."""

    clouds: dict[Cloud, CloudFacts]
    accelerators: dict[str, Accelerator]

    @pydantic.model_validator(mode="after")
    def _alternatives_exist(self) -> Catalogue:
        for card, acc in self.accelerators.items():
            for cloud, offer in acc.offers.items():
                for alt in offer.alternatives:
                    alt_acc = self.accelerators.get(alt)
                    if (
                        alt_acc is None
                        or alt_acc.offers.get(cloud, None) is None
                        or alt_acc.offers[cloud].status != "available"
                    ):
                        raise ValueError(f"{card} on {cloud}: alternative {alt!r} is not available on {cloud}")
                if offer.machines and cloud not in SWEEP_POOL_CLOUDS:
                    raise ValueError(
                        f"{card} on {cloud}: other machine sizes are built as sweep pools only on "
                        f"{', '.join(SWEEP_POOL_CLOUDS)}"
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
