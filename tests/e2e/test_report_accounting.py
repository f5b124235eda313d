"""The report's GPU accounting table against a real Prometheus holding synthetic, federated accounting records whose
totals are known (fleet/report/accounting.py).

The records are written here for one hour at the federation interval (60 s) and loaded with ``promtool tsdb
create-blocks-from openmetrics`` into the Prometheus the report reads, so every sample's time is exact. The cluster
(its own policy text) bills ``physics``; a T4 pool time-sliced in two and an L4 pool; the workload ``fitter`` is
billed to ``theory``. Minute k of the hour (k = 1..60 are the points the integral takes):

* T4: 1 card billed all hour; tracker uses 1/2 all hour; fitter (theory) 1/2 from minute 31: idle 1/2 until 30;
* L4: 2 cards billed until minute 30, none after; tracker uses 1 until 30: idle 1 until 30;
* pod p3 (tracker, L4) uses 1 card until minute 20 and is lost with its node from minute 21.

Card-hours by hand: T4 physics billed 1, used 1/2, idle 1/4; T4 theory used 1/4; L4 physics billed 1, used 1/2,
idle 1/2, lost 1/3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from fleet.model.billing.accounting import BILLED, IDLE, POD_USED, PREEMPTED, USED, accounting_rules
from fleet.model.loader import load_fleet
from fleet.report import accounting, queries
from fleet.report.costs import approximate, load_prices
from fleet.report.formatting import fmt
from fleet.report.queries import Window
from tests.conftest import FIXTURES, ROOT, require_tool
from tests.e2e.processes import PATIENCE_S, Prometheus, http_get, patience, wait_for
from tests.e2e.support import ACCOUNTING_POLICY, blocks_from_openmetrics, markdown_tables, write_yaml

pytestmark = pytest.mark.e2e

POLICY = ACCOUNTING_POLICY
CLUSTER = {"cluster": "acct-gke", "cloud": "gcp"}
STEP = 60
POINTS = range(0, 61)  # minute 0 to 60 of the hour


def labels(**extra: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted({**CLUSTER, **extra}.items()))


def pool(gpu: str, account: str = "physics") -> dict[str, str]:
    return {"gpu": gpu, "pool": f"gpu-{gpu}", "billing_account": account}


# record -> [(labels, value at minute k)]
RECORDS: dict[str, list[tuple[dict[str, str], Any]]] = {
    "gpufleet:billed_cards": [(pool("t4"), lambda k: 1), (pool("l4"), lambda k: 2 if k <= 30 else 0)],
    "gpufleet:used_cards": [
        ({**pool("t4"), "workload": "tracker"}, lambda k: 0.5),
        ({**pool("t4", "theory"), "workload": "fitter"}, lambda k: 0.5 if k > 30 else 0),
        ({**pool("l4"), "workload": "tracker"}, lambda k: 1 if k <= 30 else 0),
    ],
    "gpufleet:idle_cards": [(pool("t4"), lambda k: 0.5 if k <= 30 else 0), (pool("l4"), lambda k: 1 if k <= 30 else 0)],
    "gpufleet:pod_used_cards": [
        ({**pool("t4"), "workload": "tracker", "namespace": "benchmarks", "pod": "p1"}, lambda k: 0.5),
        ({**pool("l4"), "workload": "tracker", "namespace": "benchmarks", "pod": "p3"}, lambda k: 1 if k <= 20 else 0),
    ],
    "gpufleet:pod_preempted": [({"namespace": "benchmarks", "pod": "p3"}, lambda k: 1 if k > 20 else 0)],
}
# (account, card) -> billed, used, idle, lost card-hours, by hand (see the module's docstring)
EXPECTED = {
    ("physics", "t4"): (1.0, 0.5, 0.25, 0.0),
    ("theory", "t4"): (0.0, 0.25, 0.0, 0.0),
    ("physics", "l4"): (1.0, 0.5, 0.5, 1 / 3),
}


def report_hour(url: str, start: int, policy: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``python -m fleet report`` over the hour from ``start``, on the fixture workloads (the tracker only)."""
    return subprocess.run(
        [
            sys.executable, "-m", "fleet", "report", "--prometheus", url, "--start", str(start),
            "--end", str(start + 3600), "--out", str(out), "--workload", "tracker", "--policy", str(policy),
            "--workloads-dir", str(FIXTURES / "fleet" / "workloads"),
        ],
        capture_output=True, text=True, timeout=PATIENCE_S, cwd=ROOT,
    )  # fmt: skip


