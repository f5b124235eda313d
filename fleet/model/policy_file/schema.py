"""The shape of ``policy/fleet.yaml``: pydantic models that reject unknown keys and wrong types.

The whole file and the keys of the core (clusters, their pools, the workloads' placements), composed with each
feature's own section or keys (``fleet/model/<feature>/settings.py``). Only the file's shape lives here; rules that
span keys (one central cluster, cards a cloud offers, ...) are checked in ``fleet.model.policy_file.checks`` (run by
``fleet.model.loader``) where the catalogue and the workload folders are known.
"""

from __future__ import annotations

import typing
from typing import Any

import pydantic

from fleet.model.billing.accounts import BILLING_ACCOUNT, DEFAULT_BILLING_ACCOUNT
from fleet.model.core.catalogue import Cloud
from fleet.model.core.monitoring import Monitoring
from fleet.model.core.registry import DEFAULT_REGISTRY, registry_problem
from fleet.model.core.schedules import check_cron
from fleet.model.core.validation import StrictModel
from fleet.model.placement.node_agents import SITE_PROVIDES, SiteService
from fleet.model.probes.settings import ProbeDefaults, ProbeSettings
from fleet.model.queues.settings import QueuesSettings
from fleet.model.runners.settings import Runners
from fleet.model.sharing.settings import SharingSettings
from fleet.model.sweeps.plan import MAX_SWEEP_ACCELERATORS

DEFAULT_KUBERNETES_VERSION = "1.33"


# No cloud lets one node pool grow past 1000 nodes (GKE and AKS cap a pool at 1000; EKS node groups lower):
# a larger number is a typo, refused before it reaches a quota or a bill.
MAX_POOL_NODES = 1000


class PoolSettings(StrictModel):
    """Per-card pool settings in a cluster; anything left out comes from ``defaults.gpu_pool``."""

    min_nodes: int | None = pydantic.Field(
        default=None, ge=0, le=MAX_POOL_NODES, description="Fewest nodes (0 lets the pool cost nothing idle)."
    )
    max_nodes: int | None = pydantic.Field(
        default=None, ge=1, le=MAX_POOL_NODES, description="Most nodes the autoscaler may add."
    )
    spot: bool | None = pydantic.Field(
        default=None, description="Spot/preemptible capacity (cheaper, may be reclaimed)."
    )
    machine_type: str | None = pydantic.Field(
        default=None, description="Override the catalogue's machine type or flavor."
    )
    probe: ProbeSettings = pydantic.Field(
        default_factory=ProbeSettings, description="true/false, or the pool's own probe schedule and threshold."
    )
    sharing: SharingSettings | None = pydantic.Field(
        default=None, description="Share each card: {time_slicing: N} or {mig: PROFILE}; whole cards by default."
    )


class GpuPoolDefaults(StrictModel):
    """Defaults for every GPU pool in the fleet."""

    min_nodes: int = pydantic.Field(
        default=0, ge=0, le=MAX_POOL_NODES, description="Fewest nodes of a GPU pool (0 lets it cost nothing idle)."
    )
    max_nodes: int = pydantic.Field(
        default=4, ge=1, le=MAX_POOL_NODES, description="Most nodes the autoscaler may add to a GPU pool."
    )
    spot: bool = pydantic.Field(default=True, description="GPU pools use spot/preemptible capacity.")
    scale_down_after: str = pydantic.Field(
        default="5m",
        pattern=r"^[1-9][0-9]{0,3}m$",
        description=(
            "How long a node stays unneeded (and after a scale-up) before the autoscaler removes it, in whole minutes "
            "(the clouds' default is 10m); GKE takes a profile instead (docs/clouds.md)."
        ),
    )


class SystemPool(StrictModel):
    """The small on-demand pool that runs the infra services."""

    machine_type: str | None = pydantic.Field(
        default=None, description="Defaults to the cloud's entry in the catalogue."
    )
    min_nodes: int = pydantic.Field(
        default=1, ge=1, le=MAX_POOL_NODES, description="Fewest system nodes (at least one runs the infra services)."
    )
    max_nodes: int = pydantic.Field(
        default=3, ge=1, le=MAX_POOL_NODES, description="Most system nodes the autoscaler may add."
    )


