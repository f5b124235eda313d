"""Every panel of the fleet's Grafana dashboards (fleet/model/monitoring/dashboards.py) evaluated by a real Prometheus
holding series of known values, with the labels federation gives them.

The tests' own fleet (POLICY): one GKE cluster billed to ``physics`` with a T4, an L4 and a TPU pool and an L4 CI
runner; ``tracker`` on both
cards, ``fitter`` on the T4 billed to ``theory``, ``uploader`` (a counter headline) on the L4, and ``sweeper`` swept
over 1 and 2 L4s. An hour of samples, one a minute (minutes 1 to 60), is loaded with ``promtool tsdb
create-blocks-from openmetrics``; instant panels are evaluated at the hour's end over ``$__range`` = the hour, range
panels over the hour and read at its end. By hand, per series (labels cluster=dash-gke, cloud=gcp):

* tracker_throughput: T4 100, L4 300 (best: L4); fitter_duration_seconds: T4 20 (lower is better: T4);
* uploader_bytes_total on the L4: 10 per minute (600 at the end, 1/6 per second); it used 1 L4 all hour;
* sweeper: one worker at 1 L4 (120 s over 6 epochs: 20 s/epoch), two at 2 L4s (72 s and 66 s over 6 epochs each: the
  slowest 12 s/epoch): speed-up 20/12, efficiency 20/12/2; its headline gauge 20 and 12 (a card's mean: 16);
* cards: T4 1 billed (tracker 1/2 physics, fitter 1/2 theory), L4 3 billed (tracker 1, uploader 1, 1 idle), the L4
  sweep pool 3 billed and used by the sweeper, the L4 CI pool 1 billed and idle (no job), the TPU pool at zero: pools
  busy (2) but the CI pool idle (1) and the TPU pool at zero (0);
* probes: the last scale-up wait 95 s on the T4, 40 s on the L4; each benchmark pod drew 1,000 J a minute (60,000 J);
* one alert firing.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.kubernetes.federation import federated_selectors
from fleet.model.billing.prices import card_prices, load_prices
from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.monitoring import Monitoring
from fleet.model.core.workloads import Workload
from fleet.model.loader import load_fleet
from fleet.model.monitoring.dashboards import CARD_PRICE, fleet_dashboards, placed_workloads, price_rules
from fleet.model.monitoring.grafana import PanelQuery, panel_queries
from fleet.model.monitoring.prometheus import duration_seconds
from tests.conftest import FIXTURES, require_tool
from tests.e2e.processes import Prometheus, patience, wait_for
from tests.e2e.support import blocks_from_openmetrics
from tests.helpers import panels_on_missing_series

pytestmark = pytest.mark.e2e

POLICY = """\
clusters:
  gcp:
    dash-gke:
      zone: us-central1-a
      central: true
      billing_account: physics
      gpus: {t4: {}, l4: {}, tpu-v5e: {}, a100: {}}
workloads:
  tracker: [t4, l4]
  fitter: {gpus: [t4], billing_account: theory}
  uploader: [l4]
  sweeper: {gpus: [l4, tpu-v5e], scale: [2, 4]}
runners:
  gitlab_url: https://gitlab.example.org
  clusters:
    dash-gke:
      l4: {concurrency: 1}