def report_from_data(prometheus_exe: str, tmp: Path, start: int, policy: Path) -> dict[str, Any]:
    """Start Prometheus on the blocks loaded under ``tmp/prometheus/data``, report the hour, stop it."""
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", {"global": {"scrape_interval": "15s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        out = tmp / "out"
        return {"run": report_hour(prometheus.url, start, policy, out), "out": out}
    finally:
        prometheus.stop()


def openmetrics(start: int) -> str:
    lines = []
    for name, series in RECORDS.items():
        lines.append(f"# TYPE {name} gauge")
        for extra, value in series:
            lines += [f"{name}{{{labels(**extra)}}} {value(k)} {start + k * STEP}" for k in POINTS]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def accounting_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("accounting")
    start = (int(time.time()) // 3600 - 4) * 3600  # an hour, whole, four hours ago: only the loaded blocks hold it
    blocks_from_openmetrics(promtool, openmetrics(start), tmp)
    policy = tmp / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return {**report_from_data(prometheus_exe, tmp, start, policy), "policy": policy, "tmp": tmp, "start": start}


def test_lost_card_hours_are_the_same_a_chunk_at_a_time(
    accounting_report: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lost pod's card-hours over the hour, with the window cut into 10-minute subqueries (``LOST_CHUNK``: what
    keeps a 180-day window within the central's memory) added up per series, are the whole hour's: 1/3 card-hour."""
    start = accounting_report["start"]
    prometheus = Prometheus(
        require_tool("prometheus"), accounting_report["tmp"] / "prometheus", {"global": {"scrape_interval": "15s"}}
    )
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])

        def ask(promql: str) -> list[dict[str, Any]]:
            query = urllib.parse.urlencode({"query": promql, "time": start + 3600})
            status, body = http_get(f"{prometheus.url}/api/v1/query?{query}")
            assert status == 200, body
            return json.loads(body)["data"]["result"]

        window = Window(start, start + 3600)
        pods = ask(accounting.accounting_queries(window, STEP)["lost_pods"])
        whole = accounting.lost_query(window, STEP, pods)
        monkeypatch.setattr(accounting, "LOST_CHUNK", 600)
        chunked = accounting.lost_query(window, STEP, pods)
        assert whole is not None and chunked is not None and chunked.count(" @ ") == 6 and " @ " not in whole
        got = {way: {json.dumps(r["metric"], sort_keys=True): r["value"][1] for r in ask(q)}
               for way, q in (("whole", whole), ("chunked", chunked))}  # fmt: skip
        assert got["chunked"] == got["whole"] and [float(v) for v in got["whole"].values()] == [pytest.approx(1 / 3)]
    finally:
        prometheus.stop()


def test_each_pods_first_and_last_sample_are_the_same_a_chunk_at_a_time(
    accounting_report: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report reads raw samples (each pod's first and last, for its running time) a part of the window at a time
    (``SAMPLES_CHUNK``: one answer per 14 days keeps 180 days of 200 clusters under the client's 64 MiB): cut into
    10-minute chunks, the hour's pods start and end where the whole hour's samples say, whatever pod straddles a cut."""
    start = accounting_report["start"]
    prometheus = Prometheus(
        require_tool("prometheus"), accounting_report["tmp"] / "prometheus", {"global": {"scrape_interval": "15s"}}
    )
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])

        def spans(promqls: list[str]) -> tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], float]]:
            series = []
            for promql in promqls:
                query = urllib.parse.urlencode({"query": promql, "time": start + 3600})
                status, body = http_get(f"{prometheus.url}/api/v1/query?{query}")
                assert status == 200, body
                series += json.loads(body)["data"]["result"]
            return queries.pod_spans(series)

        window = Window(start, start + 3600)
        whole = f"{POD_USED}[3600s]"
        assert queries.sample_chunks(whole, window) == [whole]
        monkeypatch.setattr(queries, "SAMPLES_CHUNK", 600)
        chunked = queries.sample_chunks(whole, window)
        assert len(chunked) == 6 and all(" @ " in q for q in chunked)
        first, last = spans([whole])
        assert first and spans(chunked) == (first, last)
        assert any(last[pod] - first[pod] > 600 for pod in first)  # a pod that straddles the cuts
    finally:
        prometheus.stop()