class Defaults(StrictModel):
    """Fleet-wide defaults."""

    gpu_pool: GpuPoolDefaults = pydantic.Field(
        default=GpuPoolDefaults(),
        description="What every GPU pool gets unless its cluster's gpus entry says otherwise.",
    )
    probe: ProbeDefaults = pydantic.Field(
        default=ProbeDefaults(), description="Schedule and alert threshold of every pool's probe (docs/probes.md)."
    )
    system_pool: SystemPool = pydantic.Field(
        default=SystemPool(), description="The system pool of every cluster that gives none of its own."
    )
    kubernetes_version: str = pydantic.Field(
        default=DEFAULT_KUBERNETES_VERSION,
        pattern=r"^1\.[0-9]{2}$",
        description='Kubernetes minor version of every cluster the fleet creates, such as "1.33".',
    )


class ClusterSettings(StrictModel):
    """One cluster: where it is, which cards it offers, and its role in the fleet."""

    region: str | None = pydantic.Field(
        default=None,
        description="The cloud's region (EKS, AKS, a regional GKE cluster) or the OpenStack region, such as eastus.",
    )
    zone: str | None = pydantic.Field(
        default=None, description="GKE only: the zone of a zonal cluster, such as us-central1-a."
    )
    central: bool = pydantic.Field(default=False, description="Holds the central Prometheus (exactly one cluster).")
    gpus: dict[str, PoolSettings] = pydantic.Field(
        default_factory=dict, description="Cards: a list, or card -> pool settings."
    )
    kubernetes_version: str | None = pydantic.Field(
        default=None,
        pattern=r"^1\.[0-9]{2}$",
        description="This cluster's Kubernetes minor version, instead of defaults.kubernetes_version.",
    )
    system_pool: SystemPool | None = pydantic.Field(
        default=None, description="This cluster's system pool, instead of defaults.system_pool."
    )
    description: str = pydantic.Field(
        default="", description="What the cluster is for, in words (GKE shows it on the cluster)."
    )
    billing_account: str = pydantic.Field(
        default=DEFAULT_BILLING_ACCOUNT,
        pattern=BILLING_ACCOUNT,
        description="The account the cluster's GPU time is billed to (the accounting rules' billing_account label).",
    )
    site_provides: list[SiteService] = pydantic.Field(default_factory=list, description=SITE_PROVIDES)
    checkpoint_claim: str | None = pydantic.Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description=(
            "An existing ReadWriteMany PersistentVolumeClaim in the benchmarks namespace where sweep jobs keep their "
            "checkpoints (a subdirectory each); without it a restarted sweep job starts again from its first epoch."
        ),
    )

    @pydantic.field_validator("gpus", mode="before")
    @classmethod
    def _list_form(cls, value: Any) -> Any:
        if isinstance(value, list):
            seen: set[Any] = set()
            for card in value:
                if not isinstance(card, str):
                    raise ValueError(f"a card must be a name such as t4, not {card!r}")
                if card in seen:
                    raise ValueError(f"card {card!r} is listed twice")
                seen.add(card)
            return {card: {} for card in value}
        if isinstance(value, dict):
            return {card: ({} if settings is None else settings) for card, settings in value.items()}
        if value is None:
            return {}
        return value