"""
CLUSTER = {"cluster": "dash-gke", "cloud": "gcp"}
MINUTES = range(1, 61)
RANGE = 3600
# Grafana's $__rate_interval over an hour's range: four of the datasource's scrape intervals (grafana/grafana#77234),
# which the central's datasource sets to the federation interval (components/kubernetes/dashboards.py), one a minute
# here as in the samples loaded
RATE_INTERVAL = f"{4 * duration_seconds(Monitoring().federation_interval):g}s"


def pod(workload: str, gpu: str, name: str, **extra: str) -> dict[str, str]:
    """A benchmark pod's series as the leaf's PodMonitor scrapes them (the pod's METRIC_LABELS, its namespace and
    name, the target's container, endpoint, instance and job) and federation keeps them (``honor_labels``)."""
    target = {"container": "mtail", "endpoint": "mtail", "instance": f"{name}:3903", "job": "benchmarks/gpu-fleet"}
    return {"workload": workload, "gpu": gpu, "namespace": "benchmarks", "pod": name, **target, **extra}


def account(gpu: str, billing: str = "physics", pool: str = "", **extra: str) -> dict[str, str]:
    return {"gpu": gpu, "pool": pool or f"gpu-{gpu}", "billing_account": billing, **extra}


def sweep(acc: str, worker: str, name: str, gpu: str = "l4") -> dict[str, str]:
    return pod("sweeper", gpu, name, accelerators=acc, worker=worker, attempt="0")


# metric -> [(labels, value at minute k)]
SERIES: dict[str, list[tuple[dict[str, str], Callable[[int], float]]]] = {
    "tracker_throughput": [
        (pod("tracker", "t4", "tr-t4"), lambda k: 100),
        (pod("tracker", "l4", "tr-l4"), lambda k: 300),
    ],
    "fitter_duration_seconds": [(pod("fitter", "t4", "fi-t4"), lambda k: 20)],
    "uploader_bytes_total": [(pod("uploader", "l4", "up-l4"), lambda k: 10 * k)],
    "gan3d_jax_epoch_seconds_total": [
        (sweep("2", "0", "sw2-0"), lambda k: 2 * k),
        (sweep("4", "0", "sw4-0"), lambda k: 1.2 * k),
        (sweep("4", "1", "sw4-1"), lambda k: 1.1 * k),
        (sweep("4", "0", "swt4-0", "tpu-v5e"), lambda k: 1.0 * k),
    ],
    "gan3d_jax_epochs_total": [
        (sweep("2", "0", "sw2-0"), lambda k: k / 10),
        (sweep("4", "0", "sw4-0"), lambda k: k / 10),
        (sweep("4", "1", "sw4-1"), lambda k: k / 10),
        (sweep("4", "0", "swt4-0", "tpu-v5e"), lambda k: k / 10),
    ],
    "gan3d_jax_epoch_duration_seconds": [
        (sweep("2", "0", "sw2-0"), lambda k: 20),
        (sweep("4", "0", "sw4-0"), lambda k: 12),
        (sweep("4", "0", "swt4-0", "tpu-v5e"), lambda k: 10),
    ],
    "gan3d_jax_compile_seconds": [(sweep("2", "0", "sw2-0"), lambda k: 5)],
    "gan3d_jax_restart_attempt": [(sweep("2", "0", "sw2-0"), lambda k: 0)],
    "gpufleet:billed_cards": [
        (account("t4"), lambda k: 1),
        (account("l4"), lambda k: 3),
        (account("l4", pool="gpu-l4-x2"), lambda k: 2),
        (account("l4", pool="gpu-l4-x4"), lambda k: 4),
        (account("tpu-v5e"), lambda k: 1),
        (account("l4", pool="gpu-l4-ci"), lambda k: 1),
        (account("a100"), lambda k: 0),
    ],
    "gpufleet:used_cards": [
        (account("t4", workload="tracker"), lambda k: 0.5),
        (account("t4", "theory", workload="fitter"), lambda k: 0.5),
        (account("l4", workload="tracker"), lambda k: 1),
        (account("l4", workload="uploader"), lambda k: 1),
        (account("l4", pool="gpu-l4-x2", workload="sweeper"), lambda k: 2),
        (account("l4", pool="gpu-l4-x4", workload="sweeper"), lambda k: 4),
        (account("tpu-v5e", workload="sweeper"), lambda k: 1),
    ],
    "gpufleet:idle_cards": [
        (account("t4"), lambda k: 0),
        (account("l4"), lambda k: 1),
        (account("l4", pool="gpu-l4-x2"), lambda k: 0),
        (account("l4", pool="gpu-l4-x4"), lambda k: 0),
        (account("tpu-v5e"), lambda k: 0),
        (account("l4", pool="gpu-l4-ci"), lambda k: 1),
        (account("a100"), lambda k: 0),
    ],
    "gpufleet_probe_scaleup_seconds": [({"gpu": "t4"}, lambda k: 95), ({"gpu": "l4"}, lambda k: 40)],
    "gpufleet:gpu_energy_joules:sum": [
        (
            {"modelName": "NVIDIA L4" if name[-2:] == "l4" else "Tesla T4", "namespace": "benchmarks", "pod": name},
            lambda k: 1000 * k,
        )
        for name in ("tr-t4", "tr-l4", "fi-t4", "up-l4", "sw2-0", "sw4-0")  # no power reading on the TPU
    ],
    "ALERTS": [({"alertname": "ProbeFailed", "alertstate": "firing", "severity": "warning"}, lambda k: 1)],
}
CENTRAL_ONLY = {"ALERTS", CARD_PRICE}  # evaluated by the central itself, never federated


def openmetrics(
    start: int,
    prices: dict[tuple[str, str, str], float],
    series: dict[str, list[tuple[dict[str, str], Callable[[int], float]]]] = SERIES,
    cluster: dict[str, str] = CLUSTER,
) -> str:
    lines = []
    for name, of_name in series.items():
        lines.append(f"# TYPE {name} gauge")
        for extra, value in of_name:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted({**cluster, **extra}.items()))
            lines += [f"{name}{{{labels}}} {value(k)} {start + 60 * k}" for k in MINUTES]
    lines.append(f"# TYPE {CARD_PRICE} gauge")
    for (cluster, cloud, gpu), price in prices.items():
        labels = f'cloud="{cloud}",cluster="{cluster}",gpu="{gpu}"'
        lines += [f"{CARD_PRICE}{{{labels}}} {price} {start + 60 * k}" for k in MINUTES]
    return "\n".join([*lines, "# EOF"]) + "\n"


