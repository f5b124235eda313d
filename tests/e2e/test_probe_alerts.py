"""The central's probe alerts (fleet/model/monitoring/rules/central-probe-alerts.yaml with the per-pool expectations)
under ``promtool test rules``, on federated probe series whose runs and thresholds are known, so every alert's time and
value is computed by hand below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet.model.monitoring.prometheus import PROBE_STALE_RULE, ProbeExpectation, probe_alert_rules
from fleet.model.probes.probe_phases import PHASE_LAST_RECORD, PHASE_RECORD
from tests.e2e.support import alert_annotations, no_alert, promtool, sel, write_yaml

pytestmark = pytest.mark.e2e

T4 = {"cluster": "alpha", "cloud": "gcp", "gpu": "t4"}
L4 = {"cluster": "alpha", "cloud": "gcp", "gpu": "l4"}
A10G = {"cluster": "beta", "cloud": "aws", "gpu": "a10g"}
# Each pool's probe may stay silent 2 h (its schedule's longest gap plus a run), and should get its card in 10 min.
EXPECTED = [ProbeExpectation(**pool, stale_after_seconds=7200, scale_up_alert_seconds=600) for pool in (T4, L4, A10G)]
RULES = probe_alert_rules(EXPECTED)
# What federation brings from a leaf: the PodMonitor's job and the leaf's cluster and cloud, no pod or instance.
JOB = {"job": "benchmarks/gpu-fleet-benchmarks", "namespace": "benchmarks"}


def series(metric: str, pool: dict[str, str], values: str) -> dict[str, str]:
    return {"series": metric + sel({**pool, **JOB}), "values": values}


L4_PHASES = {"node": 600, "device": 200, "containers": 80, "check": 20}
T4_PHASES = {"node": 0, "device": 240, "containers": 50, "check": 10}


def phase(pool: dict[str, str], name: str, seconds: int) -> dict[str, str]:
    """A leaf's phase record of its pool's newest probe pod (fleet/model/probes/probe_phases.py), federated at 10m and
    15m."""
    labels = {**pool, "pool": f"gpu-{pool['gpu']}", "phase": name, "namespace": "benchmarks", "pod": "probe-x-1"}
    return {"series": PHASE_RECORD + sel(labels), "values": f"_x2 {seconds}x1"}


def fired(alertname: str, pool: dict[str, str], severity: str, value: str) -> dict[str, Any]:
    return {
        "exp_labels": {**pool, "severity": severity},
        "exp_annotations": alert_annotations(RULES, alertname, pool, value),
    }


def rule_tests() -> dict[str, Any]:
    """Evaluated every 5 minutes (the week-long case stays fast). t4's probe ran at 10m: its card came after 5 min and
    worked. l4's ran at 10m too: 15 min wait, no working card. a10g's never reported. Each run's samples are federated
    twice (10m and 15m), then the pod is gone."""
    return {
        "rule_files": ["probes.yml"],
        "evaluation_interval": "5m",
        "tests": [
            {
                "name": "failed, slow, silent and never-seen pools, and a week later",
                "interval": "5m",
                "input_series": [
                    series("gpufleet_probe_success", T4, "_x2 1x1"),
                    series("gpufleet_probe_last_run_timestamp_seconds", T4, "_x2 600x1"),
                    series("gpufleet_probe_scaleup_seconds", T4, "_x2 300x1"),
                    series("gpufleet_probe_success", L4, "_x2 0x1"),
                    series("gpufleet_probe_last_run_timestamp_seconds", L4, "_x2 600x1"),
                    series("gpufleet_probe_scaleup_seconds", L4, "_x2 900x1"),
                ],
                "promql_expr_test": [
                    {
                        "expr": PROBE_STALE_RULE,
                        "eval_time": "5m",
                        "exp_samples": [{"labels": PROBE_STALE_RULE + sel(p), "value": 7200} for p in (T4, L4, A10G)],
                    },
                    {
                        # a day after the runs, long after their pods (and their federated series) are gone
                        "expr": "gpufleet:probe_last_run_timestamp_seconds:last",
                        "eval_time": "1d",
                        "exp_samples": [
                            {"labels": "gpufleet:probe_last_run_timestamp_seconds:last" + sel(p), "value": 600}
                            for p in (T4, L4)
                        ],
                    },
                ],
                "alert_rule_test": [
                    no_alert("ProbeFailed", "5m"),  # no run yet
                    {
                        "eval_time": "20m",
                        "alertname": "ProbeFailed",
                        "exp_alerts": [fired("ProbeFailed", L4, "warning", "")],
                    },
                    {
                        "eval_time": "20m",
                        "alertname": "ProbeSlowScaleUp",  # 900 s > 600 s; t4's 300 s is fine
                        "exp_alerts": [fired("ProbeSlowScaleUp", L4, "info", "15m 0s")],
                    },
                    no_alert("ProbeNotRun", "20m"),
                    no_alert("ProbeNotRun", "130m"),  # 7200 s after the run at 600 s: not more than 7200 yet
                    {
                        "eval_time": "150m",  # 9000 - 600 = 8400 s > 7200 s
                        "alertname": "ProbeNotRun",
                        "exp_alerts": [
                            fired("ProbeNotRun", T4, "warning", "2h 20m 0s"),
                            fired("ProbeNotRun", L4, "warning", "2h 20m 0s"),
                        ],
                    },
                    no_alert("ProbeNeverReported", "100m"),  # pending for 2h: a new pool has time to report
                    {
                        "eval_time": "150m",
                        "alertname": "ProbeNeverReported",
                        "exp_alerts": [fired("ProbeNeverReported", A10G, "warning", "")],
                    },
                    # A week and an hour later nothing has aged out: still not run, still failed, still never seen.
                    {
                        "eval_time": "169h",  # 608400 - 600 = 607800 s
                        "alertname": "ProbeNotRun",
                        "exp_alerts": [
                            fired("ProbeNotRun", T4, "warning", "7d 0h 50m 0s"),
                            fired("ProbeNotRun", L4, "warning", "7d 0h 50m 0s"),
                        ],
                    },
                    {
                        "eval_time": "169h",
                        "alertname": "ProbeFailed",
                        "exp_alerts": [fired("ProbeFailed", L4, "warning", "")],
                    },
                    {
                        "eval_time": "169h",
                        "alertname": "ProbeNeverReported",
                        "exp_alerts": [fired("ProbeNeverReported", A10G, "warning", "")],
                    },
                ],
            },
            {
                "name": "a later successful run clears ProbeFailed and ProbeSlowScaleUp",
                "interval": "5m",
                "input_series": [
                    series("gpufleet_probe_success", L4, "_x2 0x1 _x2 1x1"),
                    series("gpufleet_probe_last_run_timestamp_seconds", L4, "_x2 600x1 _x2 1800x1"),
                    series("gpufleet_probe_scaleup_seconds", L4, "_x2 900x1 _x2 120x1"),
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "ProbeFailed",
                        "exp_alerts": [fired("ProbeFailed", L4, "warning", "")],
                    },
                    no_alert("ProbeFailed", "40m"),
                    no_alert("ProbeSlowScaleUp", "40m"),
                    no_alert("ProbeFailed", "2d"),
                ],
            },
            {
                # l4's run at 10m waited 900 s: 600 s for a node, 200 s for the device, 80 s for its containers, then
                # a 20 s check; t4's waited 300 s, under its threshold. The phases come from each leaf's newest probe
                # pod (its pod label), federated at 10m and 15m.
                "name": "the slowest phase of a slow scale-up",
                "interval": "5m",
                "input_series": [
                    series("gpufleet_probe_last_run_timestamp_seconds", L4, "_x2 600x1"),
                    series("gpufleet_probe_scaleup_seconds", L4, "_x2 900x1"),
                    series("gpufleet_probe_last_run_timestamp_seconds", T4, "_x2 600x1"),
                    series("gpufleet_probe_scaleup_seconds", T4, "_x2 300x1"),
                    *(phase(L4, name, seconds) for name, seconds in L4_PHASES.items()),
                    *(phase(T4, name, seconds) for name, seconds in T4_PHASES.items()),
                ],
                "promql_expr_test": [
                    {
                        # a day later, long after the pods are gone: the last run's phases are kept
                        "expr": PHASE_LAST_RECORD,
                        "eval_time": "1d",
                        "exp_samples": [
                            {"labels": PHASE_LAST_RECORD + sel({**pool, "phase": name}), "value": seconds}
                            for pool, phases in ((L4, L4_PHASES), (T4, T4_PHASES))
                            for name, seconds in phases.items()
                        ],
                    },
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "ProbeSlowPhase",
                        "exp_alerts": [fired("ProbeSlowPhase", {**L4, "phase": "node"}, "info", "10m 0s")],
                    },
                    {
                        "eval_time": "1d",
                        "alertname": "ProbeSlowPhase",
                        "exp_alerts": [fired("ProbeSlowPhase", {**L4, "phase": "node"}, "info", "10m 0s")],
                    },
                ],
            },
            {
                "name": "a pool no longer in the policy raises nothing, whatever state it left",
                "interval": "5m",
                "input_series": [
                    series("gpufleet_probe_success", {**T4, "gpu": "k80"}, "_x2 0x1"),
                    series("gpufleet_probe_last_run_timestamp_seconds", {**T4, "gpu": "k80"}, "_x2 600x1"),
                    series("gpufleet_probe_scaleup_seconds", {**T4, "gpu": "k80"}, "_x2 9000x1"),
                ],
                "alert_rule_test": [
                    no_alert("ProbeFailed", "20m"),
                    no_alert("ProbeSlowScaleUp", "20m"),
                    no_alert("ProbeNotRun", "1d"),
                ],
            },
        ],
    }


def test_probe_alerts_pass_promtool_test_rules(tmp_path: Path) -> None:
    write_yaml(tmp_path / "probes.yml", RULES)
    write_yaml(tmp_path / "probes_test.yml", rule_tests())
    checked = promtool("check", "rules", "probes.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    run = promtool("test", "rules", "probes_test.yml", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The harness can fail: promtool refuses the same test when l4's probe is expected to pass."""
    tests = rule_tests()
    tests["tests"][0]["alert_rule_test"][1]["exp_alerts"] = []
    write_yaml(tmp_path / "probes.yml", RULES)
    write_yaml(tmp_path / "probes_test.yml", tests)
    run = promtool("test", "rules", "probes_test.yml", cwd=tmp_path)
    assert run.returncode != 0 and "ProbeFailed" in run.stdout + run.stderr
