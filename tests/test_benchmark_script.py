"""Smoke test of benchmarks/plan_speed.py at a tiny size: it generates, plans, replays the floor and reports.

Not a timed test: it checks the shape of the report, never how fast anything was.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks import plan_floor, plan_render, plan_speed, preview_speed, synthetic_fleet
from fleet.model.loader import load_fleet


def test_generated_fleet_is_a_valid_policy(tmp_path: Path) -> None:
    synthetic = synthetic_fleet.generate_fleet(tmp_path / "fleet", clusters=3, cards=2, workloads=2)
    fleet = load_fleet(synthetic.policy_file, synthetic.workloads_dir)
    assert list(fleet.clusters) == list(synthetic.clusters)
    assert synthetic.clouds == ("gcp",)
    assert sum(c.central for c in fleet.clusters.values()) == 1
    assert all(c.cloud == "gcp" and [p.card for p in c.pools] == list(synthetic.cards) for c in fleet.clusters.values())
    assert set(fleet.placements) == set(synthetic.workloads)
    for name in synthetic.clusters:
        assert (synthetic.stacks_dir / f"Pulumi.{name}.yaml").is_file()


def test_floor_replays_the_same_urns(tmp_path: Path) -> None:
    synthetic = synthetic_fleet.generate_fleet(tmp_path / "fleet", clusters=2, cards=1, workloads=1)
    fleet, _ = plan_speed.load_policy(synthetic)
    plans, wall = plan_speed.run_plan(synthetic, fleet)
    assert wall > 0 and [p.stack for p in plans]
    seconds, floor_wall = plan_floor.run_floor(plans)  # raises if the bare replay registers other URNs
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
    text = plan_render.render(report)
    assert "Ratio plan/floor" in text and "gcp-bench-0001" in text


MIXED = ("gcp", "aws", "azure", "openstack", "existing")


def test_mixed_fleet_cycles_clusters_over_clouds(tmp_path: Path) -> None:
    synthetic = synthetic_fleet.generate_fleet(tmp_path / "fleet", clusters=6, cards=2, workloads=1, clouds=MIXED)
    fleet = load_fleet(synthetic.policy_file, synthetic.workloads_dir)
    assert set(fleet.clusters) == set(synthetic.clusters)
    clouds = [fleet.clusters[name].cloud for name in synthetic.clusters]
    assert clouds == [*MIXED, MIXED[0]]
    assert fleet.central.name == synthetic.clusters[0]
    for cluster in fleet.clusters.values():
        assert [p.card for p in cluster.pools] == list(synthetic.cards_by_cloud[cluster.cloud])
        assert all(
            card in synthetic_fleet.cloud_cards(cluster.cloud) for card in synthetic.cards_by_cloud[cluster.cloud]
        )


def test_mixed_fleet_plans_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One cluster per cloud, planned through the real code path and replayed bare: every cloud's stack settings are
    complete enough for the plan, and the floor reaches the engine with the same URNs."""
    report = plan_speed.run_benchmark(
        clusters=len(MIXED), cards=1, workloads=1, sizes=[len(MIXED)], repeat=1, memory=False, clouds=MIXED
    )
    json.dumps(report)
    assert report["parameters"]["clouds"] == list(MIXED)
    full = report["sizes"][-1]
    assert full["stacks"] == len(MIXED)
    assert all(row["resources"] > 0 and row["floor_seconds"] > 0 for row in full["per_stack"])
    text = plan_render.render(report)
    assert "cycling over gcp, aws, azure, openstack, existing" in text
    assert all(f"{prefix}-bench-" in text for prefix in synthetic_fleet.CLOUD_NAMES)
    assert "Per cloud at full size" in text
    assert {synthetic_fleet.stack_cloud(row["stack"]) for row in full["per_stack"]} == set(MIXED)
    saved = tmp_path / "mixed.json"
    saved.write_text(json.dumps(report), encoding="utf-8")
    assert plan_speed.main(["--render", str(saved)]) == 0
    assert "Per cloud at full size" in capsys.readouterr().out


def test_clouds_option_refuses_an_unknown_cloud() -> None:
    with pytest.raises(SystemExit):
        plan_speed.build_parser().parse_args(["--clouds", "gcp,ibm"])
    assert plan_speed.build_parser().parse_args(["--clouds", "aws,azure"]).clouds == ["aws", "azure"]


def test_the_shipped_fleet_is_measured_against_its_own_floor() -> None:
    """``--shipped``: the shipped fleet planned and replayed bare (the floor's URNs checked), its row in the tables."""
    ours = plan_speed.shipped_fleet()
    result = plan_speed.measure_fleet(ours, len(ours.cards), len(ours.workloads), repeat=1, memory=False)
    assert result.stacks == len(ours.clusters) and result.resources > 100
    report = {"shipped": asdict(result)}
    assert f"Shipped fleet (policy/fleet.yaml): {result.stacks} stacks" in plan_render.shipped_lines(report)[1]


def test_the_preview_tables_hold_every_stack() -> None:
    """benchmarks/preview_speed.py's tables from a report of its shape (the real run needs the real tier)."""
    timing = {"seconds": 9.0, "until_prelude": 2.0, "program": 3.0, "resource_steps": 3.0, "end": 1.0, "resources": 7}
    stack = {"stack": "s1", "cloud": "gcp", "resources": 10, "plan_seconds": 0.5, "plan_process_seconds": 4.0}
    warm = [timing, {**timing, "seconds": 8.0}]
    report = {"stacks": [{**stack, "cold": timing, "warm": warm, "warm_without_pack": {**timing, "seconds": 6.0}}]}
    report["stacks"][0]["up_seconds"] = 20.0
    text = preview_speed.render(report)
    assert "| s1 | gcp | 10 / 7 | 0.50 | 4.0 | 9.0 | 8.0 | 2.0 | 6.0 | 20.0 |" in text
    assert "| s1 | 2.0 / 2.0 | 3.0 / 3.0 | 3.0 / 3.0 | 1.0 / 1.0 |" in text