def test_accounting_table_holds_the_known_card_hours_and_costs(accounting_report: dict[str, Any]) -> None:
    run, out = accounting_report["run"], accounting_report["out"]
    assert run.returncode == 0, run.stderr
    rows = markdown_tables((out / "report.md").read_text(encoding="utf-8"))["GPU accounting per billing account"]
    fleet = load_fleet(accounting_report["policy"], FIXTURES / "fleet" / "workloads")
    prices = load_prices()
    got = {(r["billing account"], r["card (pool)"].split(" ")[0]): r for r in rows}
    assert set(got) == set(EXPECTED)
    for (account, card), (billed, used, idle, lost) in EXPECTED.items():
        row = got[(account, card)]
        assert row["cluster"] == "acct-gke" and row["card (pool)"] == f"{card} (gpu-{card})"
        assert row["billed (card-h)"] == fmt(billed, 4)
        assert row["used (card-h)"] == fmt(used, 4)
        assert row["idle (card-h)"] == fmt(idle, 4)
        assert row["idle (%)"] == (fmt(100 * idle / billed, 3) if billed else "—")
        assert row["lost to preemption (card-h)"] == fmt(lost, 4)
        pool = fleet.clusters["acct-gke"].pool(card)
        price = prices.lookup("gcp", pool.machine_type, pool.offer.accelerator_type)  # type: ignore[union-attr]
        assert price is not None and price.spot is not None
        assert row["cost (USD, approx.)"] == approximate((used + idle) * price.spot / pool.accelerators_per_node, 2)


# --- the whole chain: kube-state-metrics series -> the accounting rules -> the report -------------------------------
# Both nodes up all hour; p1 (tracker) runs on the T4 all hour, p2 (fitter, theory) from minute 30, p3 (tracker) on the
# L4 for minutes 0 to 19 and is then done. promtool's rule backfill stamps each evaluation one
# interval late (seen: a pod starting at minute 30 shows in the records at 31), so the hour's 60 points (minutes 1 to
# 60) hold the series of minutes 0 to 59. By hand: T4 physics billed 1, used 1/2, idle 1/4 (minutes 0-29); T4 theory
# used 1/4 (30-59); L4 physics billed 1, used 1/3 (0-19), idle 2/3. (Preemption is told by a node disappearing,
# which blocks without staleness markers cannot show: test_accounting_rules.py checks it.)
RAW_EXPECTED = {
    ("physics", "t4"): (1.0, 0.5, 0.25, 0.0),
    ("theory", "t4"): (0.0, 0.25, 0.0, 0.0),
    ("physics", "l4"): (1.0, 1 / 3, 2 / 3, 0.0),
}


