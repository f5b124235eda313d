"""The dated price table (``prices.yaml``) and the machine each (cluster, card) runs on.

Prices are approximate by nature (spot prices move daily and per zone), so every entry carries the day it
was read and its source, and a machine without a known price gets no cost rather than a guess. The machine of a
(cluster, card) comes from the policy's pool when the cluster is in the policy (it may override the machine type),
else from the catalogue's offer for the cloud. The report prices results with it (fleet/report/costs.py), the plan
prices pools, and the central's card-price records (fleet/model/monitoring/dashboards.py) are made from it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pydantic

from fleet.model.core.catalogue import Catalogue, load_catalogue
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool
from fleet.model.core.validation import StrictModel, validate_document
from fleet.model.core.yaml_source import read_yaml

# the table stays beside the model (the plan names its path), not in this package
PRICES_FILE = Path(__file__).resolve().parents[1] / "prices.yaml"


class PriceEntry(StrictModel):
    """The approximate hourly price of one machine type on one cloud, with the day it was read and its source."""

    cloud: str
    machine_type: str
    accelerator_type: str = ""  # where the cloud prices the GPU apart from the machine (GKE N1)
    region: str
    spot: float | None = pydantic.Field(ge=0)
    on_demand: float | None = pydantic.Field(default=None, ge=0)
    as_of: datetime.date
    source: str = pydantic.Field(min_length=1)
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the entry: (cloud, machine type, accelerator type)."""
        return (self.cloud, self.machine_type, self.accelerator_type)

    def per_hour(self, spot: bool) -> float | None:
        """The spot or on-demand price per machine-hour, or None when the table does not know it."""
        return self.spot if spot else self.on_demand


class PriceFile(StrictModel):
    """What ``prices.yaml`` holds."""

    currency: str = pydantic.Field(min_length=1)
    entries: list[PriceEntry]

    @pydantic.field_validator("entries")
    @classmethod
    def _unique(cls, entries: list[PriceEntry]) -> list[PriceEntry]:
        seen: set[tuple[str, str, str]] = set()
        for entry in entries:
            if entry.key in seen:
                raise ValueError(f"{'/'.join(p for p in entry.key if p)} is priced twice")
            seen.add(entry.key)
        return entries


@dataclass(frozen=True)
class PriceTable:
    """The loaded price table, looked up by (cloud, machine type, accelerator type)."""

    file: str
    currency: str
    entries: dict[tuple[str, str, str], PriceEntry]

    def lookup(self, cloud: str, machine_type: str, accelerator_type: str = "") -> PriceEntry | None:
        """The entry of a machine (with its accelerator where priced apart), or None if the table has none."""
        return self.entries.get((cloud, machine_type, accelerator_type)) or self.entries.get((cloud, machine_type, ""))

    def hourly(self, cloud: str, machine_type: str, accelerator_type: str, spot: bool) -> float | None:
        """The spot (or on-demand) price of one machine-hour, or None when the table does not know it."""
        entry = self.lookup(cloud, machine_type, accelerator_type)
        return entry.per_hour(spot) if entry else None


@lru_cache(maxsize=4)
def load_prices(path: Path = PRICES_FILE) -> PriceTable:
    """Read and check the price table; ``InputError`` naming the file, line and key on any problem."""
    doc = read_yaml(path)
    spec = validate_document(PriceFile, doc)
    return PriceTable(doc.file, spec.currency, {e.key: e for e in spec.entries})


@dataclass(frozen=True)
class Machine:
    """The machine a (cluster, card) benchmark runs on, as far as the policy and catalogue tell."""

    cloud: str
    machine_type: str
    accelerator_type: str
    gpus: int  # what a pod's accelerators are counted against: the machine's cards, times the pods per shared card
    spot: bool
    sharing: str = ""  # the pool's sharing (time-slicing-4, mig-1g.5gb); empty: whole cards

    @property
    def label(self) -> str:
        """``machine_type`` plus the accelerator when the cloud attaches it separately, and the sharing if any."""
        name = f"{self.machine_type} + {self.accelerator_type}" if self.accelerator_type else self.machine_type
        return f"{name} ({self.sharing})" if self.sharing else name


def machine_for(
    cluster: str, cloud: str, card: str, fleet: Fleet | None, catalogue: Catalogue | None = None
) -> Machine | None:
    """The machine of ``card`` in ``cluster``: the policy's pool if the policy has it, else the catalogue's offer."""
    if fleet is not None and cluster in fleet.clusters:
        found = fleet.clusters[cluster]
        for pool in found.pools:
            if pool.card == card and pool.machine_type:
                return pool_machine(found.cloud, pool)
    offer = (catalogue or load_catalogue()).offer(card, cloud)
    if offer is None or offer.status != "available" or not offer.machine_type:
        return None
    return Machine(cloud, offer.machine_type, offer.accelerator_type, offer.count, True)


def pool_machine(cloud: str, pool: GpuPool) -> Machine:
    """The machine of one of a cluster's pools (``cloud`` is the cluster's), as the policy resolves it."""
    accelerator = pool.offer.accelerator_type if pool.offer else ""
    sharing = pool.sharing.name if pool.sharing else ""
    return Machine(cloud, pool.machine_type, accelerator, pool.units_per_node, pool.spot, sharing)


def card_prices(fleet: Fleet, table: PriceTable) -> dict[tuple[str, str, str], float]:
    """The price of one card-hour per (cluster, cloud, card): what the card's own pool's machine costs per hour (spot
    or on-demand as the pool is) over its cards; a pool whose machine the table does not price is left out."""
    out: dict[tuple[str, str, str], float] = {}
    for cluster in fleet.clusters.values():
        for pool in cluster.pools:
            accelerator = pool.offer.accelerator_type if pool.offer else ""
            entry = table.lookup(cluster.cloud, pool.machine_type, accelerator) if pool.machine_type else None
            hourly = entry.per_hour(pool.spot) if entry else None
            if hourly is not None and pool.accelerators_per_node:
                out[(cluster.name, cluster.cloud, pool.card)] = hourly / pool.accelerators_per_node
    return out