class Placement(StrictModel):
    """Which cards a workload may run on, and optionally a cron schedule for repeated runs."""

    gpus: list[str] = pydantic.Field(description="Card names, or ['all'].")
    schedule: str | None = pydantic.Field(default=None, description="Cron schedule: run as a CronJob instead of a Job.")
    enabled: bool = pydantic.Field(
        default=True, description="false keeps the workload in the file but deploys none of its jobs."
    )
    billing_account: str | None = pydantic.Field(
        default=None,
        pattern=BILLING_ACCOUNT,
        description="The account this workload's GPU time is billed to, instead of its cluster's.",
    )
    scale: list[int] | None = pydantic.Field(
        default=None,
        description=(
            "A scaling sweep (distributed workloads only): the total accelerator counts, one distributed job each, "
            "instead of one single-card Job per card."
        ),
    )
    queue: str | None = pydantic.Field(
        default=None,
        description=(
            "A queue of the policy's queues section: the workload's Jobs are declared once, on the queues' manager, "
            "one per card of the queue it allows, and Kueue's MultiKueue runs each on the first worker with room, "
            "instead of one Job per cluster."
        ),
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if isinstance(value, (str, list)):
            value = {"gpus": value}
        if isinstance(value, dict) and value.get("gpus") == "all":
            value = {**value, "gpus": ["all"]}
        return value

    @pydantic.field_validator("gpus")
    @classmethod
    def _all_alone(cls, value: list[str]) -> list[str]:
        if "all" in value and len(value) > 1:
            raise ValueError("'all' cannot be combined with card names")
        if not value:
            raise ValueError("give at least one card, or all")
        return value

    @pydantic.field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @pydantic.field_validator("scale")
    @classmethod
    def _points(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("give at least one accelerator count, such as [1, 2, 4, 8]")
        bad = [n for n in value if n < 1 or n > MAX_SWEEP_ACCELERATORS]
        if bad:
            raise ValueError(f"{bad}: a point is a total accelerator count from 1 to {MAX_SWEEP_ACCELERATORS}")
        if sorted(set(value)) != value:
            raise ValueError(f"{value}: list each count once, smallest first (the speed-up is against the first)")
        return value

    @pydantic.model_validator(mode="after")
    def _sweep_not_scheduled(self) -> Placement:
        if self.scale is not None and self.schedule is not None:
            raise ValueError("a sweep (scale) runs once per deployment: remove schedule, or scale")
        return self


class FleetFile(StrictModel):
    """The whole policy file."""

    defaults: Defaults = pydantic.Field(
        default=Defaults(), description="Fleet-wide defaults: GPU pools, probes, system pools, Kubernetes version."
    )
    monitoring: Monitoring = pydantic.Field(
        default=Monitoring(), description="Prometheus scraping, federation and retention on every cluster."
    )
    clusters: dict[Cloud, dict[str, ClusterSettings]] = pydantic.Field(
        description="Cloud -> cluster name -> the cluster; each cluster is one stack (stacks/Pulumi.<name>.yaml)."
    )
    workloads: dict[str, Placement] = pydantic.Field(
        default_factory=dict,
        description="Workload (a folder of workloads/) -> the cards it runs on: all, a list of cards, or settings.",
    )
    runners: Runners = pydantic.Field(
        default=Runners(), description="GitLab CI runners on the fleet's pools (docs/runners.md)."
    )
    queues: QueuesSettings | None = pydantic.Field(
        default=None,
        description=(
            "Fleet-wide queues dispatched by Kueue's MultiKueue: the manager cluster, the spill-over, and per queue "
            "its worker clusters in order of preference and its cards (docs/queues.md)."
        ),
    )
    registry: str = pydantic.Field(
        default=DEFAULT_REGISTRY,
        description="The container registry every image of the fleet is pulled from and pushed to (`fleet images`): "
        "a host with an optional path, such as registry.example.org/lab. Images are named relative to it.",
    )

    @pydantic.field_validator("registry")
    @classmethod
    def _registry(cls, value: str) -> str:
        problem = registry_problem(value)
        if problem:
            raise ValueError(problem)
        return value.rstrip("/")

    @pydantic.field_validator("clusters", mode="before")
    @classmethod
    def _empty_providers(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value


def schema_models(model: Any = FleetFile, found: dict[str, type[pydantic.BaseModel]] | None = None) -> dict[str, Any]:
    """Every model of the policy file by its name in the JSON Schema's ``$defs`` (``FleetFile`` too), wherever its
    feature declares it."""
    found = {} if found is None else found
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
        if model.__name__ not in found:
            found[model.__name__] = model
            for field in model.model_fields.values():
                schema_models(field.annotation, found)
    else:
        for arg in typing.get_args(model):
            schema_models(arg, found)
    return found


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the policy file, for editors (published as policy/fleet.schema.json)."""
    schema = FleetFile.model_json_schema()
    defs = schema["$defs"]
    # The short forms the validators accept: a list of cards, and a bare list or "all" for a workload.
    cards = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    pools = defs["ClusterSettings"]["properties"]["gpus"]
    defs["ClusterSettings"]["properties"]["gpus"] = {
        "anyOf": [cards, pools],
        "description": pools.get("description", ""),
    }
    probe = defs["PoolSettings"]["properties"]["probe"]
    defs["PoolSettings"]["properties"]["probe"] = {
        "anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/ProbeSettings"}],
        "description": probe.get("description", ""),
    }
    runner_clusters = defs["Runners"]["properties"]["clusters"]
    runner_clusters["additionalProperties"] = {
        "anyOf": [cards, {"type": "object", "additionalProperties": {"$ref": "#/$defs/RunnerSettings"}}]
    }
    schema["properties"]["workloads"]["additionalProperties"] = {
        "anyOf": [{"const": "all"}, cards, {"$ref": "#/$defs/Placement"}]
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpu-fleet policy file"
    return schema
