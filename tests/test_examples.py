"""The example fleets under examples/ validate and plan (with the policy pack) like the shipped one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fleet.model.core.workloads import load_workloads
from fleet.model.loader import load_fleet
from fleet.program.stack_config import stack_names
from fleet.tools.cli import main
from tests.conftest import ROOT

EXAMPLES = sorted(p.parent for p in (ROOT / "examples").glob("*/fleet.yaml"))


def test_every_example_is_a_whole_fleet_to_start_from():
    """Each folder of examples/ holds a policy and its stack files; a team that replaced the sample's workloads
    deletes the examples that place them (README, "Make it your own"), maybe all of them."""
    folders = sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir()) if (ROOT / "examples").is_dir() else []
    assert [f for f in folders if f in EXAMPLES and (f / "stacks").is_dir()] == folders


def test_the_readme_names_every_example_without_counting_them():
    """README "Make it your own" says what each example is: a new example is named there, and no count goes stale."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Make it your own", 1)[1].split("\n## ", 1)[0]
    unnamed = [e.name for e in EXAMPLES if f"`{e.name}`" not in section]
    assert not unnamed, f"README.md, Make it your own: the examples {unnamed} are not named"
    assert not re.search(r"\b(two|three|four|five|six) (complete fleets|shipped ones)", readme)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_and_plans_without_violations(example: Path, capsys: pytest.CaptureFixture[str]):
    policy, stacks = example / "fleet.yaml", example / "stacks"
    placed = set(yaml.safe_load(policy.read_text(encoding="utf-8")).get("workloads") or {})
    missing = sorted(placed - set(load_workloads()))
    assert not missing, f"{example.name} places {missing}, which workloads/ no longer has: delete or edit the example"
    fleet = load_fleet(policy)
    assert set(stack_names(stacks)) == set(fleet.clusters), "one stack file per cluster, no other"
    assert main(["validate", "--policy", str(policy), "--stacks-dir", str(stacks)]) == 0
    assert main(["plan", "--policy", str(policy), "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    assert f"{len(fleet.clusters)} stack(s)" in out and " 0 mandatory violation(s)" in out
