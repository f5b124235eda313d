"""The report's opening summary (fleet/report/summary.py) and whole counts, on rows built here: the best card by the
headline, the cost of its result and the cheapest card per result from the price table, the headline accounting, CI
and probe numbers, and counts (runs, CI jobs) rendered as whole numbers wherever Prometheus answers in floats."""

from __future__ import annotations

import re

import pytest

from fleet.model.core.workloads import load_workloads
from fleet.report.accounting import AccountRow
from fleet.report.costs import Machine, approximate, load_prices
from fleet.report.formatting import fmt_count
from fleet.report.html_page import render_html
from fleet.report.markdown import render_markdown
from fleet.report.model import CardRow, Report, WorkloadSection
from fleet.report.probes import ProbeRow, ProbeRun
from fleet.report.queries import Window, runs_counter, workload_queries
from fleet.report.runners import RunnerRow
from fleet.report.summary import summary_facts, summary_rows, workload_summary
from fleet.report.tables import runner_table_rows
from tests.conftest import FIXTURES

WORKLOADS = load_workloads(FIXTURES / "fleet" / "workloads")
WINDOW = Window(0, 3600)


def priced_entries(count: int):
    """The first ``count`` entries of the price table with a spot price (whatever the table holds)."""
    entries = [e for e in load_prices().entries.values() if e.spot is not None]
    assert len(entries) >= count
    return entries[:count]


def section_of(name: str, results: list[float], seconds_per_run: list[float]) -> WorkloadSection:
    """A workload's section with one card per result, each on a priced machine, 10 runs each."""
    wl = WORKLOADS[name]
    section = WorkloadSection(wl, workload_queries(wl.spec, WINDOW), runs_counter(wl.spec))
    for i, (entry, result, seconds) in enumerate(
        zip(priced_entries(len(results)), results, seconds_per_run, strict=True)
    ):
        machine = Machine(entry.cloud, entry.machine_type, entry.accelerator_type, 1, True)
        section.rows.append(
            CardRow(f"c{i}", entry.cloud, f"card{i}", result, pods=1, runs=10.0, observed_seconds=10 * seconds,
                    machine=machine, price=entry)
        )  # fmt: skip
    section.rows.sort(key=lambda r: r.result, reverse=wl.spec.headline.higher_is_better)
    return section


def report_of(sections, **extra) -> Report:
    return Report("http://prometheus:9090", WINDOW, 60.0, 3600.0, sections, load_prices(), 9, **extra)


def test_the_best_card_and_the_cheapest_per_result():
    name = next(iter(WORKLOADS))
    higher = WORKLOADS[name].spec.headline.higher_is_better
    # the best card is slow per run, so another card's results cost less
    section = section_of(name, [100.0, 50.0, 10.0] if higher else [10.0, 50.0, 100.0], [1000.0, 1.0, 500.0])
    s = workload_summary(section)
    assert s.best is section.rows[0] and s.best.result == (100.0 if higher else 10.0)
    costs = {r.gpu: r.price.spot * r.observed_seconds / r.runs / 3600 for r in section.rows}
    assert s.cheapest is not None and s.cheapest.gpu == min(costs, key=costs.get)
    (row,) = summary_rows(report_of([section]))
    assert row[0] == name and row[1] == s.best.gpu and row[3] == f"{s.best.cluster} ({s.best.cloud})"
    assert row[5] == approximate(costs[s.best.gpu], 2)
    assert row[6] == f"{s.cheapest.gpu} @ {s.cheapest.cluster}: {approximate(costs[s.cheapest.gpu], 2)}"


def test_the_summary_opens_the_report_before_the_workloads():
    name = next(iter(WORKLOADS))
    report = report_of([section_of(name, [5.0, 3.0], [2.0, 2.0])])
    text = render_markdown(report, {})
    assert text.index("## Summary") < text.index(f"## {name}")
    assert text.index("## Summary") < text.index("| workload | best card |") < text.index(f"## {name}")
    page = render_html(report, {})
    assert page.index('<h2 id="summary">Summary</h2>') < page.index(f'<h2 id="{name}">')