def ksm_series() -> dict[str, list[tuple[dict[str, str], Any]]]:
    """The kube-state-metrics series of the hour (no cluster label: the leaf's own scrape)."""

    def pod(name: str, node: str, workload: str, running: Any) -> dict[str, list[tuple[dict[str, str], Any]]]:
        where = {"namespace": "benchmarks", "pod": name}
        request = {**where, "container": "workload", "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
        return {
            "kube_pod_container_resource_requests": [(request, lambda k: 1)],
            "kube_pod_status_phase": [({**where, "phase": "Running"}, running)],
            "kube_pod_labels": [({**where, "label_workload": workload}, lambda k: 1)],
            "kube_pod_info": [({**where, "node": node}, lambda k: 1)],
        }

    out: dict[str, list[tuple[dict[str, str], Any]]] = {
        "kube_node_labels": [
            ({"node": "n1", "label_gpu": "t4"}, lambda k: 1),
            ({"node": "n2", "label_gpu": "l4"}, lambda k: 1),
        ],
        "kube_node_status_capacity": [  # the T4 in two slices advertises 2
            ({"node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"}, lambda k: 2),
            ({"node": "n2", "resource": "nvidia_com_gpu", "unit": "integer"}, lambda k: 1),
        ],
    }
    for part in (
        pod("p1", "n1", "tracker", lambda k: 1),
        pod("p2", "n1", "fitter", lambda k: 1 if k >= 30 else 0),
        pod("p3", "n2", "tracker", lambda k: 1 if k < 20 else 0),
    ):
        for name, series in part.items():
            out.setdefault(name, []).extend(series)
    return out


def metrics_text(records: dict[str, list[tuple[dict[str, str], Any]]], start: int) -> str:
    lines = []
    for name, series in records.items():
        lines.append(f"# TYPE {name} gauge")
        for extra, value in series:
            inner = ",".join(f'{k}="{v}"' for k, v in sorted(extra.items()))
            lines += [f"{name}{{{inner}}} {value(k)} {start + k * STEP}" for k in POINTS]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def chain_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Load the series, backfill the accounting rules over them with promtool against a real Prometheus, load the
    rules' blocks, then report."""
    promtool, prometheus_exe = require_tool("promtool"), require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("accounting-chain")
    start = (int(time.time()) // 3600 - 4) * 3600
    policy = tmp / "fleet.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    fleet = load_fleet(policy, FIXTURES / "fleet" / "workloads")
    rules = accounting_rules(fleet.clusters["acct-gke"], fleet)["groups"][0]["rules"]
    assert {r["record"] for r in rules} == {POD_USED, USED, BILLED, IDLE, PREEMPTED}  # none reads another: one pass
    source = tmp / "ksm.om"
    source.write_text(metrics_text(ksm_series(), start), encoding="utf-8")
    data = tmp / "prometheus" / "data"
    data.mkdir(parents=True)

    def run(*args: str) -> None:
        done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=PATIENCE_S)
        assert done.returncode == 0, done.stdout + done.stderr

    run("tsdb", "create-blocks-from", "openmetrics", str(source), str(data))
    prometheus = Prometheus(prometheus_exe, tmp / "prometheus", {"global": {"scrape_interval": "15s"}})
    try:
        wait_for("prometheus to be ready", prometheus.ready, patience(), [prometheus])
        rule_file = write_yaml(tmp / "accounting.yaml", {"groups": [{"name": "accounting", "rules": rules}]})
        blocks = tmp / "blocks"
        run(
            "tsdb", "create-blocks-from", "rules", "--url", prometheus.url, "--start", str(start),
            "--end", str(start + 3600), "--eval-interval", f"{STEP}s", "--output-dir", str(blocks), str(rule_file),
        )  # fmt: skip
    finally:
        prometheus.stop()
    for block in (b for b in blocks.iterdir() if b.is_dir()):
        shutil.move(str(block), data / block.name)
    return report_from_data(prometheus_exe, tmp, start, policy)


def test_the_chain_from_kube_state_metrics_gives_the_hand_computed_card_hours(chain_report: dict[str, Any]) -> None:
    run, out = chain_report["run"], chain_report["out"]
    assert run.returncode == 0, run.stderr
    rows = markdown_tables((out / "report.md").read_text(encoding="utf-8"))["GPU accounting per billing account"]
    got = {(r["billing account"], r["card (pool)"].split(" ")[0]): r for r in rows}
    assert set(got) == set(RAW_EXPECTED)
    for key, (billed, used, idle, lost) in RAW_EXPECTED.items():
        row = got[key]
        assert (row["billed (card-h)"], row["used (card-h)"]) == (fmt(billed, 4), fmt(used, 4)), key
        assert (row["idle (card-h)"], row["lost to preemption (card-h)"]) == (fmt(idle, 4), fmt(lost, 4)), key
