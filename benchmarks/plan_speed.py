"""How fast the offline plan is, and how far above the mock engine's own cost.

Generates a synthetic fleet (N clusters x cards x workloads; GKE only, or ``--clouds`` cycling the clusters over
GKE, EKS, AKS, Magnum and existing clusters) in a temp dir, plans every stack with the
project's real code path (``fleet.plan.plan_fleet``, as ``python -m fleet plan`` does) and compares that with
the *floor*: the very same resources (types, names, parents, providers, inputs) registered bare, as plain
``pulumi.CustomResource`` / ``pulumi.ComponentResource`` under Pulumi's stock mock engine, in the same process.

    .venv/bin/python -m benchmarks.plan_speed [--clusters 100] [--clouds gcp] [--cards 8] [--workloads 4]
                                              [--sizes 10,25,50,100] [--repeat 3] [--json FILE]

See benchmarks/README.md for what the figures mean.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import gc
import json
import math
import platform
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

import fleet.model.loader as fleet_policy
import fleet.tools.engine.plan as fleet_plan
from fleet.model.catalogue import load_catalogue
from fleet.model.spec import Fleet
from fleet.model.workloads import WORKLOADS_DIR, Workload, load_workload
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import PROJECT, StackPlan, dispatched, plan_fleet, plan_runtime

#: Zones the synthetic clusters cycle through (the policy does not check zone availability per card).
GCP_ZONES = (
    "us-central1-a",
    "us-central1-b",
    "us-central1-c",
    "us-central1-f",
    "us-east1-c",
    "us-east4-a",
    "europe-west4-a",
    "europe-west4-b",
    "asia-east1-c",
    "asia-northeast1-a",
)
#: Regions of the other clouds, each in the catalogue's ``locations`` of its cloud (the model checks them).
AWS_REGIONS = ("us-east-1", "eu-west-1", "us-west-2")
AZURE_REGIONS = ("eastus", "westeurope", "westus2")
#: Clouds a synthetic fleet may mix (``--clouds``), with the cluster name prefix of each.
CLOUD_PREFIXES = {"gcp": "gke", "aws": "eks", "azure": "aks", "openstack": "magnum", "existing": "existing"}
#: The typed provider SDK each cloud's clusters are declared with (its version is reported).
CLOUD_SDKS = {"gcp": "pulumi_gcp", "aws": "pulumi_aws", "azure": "pulumi_azure_native", "openstack": "pulumi_openstack"}
#: Stack settings every synthetic stack has.
STACK_CONFIG = {
    "pulumi:disable-default-providers": ["*"],
    "gpu-fleet:stackReferencePrefix": "organization/gpu-fleet",
    "gpu-fleet:federationSourceRanges": ["10.20.0.0/16"],
}
#: What each cloud's stack needs beyond that, as tests/fixtures/fleet/stacks and stacks/ set it: the GCP project, the
#: Azure subscription, the Magnum site settings and the central volume's class (Magnum and existing clusters have no
#: default StorageClass), the existing cluster's kubeconfig (an encrypted placeholder the offline plan never decrypts).
CLOUD_STACK_CONFIG: dict[str, dict[str, Any]] = {
    "gcp": {"gcp:project": "bench-project"},
    "aws": {},
    "azure": {"azure-native:subscriptionId": "11111111-2222-3333-4444-555555555555"},
    "openstack": {
        "openstack:cloud": "bench-site",
        "gpu-fleet:storageClass": "standard",
        "gpu-fleet:magnum": {
            "image": "fedora-coreos-40",
            "keypair": "bench",
            "externalNetwork": "ext-net",
            "masterFlavor": "m2.medium",
            "kubeTag": "v1.31.5-rancher1",
            "autoscalerTag": "v1.31.5",  # the autoscaler's minor is the cluster's, as stacks/Pulumi.cern-main.yaml
            "autoscalerImage": "registry.k8s.io/autoscaling/cluster-autoscaler",
        },
    },
    "existing": {
        "gpu-fleet:storageClass": "standard",
        "gpu-fleet:kubeconfig": {"secure": "v1:YmVuY2gta3ViZWNvbmZpZw=="},
    },
}
MONITORING = {
    "scrape_interval": "30s",
    "federation_interval": "60s",
    "leaf_retention": "7d",
    "central_retention": "180d",
    "central_storage": "100Gi",
}
TARGET_RATIO = 1.5


# --------------------------------------------------------------------------------------------------------------
# The synthetic fleet
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticFleet:
    """Files of a generated fleet: the policy, one stack file per cluster, the workload folders."""

    root: Path
    policy_file: Path
    stacks_dir: Path
    workloads_dir: Path
    clusters: tuple[str, ...]
    cards: tuple[str, ...]  # every card of the fleet, first cloud's first
    workloads: tuple[str, ...]
    workload_source: str  # "copied from workloads/<names>" or "minimal"
    clouds: tuple[str, ...] = ("gcp",)  # the clouds the clusters cycle over, in order
    cards_by_cloud: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the cards of each cloud's clusters


def cloud_cards(cloud: str) -> list[str]:
    """Cards a synthetic cluster of ``cloud`` may offer, in catalogue order: those the catalogue offers there today;
    on an existing cluster (whose nodes the fleet does not create) every NVIDIA card some cloud offers today."""
    catalogue = load_catalogue()
    if cloud != "existing":
        return catalogue.available_on(cloud)
    offered = {card for other in CLOUD_PREFIXES if other != "existing" for card in catalogue.available_on(other)}
    return [card for card, acc in catalogue.accelerators.items() if acc.is_nvidia and card in offered]


def _location(cloud: str, index: int) -> dict[str, str]:
    """Where the ``index``-th synthetic cluster of ``cloud`` is (policy: zone or region; none for an existing one)."""
    if cloud == "gcp":
        return {"zone": GCP_ZONES[index % len(GCP_ZONES)]}
    if cloud == "aws":
        return {"region": AWS_REGIONS[index % len(AWS_REGIONS)]}
    if cloud == "azure":
        return {"region": AZURE_REGIONS[index % len(AZURE_REGIONS)]}
    if cloud == "openstack":
        return {"region": "bench-site"}
    return {}


def _real_workloads() -> list[Workload]:
    """The shipped workload folders that load cleanly (another change may have one half-edited)."""
    out = []
    if WORKLOADS_DIR.is_dir():
        for folder in sorted(p for p in WORKLOADS_DIR.iterdir() if (p / "workload.yaml").is_file()):
            try:
                out.append(load_workload(folder))
            except Exception:
                continue
    return out


def _metric_prefix(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name) + "_"


def _copy_workload(src: Workload, dst: Path, name: str) -> None:
    """Copy a real workload folder under a new name; metric names get a per-copy prefix so copies never clash."""
    shutil.copytree(src.folder, dst)
    data = yaml.safe_load((dst / "workload.yaml").read_text(encoding="utf-8"))
    prefix = _metric_prefix(name)
    renames = {m["name"]: prefix + m["name"] for m in data.get("metrics", [])}
    data["name"] = name
    for metric in data.get("metrics", []):
        metric["name"] = renames[metric["name"]]
    if "headline" in data and data["headline"].get("metric") in renames:
        data["headline"]["metric"] = renames[data["headline"]["metric"]]
    (dst / "workload.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    if renames:
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")\b")
        for program in (dst / "mtail").glob("*.mtail"):
            text = program.read_text(encoding="utf-8")
            program.write_text(pattern.sub(lambda m: renames[m.group(1)], text), encoding="utf-8")


def _minimal_workload(dst: Path, name: str) -> None:
    """A minimal valid workload folder (fleet/model/workloads.py): workload.yaml, one mtail program, a sample log."""
    metric = _metric_prefix(name) + "ops_total"
    spec = {
        "name": name,
        "description": "synthetic benchmark workload",
        "image": "busybox:1.36",
        "command": ["sh", "-c", "echo ops=1"],
        "accelerators": 1,
        "resources": {"cpu_request": "1", "memory_request": "1Gi", "cpu_limit": "2", "memory_limit": "2Gi"},
        "timeout_seconds": 600,
        "metrics": [{"name": metric, "type": "counter", "help": "Operations done.", "labels": []}],
        "headline": {"metric": metric, "unit": "ops"},
    }
    (dst / "mtail").mkdir(parents=True)
    (dst / "workload.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    (dst / "mtail" / f"{name}.mtail").write_text(
        f"counter {metric}\n\n/^ops=(?P<n>\\d+)$/ {{\n  {metric} += $n\n}}\n", encoding="utf-8"
    )
    (dst / "sample.log").write_text("ops=1\nops=2\n", encoding="utf-8")


def _write_workloads(workloads_dir: Path, count: int) -> tuple[list[str], str]:
    workloads_dir.mkdir(parents=True, exist_ok=True)
    real = _real_workloads()
    names = []
    for i in range(count):
        if real:
            src = real[i % len(real)]
            name = f"w{i:02d}-{src.name}"[:40].rstrip("-")
            dst = workloads_dir / name
            try:
                _copy_workload(src, dst, name)
                load_workload(dst)
            except Exception:
                shutil.rmtree(dst, ignore_errors=True)
                name = f"w{i:02d}-synthetic"
                _minimal_workload(workloads_dir / name, name)
        else:
            name = f"w{i:02d}-synthetic"
            _minimal_workload(workloads_dir / name, name)
        names.append(name)
    source = f"copied from workloads/{{{','.join(w.name for w in real)}}}" if real else "minimal"
    return names, source


def generate_fleet(
    root: Path, clusters: int, cards: int, workloads: int, clouds: Sequence[str] = ("gcp",)
) -> SyntheticFleet:
    """Write a policy with ``clusters`` clusters cycling over ``clouds`` (the first one central), each offering the
    first ``cards`` cards of its cloud (fewer where the cloud offers fewer), one stack file per cluster with the
    settings its cloud needs, and ``workloads`` workload folders placed on ``all`` cards."""
    if clusters < 1:
        raise ValueError("at least one cluster")
    unknown = [c for c in clouds if c not in CLOUD_PREFIXES]
    if not clouds or unknown:
        raise ValueError(f"--clouds takes {', '.join(CLOUD_PREFIXES)} (got {', '.join(clouds) or 'none'})")
    offered = {cloud: cloud_cards(cloud) for cloud in clouds}
    most = max(len(v) for v in offered.values())
    if not 1 <= cards <= most:
        listed = "; ".join(f"{cloud} offers {', '.join(v)}" for cloud, v in offered.items())
        raise ValueError(f"--cards must be 1..{most} ({listed})")
    chosen = {cloud: tuple(v[:cards]) for cloud, v in offered.items()}
    root.mkdir(parents=True, exist_ok=True)
    workloads_dir = root / "workloads"
    workload_names, source = _write_workloads(workloads_dir, workloads)
    placed = [(i, clouds[i % len(clouds)]) for i in range(clusters)]
    names = [f"{CLOUD_PREFIXES[cloud]}-bench-{i:04d}" for i, cloud in placed]
    by_cloud: dict[str, dict[str, Any]] = {}
    for (i, cloud), name in zip(placed, names, strict=True):
        settings_: dict[str, Any] = {**_location(cloud, i // len(clouds)), "gpus": list(chosen[cloud])}
        if i == 0:
            settings_["central"] = True
            settings_["description"] = "synthetic central cluster"
        by_cloud.setdefault(cloud, {})[name] = settings_
    policy = {
        "defaults": {
            "gpu_pool": {"min_nodes": 0, "max_nodes": 2, "spot": True},
            "system_pool": {"min_nodes": 1, "max_nodes": 3},
            "kubernetes_version": "1.33",
        },
        "monitoring": dict(MONITORING),
        "clusters": by_cloud,
        "workloads": dict.fromkeys(workload_names, "all"),
    }
    policy_file = root / "fleet.yaml"
    policy_file.write_text(
        "# synthetic fleet written by benchmarks/plan_speed.py\n" + yaml.safe_dump(policy, sort_keys=False),
        encoding="utf-8",
    )
    stacks_dir = root / "stacks"
    stacks_dir.mkdir(exist_ok=True)
    for (_, cloud), name in zip(placed, names, strict=True):
        config = {**STACK_CONFIG, **CLOUD_STACK_CONFIG[cloud]}
        (stacks_dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return SyntheticFleet(
        root,
        policy_file.resolve(),
        stacks_dir,
        workloads_dir,
        tuple(names),
        tuple(dict.fromkeys(card for cloud in clouds for card in chosen[cloud])),
        tuple(workload_names),
        source,
        tuple(clouds),
        chosen,
    )


# --------------------------------------------------------------------------------------------------------------
# The plan (the real code path)
# --------------------------------------------------------------------------------------------------------------


def _fresh_process_caches() -> None:
    """Forget what an earlier run cached, so each run costs what one ``python -m fleet plan`` costs
    (imports stay warm: they are measured once, separately)."""
    fleet_policy.clear_fleet_cache()


def load_policy(synthetic: SyntheticFleet) -> tuple[Fleet, float]:
    """The policy loaded as the CLI loads it before planning (read afresh and kept for the programs), and how long it
    took."""
    started = time.perf_counter()
    fleet = fleet_policy.load_fleet_cached(synthetic.policy_file, synthetic.workloads_dir, reload=True)
    return fleet, time.perf_counter() - started


def run_plan(synthetic: SyntheticFleet, fleet: Fleet) -> tuple[list[StackPlan], float]:
    """Plan every stack with ``plan_fleet``; the plans and the wall time of the whole call."""
    _fresh_process_caches()
    # the CLI's own load, untimed here (``load s``): the programs then find the policy loaded, as under the CLI
    fleet_policy.load_fleet_cached(synthetic.policy_file, synthetic.workloads_dir, reload=True)
    started = time.perf_counter()
    plans = plan_fleet(fleet, synthetic.policy_file, None, synthetic.stacks_dir, synthetic.workloads_dir)
    return plans, time.perf_counter() - started


@dataclass
class StackMemory:
    """Python allocations (tracemalloc) while one stack was planned."""

    stack: str
    peak_above_start: int  # bytes: highest traced size during the stack minus the traced size when it started
    retained: int  # bytes: traced size after the stack minus before (the StackPlan kept by plan_fleet, caches)
    maxrss_kib: int  # process high-water mark (ru_maxrss, KiB on Linux) after the stack


@contextlib.contextmanager
def _per_stack_hook(callback: Callable[[str, Callable[[], StackPlan]], StackPlan]) -> Iterator[None]:
    """Wrap ``fleet.plan.plan_stack`` (which ``plan_fleet`` calls by its module global) for the duration."""
    original = fleet_plan.plan_stack

    def wrapper(stack: str, *args: Any, **kwargs: Any) -> StackPlan:
        return callback(stack, lambda: original(stack, *args, **kwargs))

    fleet_plan.plan_stack = wrapper  # type: ignore[assignment]
    try:
        yield
    finally:
        fleet_plan.plan_stack = original  # type: ignore[assignment]


def measure_memory(synthetic: SyntheticFleet, fleet: Fleet) -> dict[str, Any]:
    """One more ``plan_fleet`` run under tracemalloc (slower, so never the timed one)."""
    rows: list[StackMemory] = []
    overall_peak = 0

    def per_stack(stack: str, plan: Callable[[], StackPlan]) -> StackPlan:
        nonlocal overall_peak
        before, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
        tracemalloc.reset_peak()
        result = plan()
        after, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
        rows.append(StackMemory(stack, peak - before, after - before, _maxrss_kib()))
        return result

    _fresh_process_caches()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with _per_stack_hook(per_stack):
            plans = plan_fleet(fleet, synthetic.policy_file, None, synthetic.stacks_dir, synthetic.workloads_dir)
        current, peak = tracemalloc.get_traced_memory()
        overall_peak = max(overall_peak, peak)
    finally:
        tracemalloc.stop()
    del plans
    return {
        "tracemalloc_peak_bytes": overall_peak - base,
        "tracemalloc_retained_bytes": current - base,
        "maxrss_kib": _maxrss_kib(),
        "per_stack": rows,
    }


def _maxrss_kib() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # bytes on macOS, KiB on Linux


# --------------------------------------------------------------------------------------------------------------
# The floor: the same resources, bare, under the stock mock engine
# --------------------------------------------------------------------------------------------------------------


class EchoMocks(pulumi.runtime.Mocks):
    """The least a mock can do: a resource's outputs are its inputs; no invoke is expected."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