def test_a_workload_without_data_or_price_says_so():
    names = list(WORKLOADS)
    empty = WorkloadSection(WORKLOADS[names[0]], workload_queries(WORKLOADS[names[0]].spec, WINDOW), None)
    unpriced = section_of(names[1], [5.0], [2.0])
    unpriced.rows[0].price = None
    report = report_of([empty, unpriced])
    (row,) = summary_rows(report)
    assert row[0] == names[1] and row[5] == "no price" and row[6] == "no card has a price"
    assert f"No data in the window for: {names[0]}." in summary_facts(report)


def test_headline_accounting_ci_and_probe_numbers_are_the_tables_added_up():
    prices = load_prices()
    entry = priced_entries(1)[0]
    accounting = [
        AccountRow("lab-a", "c0", entry.cloud, "card0", "gpu-card0", 10.0, 7.5, 2.5, 0.5, entry.machine_type, 1,
                   True, entry),
        AccountRow("lab-b", "c0", entry.cloud, "card0", "gpu-card0", 0.0, 2.0, 0.0, 0.0, entry.machine_type, 1,
                   True, entry),
    ]  # fmt: skip
    runners = [RunnerRow("c0", "aws", "card0", 4.07, 0.96, 30.0), RunnerRow("c1", "gcp", "card1", 2.4, None, 12.0)]
    probes = [
        ProbeRow("c0", "aws", "card0", [ProbeRun(0, True, 30.0), ProbeRun(1, False, 90.0), ProbeRun(2, True, 60.0)])
    ]
    facts = summary_facts(report_of([], accounting=accounting, runners=runners, probes=probes))
    cost = (7.5 + 2.5 + 2.0) * entry.spot
    assert (
        f"GPU accounting: {approximate(10.0, 3)} card-hours billed to 2 account(s), {approximate(9.5, 3)} used, "
        f"{approximate(2.5, 3)} idle (25 %), 0.50 lost to preemption; cost {approximate(cost, 2)} {prices.currency}."
    ) in facts
    assert "CI: 6 job(s) on 2 card(s), 1 failed." in facts  # 4.07 + 2.4 jobs extrapolated by increase(): 4 + 2
    assert (
        "Probes: 3 run(s) on 1 pool(s), 2 found their accelerator, median time to first accelerator 60 s "
        "(worst 90 s)." in facts
    )


@pytest.mark.parametrize(("value", "shown"), [(4.0, "4"), (4.07, "4"), (2.6, "3"), (12345.4, "12,345"), (None, "—")])
def test_counts_are_whole_numbers(value, shown):
    assert fmt_count(value) == shown


def test_ci_job_counts_are_whole_in_the_table():
    (row,) = runner_table_rows([RunnerRow("c0", "aws", "card0", 4.07, 0.96, 30.0)])
    assert row[3:5] == ["4", "1"]


HOSTILE = "t4](https://evil.example) <img src=x onerror=alert(1)> **x** `y` |z"


def test_label_values_write_no_markdown_or_html_into_report_md():
    """A hostile Prometheus's label values (card, cluster) are text in report.md: no link, image, tag, emphasis, code
    or extra table cell (index.html escapes them too)."""
    name = next(iter(WORKLOADS))
    section = section_of(name, [5.0, 3.0], [2.0, 2.0])
    section.rows[0].gpu = HOSTILE
    section.rows[1].cluster = HOSTILE
    section.rows[1].gpu_utilization = None  # its card and cluster go into a note too
    text = render_markdown(report_of([section]), {})
    # unescaped, they would be a link or emphasis (a backtick may still make a code span in a note: literal text)
    for raw in (r"\]\(https://evil", r"\*\*x"):
        assert not re.search(r"(?<!\\)" + raw, text), raw
    assert "<img" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\\](https://evil.example)" in text
    # every table row still has as many cells as its header
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("| ")]
        widths = {len(re.split(r"(?<!\\) \| ", line)) for line in lines}
        assert len(widths) <= 1, block
    page = render_html(report_of([section]), {})
    assert "<img src=x" not in page