def expected(prices: dict[tuple[str, str, str], float]) -> dict[tuple[str, str, str], dict[tuple[str, ...], float]]:
    """(dashboard, panel, refId) -> {the answer's labels that tell series apart: value}."""
    t4, l4, tpu = (prices[("dash-gke", "gcp", gpu)] for gpu in ("t4", "l4", "tpu-v5e"))
    card = lambda gpu: ("dash-gke", "gcp", gpu)  # noqa: E731
    speedup = 20 / 12
    out = {
        ("gpufleet-overview", "tracker: result per card (items/s)", "A"): {card("t4"): 100, card("l4"): 300},
        ("gpufleet-overview", "tracker: best card", "A"): {card("l4"): 300},
        ("gpufleet-overview", "fitter: result per card (s)", "A"): {card("t4"): 20},
        ("gpufleet-overview", "fitter: best card", "A"): {card("t4"): 20},
        ("gpufleet-overview", "uploader: result per card (bytes)", "A"): {card("l4"): 600},
        ("gpufleet-overview", "uploader: best card", "A"): {card("l4"): 600},
        ("gpufleet-overview", "uploader: cost per result (USD)", "A"): {card("l4"): l4 * 1 / 600},
        ("gpufleet-overview", "sweeper: result per card (s)", "A"): {card("l4"): 16, card("tpu-v5e"): 10},
        ("gpufleet-overview", "sweeper: best card", "A"): {card("tpu-v5e"): 10},
        # the sweeper's results are its workers' epochs (L4 6 + 6 + 6, TPU 6), its jobs' 2 + 4 L4s and the TPU slice
        # used all hour
        ("gpufleet-overview", "sweeper: cost per result (USD)", "A"): {
            card("l4"): 6 * l4 / 18,
            card("tpu-v5e"): tpu / 6,
        },
        ("gpufleet-overview", "Cards billed, used and idle", "A"): {(): 12},
        ("gpufleet-overview", "Cards billed, used and idle", "B"): {(): 10},
        ("gpufleet-overview", "Cards billed, used and idle", "C"): {(): 2},
        ("gpufleet-overview", "Pools: busy, idle or at zero", "A"): {
            ("dash-gke", "gpu-t4"): 2,
            ("dash-gke", "gpu-l4"): 2,
            ("dash-gke", "gpu-l4-x2"): 2,
            ("dash-gke", "gpu-l4-x4"): 2,
            ("dash-gke", "gpu-tpu-v5e"): 2,
            ("dash-gke", "gpu-l4-ci"): 1,
            ("dash-gke", "gpu-a100"): 0,
        },
        ("gpufleet-overview", "Time to first accelerator (last probe)", "A"): {card("t4"): 95, card("l4"): 40},
        ("gpufleet-overview", "Alerts firing", "A"): {("ProbeFailed", "dash-gke", "warning"): 1},
        ("gpufleet-workload-tracker", "tracker_throughput", "A"): {card("t4"): 100, card("l4"): 300},
        ("gpufleet-workload-tracker", "GPU energy of the benchmark's pods", "A"): {
            card("t4"): 60000,
            card("l4"): 60000,
        },
        ("gpufleet-workload-fitter", "fitter_duration_seconds", "A"): {card("t4"): 20},
        ("gpufleet-workload-fitter", "GPU energy of the benchmark's pods", "A"): {card("t4"): 60000},
        ("gpufleet-workload-uploader", "uploader_bytes_total, per second", "A"): {card("l4"): 1 / 6},
        ("gpufleet-workload-uploader", "GPU energy of the benchmark's pods", "A"): {card("l4"): 60000},
        ("gpufleet-workload-sweeper", "gan3d_jax_epoch_seconds_total, per second", "A"): {
            card("l4"): (2 + 1.2 + 1.1) / 60,
            card("tpu-v5e"): 1 / 60,
        },
        ("gpufleet-workload-sweeper", "gan3d_jax_epochs_total, per second", "A"): {
            card("l4"): 3 / 600,
            card("tpu-v5e"): 1 / 600,
        },
        ("gpufleet-workload-sweeper", "gan3d_jax_epoch_duration_seconds", "A"): {card("l4"): 20, card("tpu-v5e"): 10},
        ("gpufleet-workload-sweeper", "gan3d_jax_compile_seconds", "A"): {card("l4"): 5},
        ("gpufleet-workload-sweeper", "gan3d_jax_restart_attempt", "A"): {card("l4"): 0},
        ("gpufleet-workload-sweeper", "GPU energy of the benchmark's pods", "A"): {card("l4"): 120000},
        ("gpufleet-scaling", "sweeper: seconds per epoch", "A"): {
            (*card("l4"), "2"): 20,
            (*card("l4"), "4"): 12,
            (*card("tpu-v5e"), "4"): 10,
        },
        # the L4 from its 2 cards, the TPU (whole 4-chip hosts: no job of 2) from its 4 chips
        ("gpufleet-scaling", "sweeper: speed-up over the smallest count", "A"): {card("l4"): 1},
        ("gpufleet-scaling", "sweeper: speed-up over the smallest count", "B"): {
            card("l4"): speedup,
            card("tpu-v5e"): 1,
        },
        ("gpufleet-scaling", "sweeper: parallel efficiency", "A"): {card("l4"): 1},
        ("gpufleet-scaling", "sweeper: parallel efficiency", "B"): {card("l4"): speedup / 2, card("tpu-v5e"): 1},
        ("gpufleet-accounting", "Card-hours per billing account", "A"): {("physics",): 12},
        ("gpufleet-accounting", "Card-hours per billing account", "B"): {("physics",): 9.5, ("theory",): 0.5},
        ("gpufleet-accounting", "Card-hours per billing account", "C"): {("physics",): 2},
        ("gpufleet-accounting", "Cost per billing account (USD)", "A"): {
            ("physics",): 0.5 * t4 + 10 * l4 + tpu,
            ("theory",): 0.5 * t4,
        },
        ("gpufleet-accounting", "Idle cards per pool", "A"): {
            ("dash-gke", "gpu-t4"): 0,
            ("dash-gke", "gpu-l4"): 1,
            ("dash-gke", "gpu-l4-x2"): 0,
            ("dash-gke", "gpu-l4-x4"): 0,
            ("dash-gke", "gpu-tpu-v5e"): 0,
            ("dash-gke", "gpu-l4-ci"): 1,
            ("dash-gke", "gpu-a100"): 0,
        },
    }
    return out


