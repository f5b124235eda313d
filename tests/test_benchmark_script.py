"""Smoke test of benchmarks/plan_speed.py at a tiny size: it generates, plans, replays the floor and reports.

Not a timed test: it checks the shape of the report, never how fast anything was.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import plan_speed
from fleet.model.loader import load_fleet


def test_generated_fleet_is_a_valid_policy(tmp_path: Path) -> None:
    synthetic = plan_speed.generate_fleet(tmp_path / "fleet", clusters=3, cards=2, workloads=2)
    fleet = load_fleet(synthetic.policy_file, synthetic.workloads_dir)
    assert list(fleet.clusters) == list(synthetic.clusters)
    assert sum(c.central for c in fleet.clusters.values()) == 1
    assert all(c.cloud == "gcp" and [p.card for p in c.pools] == list(synthetic.cards) for c in fleet.clusters.values())
    assert set(fleet.placements) == set(synthetic.workloads)
    for name in synthetic.clusters:
        assert (synthetic.stacks_dir / f"Pulumi.{name}.yaml").is_file()


def test_floor_replays_the_same_urns(tmp_path: Path) -> None:
    synthetic = plan_speed.generate_fleet(tmp_path / "fleet", clusters=2, cards=1, workloads=1)
    fleet, _ = plan_speed.load_policy(synthetic)
    plans, wall = plan_speed.run_plan(synthetic, fleet)
    assert wall > 0 and [p.stack for p in plans]
    seconds, floor_wall = plan_speed.run_floor(plans)  # raises if the bare replay registers other URNs
    assert len(seconds) == len(plans) and all(s > 0 for s in seconds) and floor_wall > 0


def test_report_structure(tmp_path: Path) -> None:
    report = plan_speed.run_benchmark(clusters=2, cards=2, workloads=1, sizes=[1, 2], repeat=1, memory=True)
    json.dumps(report)  # the --json form is plain data
    ratio = report["ratio"]["full_size"]
    assert isinstance(ratio, float) and ratio > 0
    assert report["ratio"]["full_size_tuned"] > 0 and report["ratio"]["all_sizes_tuned"] > 0
    assert [s["clusters"] for s in report["sizes"]] == [1, 2]
    full = report["sizes"][-1]
    assert full["stacks"] == 2 and full["resources"] > 0
    rows = full["per_stack"]
    assert len(rows) == 2
    for row in rows:
        assert row["resources"] > 0 and row["plan_seconds"] > 0 and row["floor_seconds"] > 0
        assert row["ratio"] > 0 and row["py_peak_bytes"] > 0 and row["maxrss_kib"] > 0
    assert full["memory"]["tracemalloc_peak_bytes"] > 0 and full["memory"]["maxrss_kib"] > 0
    assert "exponent" in report["linearity"]["plan"]
    text = plan_speed.render(report)
    assert "Ratio plan/floor" in text and "gke-bench-0001" in text
