"""Stack settings (``gpu-fleet:*`` in a stack file) are checked before anything is planned or deployed."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.core.stack_settings import check_source_ranges
from fleet.tools.cli import main
from tests.helpers import write_policy

POLICY = """
clusters:
  gcp:
    central-test:
      zone: us-central1-a
      central: true
      gpus: [t4]
    leaf-test:
      zone: us-central1-c
      gpus: [l4]
"""
GCP = {"gcp:project": "proj-1"}


def plan_leaf(tmp_path: Path, capsys: pytest.CaptureFixture[str], leaf: dict) -> tuple[int, str]:
    """Plan the leaf stack of a two-cluster fixture fleet with ``leaf`` config; (exit status, all output)."""
    policy, stacks = write_policy(tmp_path, POLICY, {"central-test": GCP, "leaf-test": {**GCP, **leaf}})
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    args = ["plan", "--policy", str(policy), "--stacks-dir", str(stacks), "--workloads-dir", str(workloads)]
    status = main([*args, "--stack", "leaf-test", "--no-policy-pack"])
    out, err = capsys.readouterr()
    return status, out + err


@pytest.mark.parametrize(
    ("ranges", "fragment"),
    [
        (["192.0.2.0/24"], "192.0.2.0/24 is a documentation range"),
        (["198.51.100.7/32"], "documentation range"),
        (["2001:db8::/48"], "documentation range"),
        (["0.0.0.0/0"], "admits every address"),
        (["::/0"], "admits every address"),
        (["10.0.0.300/8"], "is not a CIDR range"),
        (["10.1.2.3/8"], "has host bits set"),
        ("10.0.0.0/8", "must be a list of CIDR ranges"),
    ],
)
def test_bad_federation_source_ranges_are_refused_with_the_stack_file_line(tmp_path, capsys, ranges, fragment):
    status, err = plan_leaf(tmp_path, capsys, {"gpu-fleet:federationSourceRanges": ranges})
    assert status == 2
    assert "Pulumi.leaf-test.yaml:" in err and "gpu-fleet:federationSourceRanges" in err and fragment in err
    assert "Traceback" not in err


def test_real_ranges_reach_the_federation_endpoint(tmp_path, capsys):
    status, err = plan_leaf(tmp_path, capsys, {"gpu-fleet:federationSourceRanges": ["188.184.0.0/15", "10.0.0.0/8"]})
    assert status == 0, err
    assert "federationSourceRanges is not set" not in err


def test_unset_ranges_warn_with_the_exact_command(tmp_path, capsys):
    status, out = plan_leaf(tmp_path, capsys, {})
    assert status == 0
    assert "pulumi config set --stack leaf-test --path 'gpu-fleet:federationSourceRanges[0]'" in out


def test_check_source_ranges_keeps_good_ranges_in_order():
    ranges, problems = check_source_ranges(["10.0.0.0/8", "203.0.113.0/24", "2a00:1450::/32"])
    assert ranges == ["10.0.0.0/8", "2a00:1450::/32"]
    assert [where for where, _ in problems] == [(1,)]


def test_the_program_reads_each_declared_setting_into_a_field_of_its_own():
    """One declaration per setting (fleet/model/core/stack_settings.py): StackSettings has exactly one field for each,
    and the program hands the components that very object (no second list of fields to copy)."""
    import dataclasses

    from components.settings import ComponentSettings
    from fleet.model.core.stack_settings import STACK_SETTINGS
    from fleet.program.settings import StackSettings

    fields = {f.name for f in dataclasses.fields(StackSettings)}
    assert {s.attribute for s in STACK_SETTINGS.values()} <= fields
    assert fields - {s.attribute for s in STACK_SETTINGS.values()} == {"secret_placeholder", "config_problem"}
    assert issubclass(StackSettings, ComponentSettings)
    assert STACK_SETTINGS["stackReferencePrefix"].attribute == "stack_reference_prefix"


def test_the_program_fills_the_offline_placeholder_and_the_stack_file_locator(monkeypatch):
    """StackSettings.read gives the components the plan's secret placeholder and problems located in the stack file."""
    from fleet.program import settings
    from fleet.program.stack_config import SECRET_PLACEHOLDER

    monkeypatch.setattr(settings.pulumi, "Config", lambda namespace: _NoConfig())
    read = settings.StackSettings.read()
    assert read.secret_placeholder == SECRET_PLACEHOLDER
    assert read.config_problem is settings.config_problem
    assert read.protect is True and read.federation_source_ranges == [] and read.kubeconfig is None


def test_the_stack_file_is_read_once_for_every_secret_setting(monkeypatch, tmp_path):
    """Each secret setting looks in the stack file for parts left in plain text: one read of the file serves them
    all (the plan reads every stack's settings; each read parses the whole file again)."""
    from fleet.program import settings

    stack_file = tmp_path / "Pulumi.s.yaml"
    stack_file.write_text("config:\n  gpu-fleet:runnerTokens:\n    t4:\n      secure: v1:dG9rZW4=\n", encoding="utf-8")
    reads = []

    def counting_read_yaml(path, *args):
        reads.append(path)
        return read_yaml(path, *args)

    read_yaml = settings.read_yaml
    monkeypatch.setattr(settings, "read_yaml", counting_read_yaml)
    monkeypatch.setattr(settings, "stack_file_path", lambda: stack_file)
    monkeypatch.setattr(settings.pulumi, "Config", lambda namespace: _NoConfig())
    settings.StackSettings.read()
    assert reads == [stack_file]
    assert settings.plain_in_stack_file("gpu-fleet:runnerTokens") == []

    stack_file.write_text("config:\n  gpu-fleet:runnerTokens:\n    t4: glrt-plain\n", encoding="utf-8")
    assert settings.plain_in_stack_file("gpu-fleet:runnerTokens") == [("t4",)]


class _NoConfig:
    """A stack config that sets nothing."""

    def get(self, name: str) -> None:
        return None


@pytest.mark.parametrize(
    ("name", "value", "parsed", "problem"),
    [
        ("protect", "false", False, None),
        ("protect", "yes", None, "must be true or false"),
        ("storageClass", " ssd ", "ssd", None),
        ("storageClass", "  ", None, "must be a non-empty string"),
        ("subnetIds", '["subnet-1"]', ["subnet-1"], None),
        ("subnetIds", "subnet-1", None, "must be a list of strings"),
        ("apiAllowedCidrs", ["0.0.0.0/0"], [], "the ranges of the people and CI runners"),
    ],
)
def test_a_value_is_parsed_as_its_declaration_says(name, value, parsed, problem):
    from fleet.model.core.stack_settings import STACK_SETTINGS, parse_value

    got, problems = parse_value(STACK_SETTINGS[name], value)
    assert got == parsed
    assert (problem is None) == (problems == []), problems
    assert problem is None or problem in problems[0][1]