# The labels an answer is told apart by, in the order of the expectations' keys.
KEY_LABELS = ("cluster", "cloud", "gpu", "accelerators", "alertname", "severity", "billing_account", "pool")


def answer_key(labels: dict[str, str]) -> tuple[str, ...]:
    if "alertname" in labels:
        return (labels["alertname"], labels["cluster"], labels["severity"])
    if "billing_account" in labels:
        return (labels["billing_account"],)
    if "pool" in labels:
        return (labels["cluster"], labels["pool"])
    return tuple(labels[k] for k in KEY_LABELS if k in labels)


def substitute(expr: str, values: dict[str, str]) -> str:
    """The query as Grafana sends it: the dashboard's variables (All is ``.*``) and Grafana's own range variables."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__range", f"{RANGE}s")
    return re.sub(r"\$(\w+)", lambda m: values.get(m.group(1), ".*"), expr)


def start_central(tmp: Path, text: str) -> Prometheus:
    """A real Prometheus on TSDB blocks made of ``text`` (OpenMetrics with timestamps), ready."""
    blocks_from_openmetrics(require_tool("promtool"), text, tmp)
    prometheus = Prometheus(require_tool("prometheus"), tmp / "prometheus", {"global": {"scrape_interval": "60s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
    except BaseException:
        prometheus.stop()
        raise
    return prometheus


def hour_start() -> int:
    """A whole hour, four hours ago: only the loaded blocks hold it (the wall clock only places the data)."""
    return (int(time.time()) // 3600 - 4) * 3600


@pytest.fixture(scope="module")
def central(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("dashboards")
    policy = tmp / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    prices = card_prices(fleet, load_prices())
    start = hour_start()
    prometheus = start_central(tmp, openmetrics(start, prices))
    try:
        yield {"prometheus": prometheus, "fleet": fleet, "prices": prices, "end": start + RANGE, "start": start}
    finally:
        prometheus.stop()


def evaluate(central: dict[str, Any], expr: str, instant: bool, values: dict[str, str] | None = None) -> dict:
    prometheus, end = central["prometheus"], central["end"]
    query = substitute(expr, values or {})
    if instant:
        return {answer_key(r["metric"]): float(r["value"][1]) for r in prometheus.query(query, at=end)}
    result = prometheus.query_range(query, central["start"] + 60, end, 60)
    return {answer_key(r["metric"]): float(r["values"][-1][1]) for r in result if float(r["values"][-1][0]) == end}


def test_every_panel_gives_its_known_value(central: dict[str, Any]) -> None:
    queries = panel_queries(fleet_dashboards(central["fleet"]))
    wanted = expected(central["prices"])
    got = {(q.dashboard, q.panel, q.ref): evaluate(central, q.expr, q.instant) for q in queries}
    assert set(got) == set(wanted), "a panel has no expectation here, or an expectation no panel"
    empty = [key for key, answer in got.items() if not answer]
    assert empty == [], f"panels that show nothing: {empty}"
    for key, values in wanted.items():
        assert set(got[key]) == set(values), (key, got[key])
        for labels, value in values.items():
            assert got[key][labels] == pytest.approx(value, rel=1e-9), (key, labels, got[key])


def test_a_variable_narrows_a_panel(central: dict[str, Any]) -> None:
    (result,) = [
        q for q in panel_queries(fleet_dashboards(central["fleet"])) if q.panel == "tracker: result per card (items/s)"
    ]
    assert evaluate(central, result.expr, True, {"gpu": "t4"}) == {("dash-gke", "gcp", "t4"): 100}
    assert evaluate(central, result.expr, True, {"cluster": "elsewhere"}) == {}
    # the overview's Workload variable keeps the picked workloads' panels and empties the others'
    by_panel = {
        q.panel: q for q in panel_queries(fleet_dashboards(central["fleet"])) if q.dashboard.endswith("overview")
    }
    picked = {"workload": "fitter|uploader"}
    assert evaluate(central, result.expr, True, picked) == {}
    fitter = by_panel["fitter: result per card (s)"]
    assert evaluate(central, fitter.expr, True, picked) == {("dash-gke", "gcp", "t4"): 20}
    cost = by_panel["uploader: cost per result (USD)"]
    assert evaluate(central, cost.expr, True, picked) == evaluate(central, cost.expr, True)
    assert evaluate(central, cost.expr, True, {"workload": "tracker"}) == {}


def test_every_metric_a_panel_reads_reaches_the_central(central: dict[str, Any]) -> None:
    """This fleet has no leaf: what reaches its central is what a leaf would federate, the central's card prices and
    ALERTS (the same check on planned fleets with leaves: tests/components/kubernetes/test_dashboards.py)."""
    fleet = central["fleet"]
    recorded = {r["record"] for g in price_rules(central["prices"])["groups"] for r in g["rules"]}
    available = set(federated_selectors(fleet)) | recorded | {"ALERTS"}
    assert CENTRAL_ONLY <= available and set(SERIES) | {CARD_PRICE} <= available
    assert panels_on_missing_series(fleet_dashboards(fleet), available) == []


# The shipped fleet (policy/fleet.yaml, or a team's own in its place): every panel of its dashboards non-empty on series
# shaped as its pods, pools and probes give them, one of each the policy implies.
Series = dict[str, list[tuple[dict[str, str], Callable[[int], float]]]]


def _pod_series(series: Series, workload: Workload, cluster: Cluster, card: str, pod: str, **point: str) -> None:
    """Every metric the workload declares for one of its pods, with its declared labels (a sweep point's values, the
    headline's matched ones, "x" otherwise); counters grow, gauges stay."""
    head = workload.spec.headline
    base = {"cluster": cluster.name, "cloud": cluster.cloud, "workload": workload.name, "gpu": card}
    base |= {"namespace": "benchmarks", "pod": pod, "job": "benchmarks/gpu-fleet", "instance": f"{pod}:3903"}
    for metric in workload.spec.metrics:
        labels = {k: point.get(k, "0") for k in metric.labels}
        if metric.name == head.metric:
            labels |= head.match
        value: Callable[[int], float] = (lambda k: float(k)) if metric.type == "counter" else (lambda k: 2.0)
        series[metric.name].append(({**base, **labels}, value))
    series["gpufleet:gpu_energy_joules:sum"].append(
        ({"cluster": cluster.name, "cloud": cluster.cloud, "namespace": "benchmarks", "pod": pod}, lambda k: 100.0 * k)
    )


def fleet_series(fleet: Fleet) -> tuple[Series, set[tuple[str, str, str, str]]]:
    """Series of every benchmark pod (each queued Job on every worker that may take it), every sweep point's workers,
    every pool's accounting records (cards used only on the pools a job runs on: a CI pool or an unused one has none)
    and every probed pool's probe; and the (workload, cluster, cloud, card) placed."""
    series: Series = defaultdict(list)
    placed: set[tuple[str, str, str, str]] = set()
    for cluster in fleet.clusters.values():
        used: set[tuple[str, str]] = set()  # (pool, workload)
        for job in fleet.benchmarks(cluster) + fleet.dispatched_to(cluster):
            pod = f"{job.workload.name}-{job.pool.card}-{cluster.name}"
            _pod_series(series, job.workload, cluster, job.pool.card, pod)
            placed.add((job.workload.name, cluster.name, cluster.cloud, job.pool.card))
            used.add((job.pool.name, job.workload.name))
        points = [(p.workload, p.pool, p.accelerators, p.nodes) for p in fleet.sweep_points(cluster)]
        points += [(p.workload, pool, p.accelerators, p.nodes) for p, pool in fleet.queued_points_on(cluster)]
        for workload, pool, accelerators, nodes in points:
            for worker in range(nodes):
                pod = f"{workload.name}-{pool.card}-n{accelerators}-{worker}-{cluster.name}"
                _pod_series(
                    series, workload, cluster, pool.card, pod, accelerators=str(accelerators), worker=str(worker)
                )
            placed.add((workload.name, cluster.name, cluster.cloud, pool.card))
            used.add((pool.name, workload.name))
        for pool in cluster.all_pools:
            account = {"cluster": cluster.name, "cloud": cluster.cloud, "gpu": pool.card, "pool": pool.name}
            account["billing_account"] = cluster.billing_account
            series["gpufleet:billed_cards"].append((account, lambda k: 1.0))
            series["gpufleet:idle_cards"].append((account, lambda k: 0.0))
            for workload in sorted(w for name, w in used if name == pool.name):
                series["gpufleet:used_cards"].append(({**account, "workload": workload}, lambda k: 1.0))
            if pool.probe is not None:
                probe = {"cluster": cluster.name, "cloud": cluster.cloud, "gpu": pool.card, "workload": "probe"}
                series["gpufleet_probe_scaleup_seconds"].append((probe, lambda k: 30.0))
    series["ALERTS"].append(
        ({"alertname": "ProbeFailed", "alertstate": "firing", "cluster": fleet.central.name}, lambda k: 1.0)
    )
    return series, placed


@pytest.fixture(scope="module")
def shipped_central(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_tool("promtool"), require_tool("prometheus")
    fleet = load_fleet()
    prices = card_prices(fleet, load_prices())
    series, placed = fleet_series(fleet)
    start = hour_start()
    prometheus = start_central(tmp_path_factory.mktemp("shipped"), openmetrics(start, prices, series, {}))
    try:
        yield {"prometheus": prometheus, "fleet": fleet, "placed": placed, "end": start + RANGE, "start": start}
    finally:
        prometheus.stop()


def raw(central: dict[str, Any], query: PanelQuery) -> list[dict[str, str]]:
    """The label sets a panel's query answers, as Grafana asks it with every variable at All."""
    expr = substitute(query.expr, {})
    if query.instant:
        return [r["metric"] for r in central["prometheus"].query(expr, at=central["end"])]
    answer = central["prometheus"].query_range(expr, central["start"] + 60, central["end"], 60)
    return [r["metric"] for r in answer]


def test_every_panel_of_the_fleets_own_dashboards_shows_its_cards_and_pools(shipped_central: dict[str, Any]) -> None:
    """Derived from the policy: no panel of the fleet's dashboards is empty, but a workload's cost per result where
    the price table prices none of the cards it runs on (a machine the policy chose, which the plan calls "price
    unknown"); each workload's result lists exactly the cards and clusters it runs on (a queued one on every worker
    that may take it), and the pools panel every pool of the fleet."""
    fleet, placed = shipped_central["fleet"], shipped_central["placed"]
    boards = fleet_dashboards(fleet)
    answers = {(q.dashboard, q.panel, q.ref): raw(shipped_central, q) for q in panel_queries(boards)}
    priced = card_prices(fleet, load_prices())
    unpriced = {w for w, *_ in placed} - {w for w, *where in placed if tuple(where) in priced}
    unknown_costs = {f"{w}: cost per result (USD)" for w in unpriced}
    assert [key for key, answer in answers.items() if not answer and key[1] not in unknown_costs] == []
    for name in placed_workloads(fleet):
        unit = fleet.workloads[name].spec.headline.unit
        got = {
            (r["cluster"], r["cloud"], r["gpu"])
            for r in answers[("gpufleet-overview", f"{name}: result per card ({unit})", "A")]
        }
        assert got == {(c, cloud, g) for w, c, cloud, g in placed if w == name}, name
    pools = {(r["cluster"], r["pool"]) for r in answers[("gpufleet-overview", "Pools: busy, idle or at zero", "A")]}
    assert pools == {(c.name, p.name) for c in fleet.clusters.values() for p in c.all_pools}
