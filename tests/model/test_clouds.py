"""Each cloud's rules live in fleet/model/core/clouds/: one object per cloud name of the catalogue, and no code outside
the package compares a cloud's name."""

from __future__ import annotations

import ast

import pytest

from fleet.model.core.catalogue import CLOUDS, load_catalogue
from fleet.model.core.clouds import (
    RULES,
    api_endpoint_readers,
    cloud_rules,
    cluster_types,
    pool_readers,
    sweep_pool_clouds,
)
from fleet.model.core.clouds.rules import DoctorContext, open_to_all, taint_string, upper_effect
from fleet.model.core.taints import Taint
from tests.conftest import ROOT

SCANNED = ("fleet", "components", "policy", "benchmarks")
CLOUDS_PACKAGE = ROOT / "fleet" / "model" / "core" / "clouds"


def _names(node: ast.expr) -> set[str]:
    """The string constants of ``node`` (a constant, or a tuple/list/set of them)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def cloud_name_comparisons(tree: ast.AST) -> list[str]:
    """Every comparison (==, !=, in, not in) with a cloud's name as one side, as source text."""
    return [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(_names(side) & set(CLOUDS) for side in (node.left, *node.comparators))
    ]


def test_every_cloud_of_the_catalogue_has_its_rules() -> None:
    assert set(RULES) == set(CLOUDS)
    for name in CLOUDS:
        assert cloud_rules(name).name == name


def test_no_code_outside_the_clouds_package_compares_a_cloud_name() -> None:
    found = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if CLOUDS_PACKAGE in path.parents:
                continue
            for text in cloud_name_comparisons(ast.parse(path.read_text(encoding="utf-8"))):
                found.append(f"{path.relative_to(ROOT)}: {text}")
    assert not found, "ask the cloud's rules (fleet/model/core/clouds/) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source", ['cloud == "gcp"', 'c.cloud in ("aws", "azure")', 'self.CLOUD != "openstack"', '"existing" == x']
)
def test_the_scan_finds_a_comparison_against_a_cloud_name(source: str) -> None:
    assert len(cloud_name_comparisons(ast.parse(source))) == 1


def test_the_scan_ignores_other_strings() -> None:
    assert cloud_name_comparisons(ast.parse('kind == "magnum"; x in ("gke", "eks")')) == []


def test_a_pool_type_belongs_to_one_cloud_and_reads_back() -> None:
    readers = pool_readers()
    assert len(readers) == len([r for r in RULES.values() if r.builds_pools])
    for pool_type, rules in readers.items():
        assert rules.pool_type == pool_type


def test_sweep_pools_are_built_on_the_clouds_whose_rules_say_so() -> None:
    assert set(sweep_pool_clouds()) == {n for n, r in RULES.items() if r.sweep_pools}
    assert all(cloud_rules(n).builds_pools for n in sweep_pool_clouds())


def test_a_taint_reads_back_in_kubernetes_spelling_from_the_upper_case_one() -> None:
    taint = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
    sent = upper_effect(taint)
    assert sent["effect"] == "NO_SCHEDULE"
    assert taint_string(sent["key"], sent["value"], sent["effect"]) == taint.as_string()


def test_location_rules_report_a_missing_location_for_managed_clouds_only() -> None:
    for name, rules in RULES.items():
        problems = rules.location_problems(None, None)
        assert bool(problems) == bool(rules.region_example), name


def test_a_zonal_cloud_reads_the_region_from_the_zone() -> None:
    for rules in RULES.values():
        if rules.zonal:
            assert rules.region_of(None, f"{rules.region_example}-a") == rules.region_example
        assert rules.region_of("r", None) == "r"


def test_every_cloud_words_its_doctor_hints() -> None:
    ctx = DoctorContext(
        stack="s", kubectl="kubectl --context s", up="pulumi up --stack s", pool_name="gpu-t4", card="t4",
        resource="nvidia.com/gpu", units_per_node=1, machine_type="m", policy_key="clusters.x.s.gpus.t4",
        selector="gpu=t4",
    )  # fmt: skip
    for rules in RULES.values():
        assert rules.autoscaler_logs(ctx.kubectl)
        assert rules.template_fix(ctx) and rules.label_fix(ctx, ("node-1",))


def test_a_cloud_whose_pools_the_fleet_builds_names_its_cluster_and_api_endpoint_types() -> None:
    for name, rules in RULES.items():
        named = (rules.cluster_type, rules.api_endpoint_type, rules.pool_type)
        assert all(named) == rules.builds_pools and any(named) == rules.builds_pools, name
    assert len(cluster_types()) == len([r for r in RULES.values() if r.builds_pools])
    assert all(rules.api_endpoint_type == t for t, rules in api_endpoint_readers().items())


def test_only_pools_that_carry_our_labels_and_taints_need_them_in_the_pack() -> None:
    """A cloud whose pools carry no labels of ours is selected by another label (the catalogue's pool_selector)."""
    for name, rules in RULES.items():
        if rules.builds_pools and not rules.pool_labels:
            assert "{card}" not in load_catalogue().clouds[name].pool_selector.values(), name  # type: ignore[index]


@pytest.mark.parametrize(
    ("ranges", "open_"),
    [
        (None, True),
        ([], True),
        (["0.0.0.0/0"], True),
        (["10.0.0.0/8", "::/0"], True),
        (["10.0.0.0/8"], False),
        (["not-a-range", "10.0.0.0/8"], False),
    ],
)
def test_source_ranges_are_open_to_all_when_missing_empty_or_admitting_every_address(ranges, open_) -> None:
    assert open_to_all(ranges) is open_
