"""The report's sweeps section (fleet/report/sweeps.py) against a real Prometheus fed by real mtail processes.

The sweep workload's sample log (a real multi-worker run: workloads/3dgan-jax/record_sample.py) is what every
sweep job's workers print; the test splits it by card as a federated central would hold it: an L4 on GKE ran every
point of the log, a TPU v5e only the points that are whole TPU VMs. One mtail per (card) with the workload's own
program tails a log the test appends to, and Prometheus scrapes both with the labels the PodMonitor adds. The
expected time per epoch, speed-ups, efficiencies, restarts and costs are computed here from the log's lines, not
from Prometheus, and must appear in report.md digit for digit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.model.loader import load_fleet
from fleet.report.costs import approximate, load_prices
from fleet.report.formatting import fmt
from tests.conftest import FIXTURES, ROOT, require_tool
from tests.e2e.processes import PATIENCE_S, Mtail, Prometheus, patience, wait_for
from tests.e2e.support import markdown_tables, png_size

pytestmark = pytest.mark.e2e

# The tests' own sweep workload (tests/fixtures/fleet/workloads/sweeper: workloads/3dgan-jax under its own name, with
# that real multi-worker sample log), so the test runs whatever workloads a team ships.
WORKLOADS = FIXTURES / "fleet" / "workloads"
SWEEP = load_workloads(WORKLOADS)["sweeper"]
EPOCH = re.compile(
    r" epoch=\d+ seconds=(?P<seconds>[0-9.]+) .* "
    r"accelerators=(?P<n>\d+) worker=(?P<worker>\d+) attempt=(?P<attempt>\d+)$"
)
POLICY = """\
clusters:
  gcp:
    loop-gke:
      zone: us-central1-a
      central: true
      gpus: [l4, tpu-v5e]
workloads:
  {name}:
    gpus: [l4, tpu-v5e]
    scale: {scale}
