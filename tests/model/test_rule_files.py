"""fleet/model/monitoring/rule_files.py and the rule files in fleet/model/monitoring/rules/: placeholders filled
exactly, files and code in agreement."""

from __future__ import annotations

import pytest

from fleet.model.core.workloads import MetricSpec
from fleet.model.monitoring.prometheus import (
    CENTRAL_RULES_FILE,
    GPU_AGGREGATION_LABELS,
    LEAF_RULES_FILE,
    central_alert_rules,
    leaf_recording_rules,
)
from fleet.model.monitoring.rule_files import RULES_DIR, fill, placeholders, rule_file


def test_fill_replaces_placeholders_and_keeps_prometheus_templates():
    rules = {"groups": [{"rules": [{"alert": "A", "for": "${wait}", "summary": "{{ $labels.cluster }} ${wait}"}]}]}
    filled = fill(rules, {"wait": "5m"}, "test")
    assert filled["groups"][0]["rules"][0] == {"alert": "A", "for": "5m", "summary": "{{ $labels.cluster }} 5m"}
    assert rules["groups"][0]["rules"][0]["for"] == "${wait}"  # the input is not changed


def test_fill_refuses_a_missing_or_an_unused_value():
    rules = {"groups": [{"rules": [{"expr": "up > ${limit}"}]}]}
    with pytest.raises(ValueError, match=r"central\.yaml: placeholders without a value \['limit'\]"):
        fill(rules, {}, "central.yaml")
    with pytest.raises(ValueError, match=r"values without a placeholder \['extra'\]"):
        fill(rules, {"limit": "1", "extra": "2"}, "central.yaml")


def test_rule_file_is_a_fresh_copy():
    first = rule_file(LEAF_RULES_FILE)
    first["groups"].clear()
    assert rule_file(LEAF_RULES_FILE)["groups"]


def test_the_leaf_file_is_a_plain_rule_file_aggregating_by_the_fleets_labels():
    rules = rule_file(LEAF_RULES_FILE)
    assert placeholders(rules) == set()
    by = f"by ({', '.join(GPU_AGGREGATION_LABELS)})"
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert exprs and all(by in e for e in exprs), exprs
    assert leaf_recording_rules() == rules


def test_every_central_placeholder_is_filled_with_and_without_benchmarks():
    metric = MetricSpec(name="bench_seconds", type="histogram", help="h")
    for rules in (central_alert_rules(), central_alert_rules([metric])):
        assert placeholders(rules) == set()
    assert "${" in (RULES_DIR / CENTRAL_RULES_FILE).read_text(encoding="utf-8")


def test_the_rule_files_reach_every_stack_when_changed():
    from fleet.tools.delivery.affected import deployed_files

    rules = "fleet/model/monitoring/rules"
    assert {f"{rules}/{LEAF_RULES_FILE}", f"{rules}/{CENTRAL_RULES_FILE}"} <= deployed_files()