def _bare(value: Any) -> Any:
    """A recorded input value as a program would pass it: secrets as ``Output.secret``, the rest plain."""
    if rpc.is_rpc_secret(value):
        return pulumi.Output.secret(_bare(rpc.unwrap_rpc_secret(value)))
    if isinstance(value, dict):
        return {k: _bare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


PROVIDER_PREFIX = "pulumi:providers:"
STACK_REFERENCE = "pulumi:pulumi:StackReference"


def _parents_first(registrations: Sequence[Registration]) -> list[Registration]:
    """``registrations`` (in URN order, as a plan lists them) reordered so that a resource's parent and provider
    come before it, as a program must declare them."""
    by_urn = {r.urn: r for r in registrations}
    ordered: list[Registration] = []
    placed: set[str] = set()

    def place(reg: Registration) -> None:
        if reg.urn in placed:
            return
        placed.add(reg.urn)
        for needed in (reg.parent, reg.provider.rsplit("::", 1)[0] if reg.provider else ""):
            if needed in by_urn:
                place(by_urn[needed])
        ordered.append(reg)

    for reg in registrations:
        place(reg)
    return ordered


def _register_bare(registrations: Sequence[Registration], exports: dict[str, Any]) -> None:
    """Declare every recorded resource again with the generic SDK classes, each after its parent and provider."""
    by_urn: dict[str, pulumi.Resource] = {}
    for reg in _parents_first(registrations):
        provider = by_urn.get(reg.provider.rsplit("::", 1)[0]) if reg.provider else None
        opts = pulumi.ResourceOptions(
            parent=by_urn.get(reg.parent),  # None for the stack's direct children: the root stack
            provider=provider,  # type: ignore[arg-type]
            protect=reg.protect or None,
            ignore_changes=reg.ignore_changes or None,
            # A StackReference is read, not registered (ReadResource with its stack name as the id).
            id=reg.inputs.get("name", reg.name) if reg.type == STACK_REFERENCE else None,
        )
        props = _bare(reg.inputs)
        res: pulumi.Resource
        if reg.type.startswith(PROVIDER_PREFIX):
            res = pulumi.ProviderResource(reg.type[len(PROVIDER_PREFIX) :], reg.name, props, opts)
        elif reg.custom:
            res = pulumi.CustomResource(reg.type, reg.name, props, opts)
        else:
            component = pulumi.ComponentResource(reg.type, reg.name, props, opts)
            component.register_outputs({})
            res = component
        by_urn[reg.urn] = res
    for key, value in exports.items():
        pulumi.export(key, _bare(value))


def replay_bare(stack: str, plan: StackPlan) -> tuple[float, set[str]]:
    """Register ``plan``'s resources bare in a fresh context, set up as ``fleet.plan.plan_stack`` does;
    the wall time and the URNs the engine received."""
    mocks = EchoMocks()
    monitor = pulumi_mocks.MockMonitor(mocks)

    def run() -> None:
        settings.ROOT.set(monitor)  # type: ignore[arg-type]
        pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
        settings.ROOT.set(None)
        _sync_await(run_in_stack(dispatched(lambda: _register_bare(plan.registrations, plan.exports))))

    started = time.perf_counter()
    contextvars.copy_context().run(run)
    elapsed = time.perf_counter() - started
    return elapsed, set(monitor.resources)


def run_floor(plans: Sequence[StackPlan], tuned: bool = False) -> tuple[list[float], float]:
    """The floor of every stack; per-stack seconds and the wall time of all of them.

    ``tuned`` replays under the plan's own process settings (``fleet.plan.plan_runtime``: the raised collector
    threshold and the SDK stand-ins); by default the stock interpreter and SDK, as a bare Pulumi program runs.
    Fails if the bare replay did not reach the engine with exactly the plan's URNs (then it would not be the
    same resources).
    """
    seconds = []
    started = time.perf_counter()
    with plan_runtime() if tuned else contextlib.nullcontext():
        for plan in plans:
            elapsed, urns = replay_bare(plan.stack, plan)
            expected = {r.urn for r in plan.registrations}
            if urns != expected:
                missing, extra = sorted(expected - urns)[:3], sorted(urns - expected)[:3]
                raise RuntimeError(f"floor of {plan.stack} registered other URNs: missing {missing}, extra {extra}")
            seconds.append(elapsed)
    return seconds, time.perf_counter() - started


# --------------------------------------------------------------------------------------------------------------
# Measuring one size, and the trend over sizes
# --------------------------------------------------------------------------------------------------------------


@dataclass
class StackRow:
    """One stack of one size: resources, best plan and floor time over the repeats, memory."""

    stack: str
    resources: int
    plan_seconds: float  # StackPlan.seconds (min over repeats)
    floor_seconds: float  # bare replay (min over repeats)
    ratio: float
    py_peak_bytes: int | None = None
    py_retained_bytes: int | None = None
    maxrss_kib: int | None = None


@dataclass
class SizeResult:
    """Everything measured at one fleet size."""

    clusters: int
    cards: int
    workloads: int
    stacks: int
    resources: int
    policy_load_seconds: float  # load_fleet as the CLI does before planning (not part of plan_seconds)
    plan_seconds: float  # wall time of plan_fleet (min over repeats)
    plan_stack_sum_seconds: float  # sum of StackPlan.seconds of that run
    plan_outside_stacks_seconds: float  # plan_seconds minus the stacks: stack config, references between stacks
    floor_seconds: float  # wall time of the bare replay of every stack (min over repeats)
    ratio: float  # plan_seconds / floor_seconds
    floor_tuned_seconds: float  # the bare replay under the plan's process settings, plan_runtime (min over repeats)
    ratio_tuned: float  # plan_seconds / floor_tuned_seconds: the overhead without the settings' share
    stack_ratio: float  # plan_stack_sum_seconds / floor_seconds
    plan_ms_per_stack: float
    plan_us_per_resource: float
    floor_ms_per_stack: float
    floor_us_per_resource: float
    central_stack: str  # the central stack grows with the fleet (one StackReference and Secret per leaf)
    central_resources: int
    central_plan_seconds: float
    central_floor_seconds: float
    leaf_plan_ms_median: float | None  # StackPlan.seconds of the other stacks (all alike here)
    leaf_floor_ms_median: float | None
    repeats: int
    plan_runs_seconds: list[float]
    floor_runs_seconds: list[float]
    memory: dict[str, Any] = field(default_factory=dict)
    per_stack: list[StackRow] = field(default_factory=list)


def measure_size(
    root: Path,
    clusters: int,
    cards: int,
    workloads: int,
    repeat: int = 3,
    memory: bool = True,
    clouds: Sequence[str] = ("gcp",),
) -> SizeResult:
    """Generate a fleet of ``clusters`` clusters (cycling over ``clouds``) under ``root`` and measure plan, floor
    (and memory)."""
    synthetic = generate_fleet(root, clusters, cards, workloads, clouds)
    fleet, load_seconds = load_policy(synthetic)
    best_plan: tuple[float, list[StackPlan]] | None = None
    plan_runs, floor_runs, floor_tuned_runs = [], [], []
    stack_plan_min: dict[str, float] = {}
    stack_floor_min: dict[str, float] = {}
    for _ in range(max(1, repeat)):
        gc.collect()
        plans, plan_wall = run_plan(synthetic, fleet)
        plan_runs.append(plan_wall)
        gc.collect()
        floor_seconds, floor_wall = run_floor(plans)
        floor_runs.append(floor_wall)
        gc.collect()
        floor_tuned_runs.append(run_floor(plans, tuned=True)[1])
        for plan, floor in zip(plans, floor_seconds, strict=True):
            stack_plan_min[plan.stack] = min(stack_plan_min.get(plan.stack, math.inf), plan.seconds)
            stack_floor_min[plan.stack] = min(stack_floor_min.get(plan.stack, math.inf), floor)
        if best_plan is None or plan_wall < best_plan[0]:
            best_plan = (plan_wall, plans)
        del plans
    assert best_plan is not None
    plan_wall, plans = best_plan
    floor_wall = min(floor_runs)
    rows = [
        StackRow(
            p.stack,
            len(p.registrations),
            stack_plan_min[p.stack],
            stack_floor_min[p.stack],
            stack_plan_min[p.stack] / stack_floor_min[p.stack],
        )
        for p in plans
    ]
    resources = sum(r.resources for r in rows)
    central = next(r for r in rows if r.stack == fleet.central.name)
    leaves = [r for r in rows if r is not central]
    stack_sum = sum(p.seconds for p in plans)
    del plans, best_plan
    mem: dict[str, Any] = {}
    if memory:
        gc.collect()
        mem = measure_memory(synthetic, fleet)
        by_stack = {m.stack: m for m in mem.pop("per_stack")}
        for row in rows:
            m = by_stack[row.stack]
            row.py_peak_bytes, row.py_retained_bytes, row.maxrss_kib = m.peak_above_start, m.retained, m.maxrss_kib
    shutil.rmtree(root, ignore_errors=True)
    return SizeResult(
        clusters=clusters,
        cards=cards,
        workloads=workloads,
        stacks=len(rows),
        resources=resources,
        policy_load_seconds=load_seconds,
        plan_seconds=plan_wall,
        plan_stack_sum_seconds=stack_sum,
        plan_outside_stacks_seconds=plan_wall - stack_sum,
        floor_seconds=floor_wall,
        ratio=plan_wall / floor_wall,
        floor_tuned_seconds=min(floor_tuned_runs),
        ratio_tuned=plan_wall / min(floor_tuned_runs),
        stack_ratio=stack_sum / floor_wall,
        plan_ms_per_stack=1e3 * plan_wall / len(rows),
        plan_us_per_resource=1e6 * plan_wall / resources,
        floor_ms_per_stack=1e3 * floor_wall / len(rows),
        floor_us_per_resource=1e6 * floor_wall / resources,
        central_stack=central.stack,
        central_resources=central.resources,
        central_plan_seconds=central.plan_seconds,
        central_floor_seconds=central.floor_seconds,
        leaf_plan_ms_median=1e3 * statistics.median(r.plan_seconds for r in leaves) if leaves else None,
        leaf_floor_ms_median=1e3 * statistics.median(r.floor_seconds for r in leaves) if leaves else None,
        repeats=max(1, repeat),
        plan_runs_seconds=plan_runs,
        floor_runs_seconds=floor_runs,
        memory=mem,
        per_stack=rows,
    )


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b x``: (a, b, r squared)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 1.0
    return a, b, r2


def linearity(results: Sequence[SizeResult], key: str = "plan_seconds") -> dict[str, Any]:
    """How ``key`` (a time) grows with the number of resources over the sizes measured.

    ``exponent`` is the slope of log(time) over log(resources): 1.0 is linear, 2.0 quadratic.
    ``per_resource_growth`` is time per resource at the largest size over the smallest (1.0 = linear).
    """
    if len(results) < 2:
        return {"sizes": len(results), "note": "one size only: nothing to fit"}
    xs = [float(r.resources) for r in results]
    ys = [float(getattr(r, key)) for r in results]
    a, b, r2 = _fit(xs, ys)
    _, exponent, _ = _fit([math.log(x) for x in xs], [math.log(y) for y in ys])
    small, large = min(results, key=lambda r: r.resources), max(results, key=lambda r: r.resources)
    growth = (getattr(large, key) / large.resources) / (getattr(small, key) / small.resources)
    return {
        "sizes": len(results),
        "intercept_seconds": a,
        "seconds_per_resource": b,
        "r_squared": r2,
        "exponent": exponent,
        "per_resource_growth": growth,
    }


# --------------------------------------------------------------------------------------------------------------
# Running and reporting
# --------------------------------------------------------------------------------------------------------------


def warm_up(workdir: Path, cards: int, workloads: int, clouds: Sequence[str] = ("gcp",)) -> float:
    """Plan a fleet of one cluster per cloud (at least 2) once, untimed, so imports (pulumi_gcp, pulumi_aws,
    pulumi_kubernetes...) and first-call costs are not charged to the first measured size; returns how long that
    took."""
    synthetic = generate_fleet(workdir / "warm-up", max(2, len(clouds)), cards, workloads, clouds)
    fleet, _ = load_policy(synthetic)
    started = time.perf_counter()
    plans, _ = run_plan(synthetic, fleet)
    run_floor(plans)
    elapsed = time.perf_counter() - started
    shutil.rmtree(synthetic.root, ignore_errors=True)
    return elapsed


def run_benchmark(
    clusters: int = 100,
    cards: int = 8,
    workloads: int = 4,
    sizes: Sequence[int] = (10, 25, 50, 100),
    repeat: int = 3,
    memory: bool = True,
    log: Callable[[str], None] = lambda _msg: None,
    clouds: Sequence[str] = ("gcp",),
) -> dict[str, Any]:
    """Measure every size (``clusters`` included, cycling over ``clouds``) and return all figures as plain data (the
    ``--json`` form)."""
    all_sizes = sorted({*sizes, clusters})
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-bench-") as tmp:
        workdir = Path(tmp)
        warm = warm_up(workdir, cards, workloads, clouds)
        log(f"warm-up (imports, first calls): {warm:.2f} s")
        results = []
        for n in all_sizes:
            log(
                f"measuring {n} clusters ({','.join(clouds)}) x {cards} cards x {workloads} workloads"
                f" ({repeat} repeat(s))..."
            )
            results.append(measure_size(workdir / f"fleet-{n}", n, cards, workloads, repeat, memory, clouds))
    full = next(r for r in results if r.clusters == clusters)
    real = [w.name for w in _real_workloads()]
    source = "none" if not workloads else f"copies of workloads/{{{','.join(real)}}}" if real else "minimal"
    total_plan = sum(r.plan_seconds for r in results)
    total_floor = sum(r.floor_seconds for r in results)
    return {
        "parameters": {
            "clusters": clusters,
            "cards": cards,
            "clouds": list(clouds),
            "card_names": list(dict.fromkeys(c for cloud in clouds for c in cloud_cards(cloud)[:cards])),
            "card_names_by_cloud": {cloud: cloud_cards(cloud)[:cards] for cloud in clouds},
            "workloads": workloads,
            "workload_source": source,
            "sizes": all_sizes,
            "repeat": repeat,
            "timing": "min over repeats; memory from one extra run under tracemalloc",
        },
        "environment": {
            "python": platform.python_version(),
            "pulumi": pulumi.__version__ if hasattr(pulumi, "__version__") else _dist_version("pulumi"),
            **{sdk: _dist_version(sdk) for cloud in clouds if (sdk := CLOUD_SDKS.get(cloud))},
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "warm_up_seconds": warm,
        "sizes": [asdict(r) for r in results],
        "linearity": {
            "plan": linearity(results, "plan_seconds"),
            "plan_stacks_only": linearity(results, "plan_stack_sum_seconds"),
            "floor": linearity(results, "floor_seconds"),
        },
        "ratio": {
            "full_size": full.ratio,
            "all_sizes": total_plan / total_floor,
            "by_size": {str(r.clusters): r.ratio for r in results},
            "full_size_tuned": full.ratio_tuned,
            "all_sizes_tuned": total_plan / sum(r.floor_tuned_seconds for r in results),
            "by_size_tuned": {str(r.clusters): r.ratio_tuned for r in results},
            "target": TARGET_RATIO,
            "within_target": full.ratio <= TARGET_RATIO,
            "within_target_tuned": full.ratio_tuned <= TARGET_RATIO,
        },
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def render(report: dict[str, Any], stack_rows: int | None = None) -> str:
    """The human-readable tables."""
    p = report["parameters"]
    env = report["environment"]
    clouds = p.get("clouds", ["gcp"])
    if clouds == ["gcp"]:
        fleet_line = f"{p['clusters']} GKE clusters x {p['cards']} cards ({', '.join(p['card_names'])})"
    else:
        by_cloud = "; ".join(f"{cloud}: {', '.join(cards)}" for cloud, cards in p["card_names_by_cloud"].items())
        fleet_line = (
            f"{p['clusters']} clusters cycling over {', '.join(clouds)} x up to {p['cards']} cards ({by_cloud})"
        )
    sdks = ", ".join(f"{k} {v}" for k, v in env.items() if k.startswith("pulumi_"))
    lines = [
        f"gpu-fleet plan benchmark: {fleet_line} x {p['workloads']} workloads ({p['workload_source']})",
        f"python {env['python']}, pulumi {env['pulumi']}, {sdks}, {env['platform']}",
        f"times: {p['timing']}; warm-up (imports) {report['warm_up_seconds']:.2f} s, not counted",
        "",
        "Per size (plan = plan_fleet wall time; floor = the same resources registered bare under the stock mocks;",
        " floor tuned = that floor under the plan's own process settings: GC threshold and SDK stand-ins)",
        f"{'clusters':>8} {'stacks':>6} {'resources':>9} {'plan s':>8} {'floor s':>8} {'ratio':>6} "
        f"{'floor tuned s':>13} {'ratio tuned':>11} "
        f"{'ms/stack':>9} {'us/res':>7} {'floor us/res':>12} {'outside s':>9} {'load s':>7} "
        f"{'py peak MiB':>11} {'maxrss MiB':>10}",
    ]
    for s in report["sizes"]:
        mem = s["memory"]
        lines.append(
            f"{s['clusters']:>8} {s['stacks']:>6} {s['resources']:>9} {s['plan_seconds']:>8.3f} "
            f"{s['floor_seconds']:>8.3f} {s['ratio']:>6.2f} {s['floor_tuned_seconds']:>13.3f} "
            f"{s['ratio_tuned']:>11.2f} {s['plan_ms_per_stack']:>9.2f} "
            f"{s['plan_us_per_resource']:>7.0f} {s['floor_us_per_resource']:>12.0f} "
            f"{s['plan_outside_stacks_seconds']:>9.3f} {s['policy_load_seconds']:>7.3f} "
            f"{_mib(mem.get('tracemalloc_peak_bytes')):>11} "
            f"{_mib(mem['maxrss_kib'] * 1024) if 'maxrss_kib' in mem else '-':>10}"
        )
    lines += [
        "",
        "Central stack vs the others (StackPlan.seconds; the central one has a StackReference + Secret per leaf)",
        f"{'clusters':>8} {'central res':>11} {'plan ms':>8} {'floor ms':>8} {'ratio':>6} "
        f"{'leaf median plan ms':>19} {'floor ms':>8} {'ratio':>6}",
    ]
    for s in report["sizes"]:
        leaf_plan, leaf_floor = s["leaf_plan_ms_median"], s["leaf_floor_ms_median"]
        leaf = (
            f"{leaf_plan:>19.1f} {leaf_floor:>8.1f} {leaf_plan / leaf_floor:>6.2f}"
            if leaf_plan is not None and leaf_floor
            else f"{'-':>19} {'-':>8} {'-':>6}"
        )
        lines.append(
            f"{s['clusters']:>8} {s['central_resources']:>11} {1e3 * s['central_plan_seconds']:>8.1f} "
            f"{1e3 * s['central_floor_seconds']:>8.1f} {s['central_plan_seconds'] / s['central_floor_seconds']:>6.2f} "
            + leaf
        )
    lines.append("")
    lines.append("Growth with fleet size (least squares over the sizes; exponent 1.0 = linear, 2.0 = quadratic)")
    for name, fit in report["linearity"].items():
        if "exponent" not in fit:
            lines.append(f"  {name:<17} {fit['note']}")
            continue
        lines.append(
            f"  {name:<17} t = {fit['intercept_seconds']:.3f} s"
            f" + {1e6 * fit['seconds_per_resource']:.0f} us x resources"
            f" (R^2 {fit['r_squared']:.4f}), exponent {fit['exponent']:.3f}, "
            f"time/resource largest/smallest {fit['per_resource_growth']:.2f}"
        )
    ratio = report["ratio"]
    lines += [
        "",
        f"Ratio plan/floor at full size: {ratio['full_size']:.2f}   over all sizes: {ratio['all_sizes']:.2f}   "
        f"(target <= {ratio['target']}: {'met' if ratio['within_target'] else 'NOT met'})",
        f"Ratio plan/floor tuned (the floor given the plan's GC threshold and SDK stand-ins too): "
        f"{ratio['full_size_tuned']:.2f} at full size, {ratio['all_sizes_tuned']:.2f} over all sizes "
        f"(target <= {ratio['target']}: {'met' if ratio['within_target_tuned'] else 'NOT met'})",
    ]
    full = next(s for s in report["sizes"] if s["clusters"] == p["clusters"])
    rows = full["per_stack"]
    if len(clouds) > 1:
        lines += ["", *_per_cloud_lines(rows)]
    shown = rows if stack_rows is None else rows[:stack_rows]
    lines += [
        "",
        f"Per stack at full size ({len(rows)} stacks; plan = StackPlan.seconds, min over repeats; "
        "py peak = tracemalloc peak above the stack's start; maxrss = process high-water mark after it)",
        f"{'stack':<20} {'res':>4} {'plan ms':>8} {'floor ms':>8} {'ratio':>6} {'py peak MiB':>11} "
        f"{'retained KiB':>12} {'maxrss MiB':>10}",
    ]
    for r in shown:
        retained = "-" if r["py_retained_bytes"] is None else f"{r['py_retained_bytes'] / 1024:.0f}"
        maxrss = "-" if r["maxrss_kib"] is None else f"{r['maxrss_kib'] / 1024:.1f}"
        lines.append(
            f"{r['stack']:<20} {r['resources']:>4} {1e3 * r['plan_seconds']:>8.2f} {1e3 * r['floor_seconds']:>8.2f} "
            f"{r['ratio']:>6.2f} {_mib(r['py_peak_bytes']):>11} {retained:>12} {maxrss:>10}"
        )
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more stack(s) in --json")
    return "\n".join(lines)


def stack_cloud(stack: str) -> str:
    """The cloud of a synthetic stack, from the name ``generate_fleet`` gave it (``<prefix>-bench-NNNN``)."""
    prefix = stack.split("-bench-", 1)[0]
    return next((cloud for cloud, p in CLOUD_PREFIXES.items() if p == prefix), "?")


def _per_cloud_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The full size's stacks summed per cloud: where a mixed fleet's plan time over the floor comes from."""
    lines = [
        "Per cloud at full size (sums over the cloud's stacks of the per-stack best times; central stack included)",
        f"{'cloud':<10} {'stacks':>6} {'res/stack':>9} {'plan ms/stack':>13} {'floor ms/stack':>14} {'ratio':>6} "
        f"{'extra ms/stack':>14} {'share of extra':>14}",
    ]
    by_cloud: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_cloud.setdefault(stack_cloud(row["stack"]), []).append(row)
    extra_total = sum(r["plan_seconds"] - r["floor_seconds"] for r in rows)
    for cloud, group in by_cloud.items():
        n = len(group)
        plan, floor = sum(r["plan_seconds"] for r in group), sum(r["floor_seconds"] for r in group)
        share = f"{100 * (plan - floor) / extra_total:.0f}%" if extra_total > 0 else "-"
        lines.append(
            f"{cloud:<10} {n:>6} {sum(r['resources'] for r in group) / n:>9.0f} {1e3 * plan / n:>13.1f} "
            f"{1e3 * floor / n:>14.1f} {plan / floor:>6.2f} {1e3 * (plan - floor) / n:>14.1f} {share:>14}"
        )
    return lines


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of cluster counts") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("cluster counts must be positive")
    return sizes


def _clouds(text: str) -> list[str]:
    clouds = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in clouds if c not in CLOUD_PREFIXES]
    if not clouds or unknown:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a comma-separated list of {', '.join(CLOUD_PREFIXES)}, e.g. gcp,aws,azure"
        )
    return clouds


def build_parser() -> argparse.ArgumentParser:
    """Command line of the benchmark."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plan_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, help="full fleet size: clusters (default 100)")
    parser.add_argument(
        "--clouds",
        type=_clouds,
        default=["gcp"],
        help=f"clouds the clusters cycle over, the first one's first cluster central: any of "
        f"{','.join(CLOUD_PREFIXES)} (default gcp: a GKE-only fleet)",
    )
    parser.add_argument(
        "--cards", type=int, default=8, help="cards per cluster, capped at what its cloud offers (default 8)"
    )
    parser.add_argument("--workloads", type=int, default=4, help="synthetic workloads placed on all cards (default 4)")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[10, 25, 50, 100],
        help="cluster counts for the growth fit (default 10,25,50,100)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size; the best is kept (default 3)")
    parser.add_argument("--no-memory", action="store_true", help="skip the extra tracemalloc run per size")
    parser.add_argument("--stack-rows", type=int, default=None, help="show only this many per-stack rows")
    parser.add_argument("--json", type=Path, help="write every figure as JSON to this file")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="print the tables of an earlier run's --json file; measure nothing"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the tables (and write ``--json``)."""
    args = build_parser().parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8")), args.stack_rows))
        return 0
    if args.clusters < 1 or args.repeat < 1 or args.workloads < 0:
        build_parser().error("--clusters and --repeat must be positive, --workloads not negative")
    most = max(len(cloud_cards(cloud)) for cloud in args.clouds)
    if not 1 <= args.cards <= most:
        build_parser().error(f"--cards must be 1..{most} (the most cards {','.join(args.clouds)} offer)")
    report = run_benchmark(
        args.clusters,
        args.cards,
        args.workloads,
        args.sizes,
        args.repeat,
        not args.no_memory,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
        clouds=args.clouds,
    )
    print(render(report, args.stack_rows))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