"""


def epoch_lines() -> list[tuple[str, int, str, str, float]]:
    """(line, accelerators, worker, attempt, seconds) of every timed epoch in the sample log."""
    out = []
    for line in SWEEP.sample_log.read_text(encoding="utf-8").splitlines(keepends=True):
        found = EPOCH.search(line.rstrip("\n"))
        if found:
            out.append((line, int(found["n"]), found["worker"], found["attempt"], float(found["seconds"])))
    return out


def expected_points(counts: set[int]) -> dict[int, tuple[float, int, int]]:
    """accelerators -> (seconds per epoch of the slowest worker, epochs, highest attempt), from the log alone."""
    workers: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))
    attempts: dict[int, int] = defaultdict(int)
    for _, n, worker, attempt, seconds in epoch_lines():
        if n in counts:
            workers[n][worker][0] += seconds
            workers[n][worker][1] += 1
            attempts[n] = max(attempts[n], int(attempt))
    return {
        n: (*max((s / e, e) for s, e in by_worker.values()), attempts[n])  # type: ignore[misc]
        for n, by_worker in workers.items()
    }


@pytest.fixture(scope="module")
def scaling_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mtail_exe, prometheus_exe = require_tool("mtail"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("scaling")
    counts = sorted({n for _, n, *_ in epoch_lines()})
    assert len(counts) >= 3, "the sample log must hold at least three accelerator counts"
    catalogue_tpu = {1, 4, 8}  # the catalogue's whole TPU v5e VMs (ct5lp-hightpu-1t/-4t/-8t)
    cards = {"l4": set(counts), "tpu-v5e": set(counts) & catalogue_tpu}
    assert len(cards["tpu-v5e"]) >= 2, counts
    policy = tmp / "fleet.yaml"
    policy.write_text(POLICY.format(name=SWEEP.name, scale=counts), encoding="utf-8")
    running: list[Any] = []
    deadline = patience()
    try:
        mtails, feeds = {}, {}
        for card in cards:
            log = tmp / f"{card}.log"
            log.touch()
            mtails[card] = Mtail(mtail_exe, SWEEP.folder / "mtail", log, tmp / f"mtail-{card}.out")
            running.append(mtails[card])
            feeds[log] = [line for line, n, *_ in epoch_lines() if n in cards[card]]
        jobs = [
            {
                "targets": [m.address],
                "labels": {
                    "workload": SWEEP.name, "gpu": card, "cluster": "loop-gke", "cloud": "gcp",
                    "namespace": "benchmarks", "pod": f"{SWEEP.name}-{card}-node-0-0-x1y2z",
                },
            }
            for card, m in mtails.items()
        ]  # fmt: skip
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
            "scrape_configs": [{"job_name": "benchmarks", "static_configs": jobs}],
        }
        prometheus = Prometheus(prometheus_exe, tmp / "prometheus", config)
        running.append(prometheus)
        wait_for("mtail to serve /metrics", lambda: all(m.serving() for m in mtails.values()), deadline, running)
        wait_for("prometheus to be ready", prometheus.ready, deadline, running)
        wait_for("both targets scraped", lambda: len(prometheus.query("up == 1")) == 2, deadline, running)
        for log, lines in feeds.items():
            with log.open("a", encoding="utf-8") as handle:
                handle.writelines(lines)
        epochs = SWEEP.spec.distributed.epochs  # type: ignore[union-attr]
        total = sum(len(lines) for lines in feeds.values())

        def all_in() -> bool:
            got = prometheus.query(f'sum({epochs}{{workload="{SWEEP.name}"}})')
            return bool(got) and float(got[0]["value"][1]) == total

        wait_for("Prometheus to hold every epoch", all_in, deadline, running)
        out = tmp / "out"
        run = subprocess.run(
            [
                sys.executable, "-m", "fleet", "report", "--prometheus", prometheus.url, "--since", "5m",
                "--out", str(out), "--workload", SWEEP.name, "--policy", str(policy), "--workloads-dir", str(WORKLOADS),
            ],
            capture_output=True, text=True, timeout=PATIENCE_S, cwd=ROOT,
        )  # fmt: skip
        return {"run": run, "out": out, "cards": cards, "policy": policy}
    finally:
        for proc in reversed(running):
            proc.stop()


def test_scaling_table_has_exact_times_speedups_restarts_and_costs(scaling_report: dict[str, Any]) -> None:
    run, out = scaling_report["run"], scaling_report["out"]
    assert run.returncode == 0, run.stderr
    tables = markdown_tables((out / "report.md").read_text(encoding="utf-8"))
    rows = tables[f"Sweep: {SWEEP.name}"]
    fleet = load_fleet(scaling_report["policy"], WORKLOADS)
    cluster = fleet.clusters["loop-gke"]
    placed = {(p.card, p.accelerators): p for p in fleet.sweep_points(cluster)}
    prices = load_prices()
    seen = set()
    for card, counts in scaling_report["cards"].items():
        expected = expected_points(counts)
        base_n = min(expected)
        base_pace = expected[base_n][0]
        for n, (pace, epochs, restarts) in expected.items():
            row = next(r for r in rows if r["card"] == card and r["accelerators"] == str(n))
            seen.add((card, n))
            assert row["time / epoch (s)"] == fmt(pace, 4)
            assert row["epochs"] == str(epochs)
            assert row["speed-up"] == fmt(base_pace / pace, 3)
            assert row["efficiency (%)"] == fmt(100 * (base_pace / pace) * base_n / n, 3)
            assert row["restarts"] == str(restarts)
            point = placed[(card, n)]
            assert row["nodes"] == str(point.nodes)
            accelerator = point.pool.offer.accelerator_type if point.pool.offer else ""
            price = prices.lookup("gcp", point.pool.machine_type, accelerator)
            assert price is not None and price.spot is not None, point.pool.machine_type
            assert row["cost / epoch (USD, approx.)"] == approximate(pace / 3600 * price.spot * point.nodes, 2)
    assert seen == {(r["card"], int(r["accelerators"])) for r in rows}
    # the restarted point of the sample shows its restart
    assert any(r["restarts"] != "0" for r in rows)


def test_scaling_plot_and_page(scaling_report: dict[str, Any]) -> None:
    out = scaling_report["out"]
    png = out / f"{SWEEP.name}-sweep.png"
    assert png_size(png.read_bytes()) == (1000, 500)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert f'id="sweep-{SWEEP.name}"' in page and "data:image/png;base64," in page
    assert "Sweeps: for each sweep job" in page  # the method says how the numbers are made
    # the sweeping workload has no per-card section of its own
    assert f'<h2 id="{SWEEP.name}">' not in page


def main(argv: list[str]) -> int:
    """Print the expected points of the sample log (a check of the split by hand)."""
    del argv
    for n, values in sorted(expected_points({n for _, n, *_ in epoch_lines()}).items()):
        print(n, values)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
