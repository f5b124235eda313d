"""The generated files (policy/fleet.schema.json, Pulumi.yaml's config block, docs/reference.md) are what the
declarations say: a stale one fails here and in `python -m fleet schema --check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.core.stack_settings import STACK_SETTINGS
from fleet.model.policy_file import schema as spec_schema
from fleet.tools import reference
from fleet.tools.cli import main
from fleet.tools.commands.schema import generated_files
from tests.conftest import ROOT


@pytest.mark.parametrize("path", sorted(generated_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_generated_file_is_current(path: Path):
    assert path.read_text(encoding="utf-8") == generated_files()[path], "stale: run python -m fleet schema"


def test_schema_check_fails_on_a_stale_reference_page(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "reference.md"
    stale.write_text(reference.reference_text().replace("Fewest", "Least"), encoding="utf-8")
    monkeypatch.setattr(reference, "REFERENCE_FILE", stale)
    assert main(["schema", "--check"]) == 1
    assert "reference.md is out of date" in capsys.readouterr().err


def test_the_reference_page_has_every_key_with_its_default():
    text = reference.reference_text()
    for setting in STACK_SETTINGS.values():
        assert f"| `{setting.key}` |" in text, setting.key
    models = spec_schema.schema_models()  # the policy file's models, wherever each feature declares its own
    assert {"FleetFile", "PoolSettings", "SharingSettings", "ProbeSettings", "RunnerSettings", "QueuesSettings"} <= set(
        models
    )
    for name, model in models.items():
        for key in model.model_fields:
            assert f"| `{key}` |" in text, f"{name}.{key}"
    assert "| `max_nodes` | integer 1..1000 | `4` |" in text  # defaults.gpu_pool.max_nodes, from the model
    assert "| `clusters` |" in text and "required" in text.split("| `clusters` |", 1)[1].split("\n", 1)[0]
    assert "### `clusters.<cloud>.<cluster>.gpus.<card>.sharing`" in text
    assert "### `runners.clusters.<cluster>.<card>`" in text


def test_the_reference_page_has_every_key_of_a_workload_yaml():
    """docs/policy-file.md's workload section points at it: every key of workload.yaml, with its meaning."""
    from fleet.model.core import workloads

    text = reference.reference_text().split("## A workload's workload.yaml", 1)[1].split("\n## ", 1)[0]
    for model in (workloads.WorkloadSpec, workloads.MetricSpec, workloads.Headline, workloads.Resources):
        for key, field in model.model_fields.items():
            assert f"| `{key}` |" in text and field.description, f"{model.__name__}.{key}"
    assert "### `metrics[]`" in text and "| `in_sample` | true or false | `true` |" in text


def test_schema_writes_every_file_or_none(tmp_path: Path) -> None:
    """docs/ as a link to /dev/full: the write of the last file fails, and the two before it are left as they were."""
    from fleet.model.core.errors import InputError
    from fleet.tools.commands.schema import write_all

    first, second = tmp_path / "fleet.schema.json", tmp_path / "Pulumi.yaml"
    first.write_text("old schema\n")
    second.write_text("old project\n")
    full = tmp_path / "docs"
    full.symlink_to("/dev/full")
    with pytest.raises(InputError) as caught:
        write_all({first: "new schema\n", second: "new project\n", full / "reference.md": "new page\n"})
    (problem,) = caught.value.problems
    assert problem.file == str(full / "reference.md") and "nothing was written" in problem.message
    assert (first.read_text(), second.read_text()) == ("old schema\n", "old project\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.yaml", "docs", "fleet.schema.json"]  # no leftovers
    write_all({first: "new schema\n", second: "new project\n"})
    assert (first.read_text(), second.read_text()) == ("new schema\n", "new project\n")
