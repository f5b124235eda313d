"""What a benchmark report holds, apart from how it is gathered (fleet/report/gather.py) or drawn
(fleet/report/plots.py): one row per card and one section per workload."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.model.core.workloads import Workload
from fleet.report.accounting import AccountRow
from fleet.report.costs import Machine, PriceEntry, PriceTable, cost_per_result, per_result
from fleet.report.probes import PhaseRow, ProbeRow
from fleet.report.queries import Window, WorkloadQueries, at_fleet_scale
from fleet.report.queues import QueueRow
from fleet.report.runners import RunnerRow
from fleet.report.sweeps import SweepRow

Card = tuple[str, str, str]  # (cluster, cloud, gpu)


@dataclass
class CardRow:
    """One card's numbers for one workload; None means unknown (no data, no GPU metrics, no price)."""

    cluster: str
    cloud: str
    gpu: str
    result: float
    best: float | None = None
    pods: int = 0
    runs: float | None = None
    gpu_utilization: float | None = None
    gpu_energy_joules: float | None = None
    observed_seconds: float | None = None
    machine: Machine | None = None
    price: PriceEntry | None = None
    share: float = 1.0
    scale_up_seconds: float | None = None  # the pool's median wait for a node (its probes), paid by every pod

    @property
    def price_per_hour(self) -> float | None:
        """The machine's spot (or, for an on-demand pool, on-demand) price per hour, if the table has it."""
        if self.price is None or self.machine is None:
            return None
        return self.price.per_hour(self.machine.spot)

    @property
    def energy_per_result(self) -> float | None:
        """GPU energy per result in joules."""
        return per_result(self.gpu_energy_joules, self.runs)

    @property
    def seconds_per_result(self) -> float | None:
        """Observed pod time per result."""
        return per_result(self.observed_seconds, self.runs)

    @property
    def billed_seconds_per_result(self) -> float | None:
        """Machine time paid per result: the pods' running time plus, for each pod, the pool's median wait for a
        node (as its probes measured it; without probes, the running time alone)."""
        if self.observed_seconds is None or self.scale_up_seconds is None:
            return self.seconds_per_result
        return per_result(self.observed_seconds + self.pods * self.scale_up_seconds, self.runs)

    @property
    def cost_per_result(self) -> float | None:
        """Approximate price of one result (machine price x share x billed time per result)."""
        return cost_per_result(self.price_per_hour, self.share, self.billed_seconds_per_result)


@dataclass
class WorkloadSection:
    """Everything the report says about one workload."""

    workload: Workload
    queries: WorkloadQueries
    runs_counter: str | None
    rows: list[CardRow] = field(default_factory=list)
    series: dict[Card, list[tuple[float, float]]] = field(default_factory=dict)
    # at fleet scale (:attr:`at_fleet_scale`) instead of ``series``: per card type (gpu), its lowest, median and
    # highest card over time (``SPREAD_STATS``)
    spread: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    no_data: str = ""  # why there is nothing to show, when there is nothing

    @property
    def name(self) -> str:
        """The workload's name."""
        return self.workload.name

    @property
    def has_data(self) -> bool:
        """Whether any card reported the headline metric in the window."""
        return bool(self.rows)

    @property
    def at_fleet_scale(self) -> bool:
        """Whether more cards reported than a plot can draw one by one (``CARDS_PER_PLOT``): the plots then show each
        card type's spread over the clusters."""
        return at_fleet_scale(len(self.rows))

    def listing(self) -> list[tuple[str, str]]:
        """The workload's queries as the report prints them: those it sent."""
        return self.queries.listing(spread=self.at_fleet_scale)


@dataclass
class Report:
    """A gathered report: where from, over which window, and one section per workload."""

    prometheus: str
    window: Window
    step: float
    generated: float
    sections: list[WorkloadSection]
    prices: PriceTable
    queries_sent: int = 0
    probes: list[ProbeRow] = field(default_factory=list)  # time to first accelerator, per probed pool
    runners: list[RunnerRow] = field(default_factory=list)  # CI jobs per card
    sweeps: dict[str, list[SweepRow]] = field(default_factory=dict)  # per sweeping workload: its sweep points
    accounting: list[AccountRow] = field(default_factory=list)  # card-hours per billing account and pool
    phases: list[PhaseRow] = field(default_factory=list)  # time to first accelerator by phase, per probed pool
    queues: list[QueueRow] = field(default_factory=list)  # the fleet's queues: admissions per worker, wait, spills
