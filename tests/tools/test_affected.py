"""Which stacks a change touches (fleet/tools/delivery/affected/): the policy diff per cluster, stack files, shared
code, workload folders, the git layer over a throwaway repository, the output formats and their CI contracts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleet.model.core.errors import InputError
from fleet.tools.cli import main
from fleet.tools.delivery import affected as sel
from fleet.tools.delivery.affected import selection
from tests.conftest import ROOT

# A frozen copy of the sample fleet with stand-in workloads of the same names (tests/fixtures/affected): the
# realistic diffs below stay valid whatever policy/fleet.yaml and workloads/ a team ships.
FIXTURE = ROOT / "tests" / "fixtures" / "affected"
FIXTURE_POLICY, FIXTURE_WORKLOADS = FIXTURE / "fleet.yaml", FIXTURE / "workloads"
SHIPPED = FIXTURE_POLICY.read_text(encoding="utf-8")
ALL = ["gke-uscentral1-c", "gke-uscentral1-a", "eks-eastus", "aks-eastus", "cern-main"]
LEAVES = ALL[:-1]
ON_FIXTURE = ["--policy", str(FIXTURE_POLICY), "--workloads-dir", str(FIXTURE_WORKLOADS)]

SMALL = """\
clusters:
  openstack:
    hub: {region: cern, central: true, gpus: {t4: {max_nodes: 2}}}
  gcp:
    gke-a: {zone: us-central1-a, gpus: [t4]}
    gke-b: {zone: us-central1-b, gpus: [l4]}
  aws:
    eks-a: {region: us-east-1, gpus: [a10g]}
workloads:
  simpletrack: [l4]
  pyhf: {gpus: [a10g], schedule: "0 3 * * 1"}
  3dgan: [t4]
"""


def fixture_policy() -> sel.LoadedPolicy:
    """The fixture policy as the selection loads it."""
    return sel.load_policy_file(FIXTURE_POLICY, FIXTURE_WORKLOADS)


def affected(changed: list[str], new: str, old: str | None, **kwargs: object) -> sel.Selection:
    """``fleet.affected.affected`` over the fixture's workload folders."""
    return sel.affected(changed, new, old, workloads_dir=FIXTURE_WORKLOADS, **kwargs)  # type: ignore[arg-type]


def edit(text: str, old: str, new: str) -> str:
    """``text`` with the single occurrence of ``old`` replaced (a realistic hand edit of the policy)."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def policy_change(new: str, old: str = SHIPPED) -> sel.Selection:
    return affected(["policy/fleet.yaml"], new, old)


def reasons(selection: sel.Selection, stack: str) -> str:
    return " | ".join(next(s.reasons for s in selection.stacks if s.stack == stack))


# --- paths -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind", "what"),
    [
        ("policy/fleet.yaml", "policy", ""),
        ("stacks/Pulumi.eks-eastus.yaml", "stack", "eks-eastus"),
        ("components/clusters/gke.py", "shared", "components/clusters/gke.py"),
        ("fleet/model/core/catalogue.yaml", "shared", "fleet/model/core/catalogue.yaml"),
        ("__main__.py", "shared", "__main__.py"),
        ("Pulumi.yaml", "shared", "Pulumi.yaml"),
        ("requirements.txt", "shared", "requirements.txt"),
        ("requirements-dev.txt", "shared", "requirements-dev.txt"),
        ("policy/gpufleet_policies/gpu_pools.py", "shared", "policy/gpufleet_policies/gpu_pools.py"),
        ("policy/requirements.txt", "shared", "policy/requirements.txt"),
        ("workloads/pyhf/workload.yaml", "workload-metrics", "pyhf"),
        ("workloads/pyhf/mtail/pyhf.mtail", "workload", "pyhf"),
        ("workloads/pyhf/files/fit.py", "workload", "pyhf"),
        ("workloads/pyhf/sample.log", "none", "sample.log is not read by the program"),
        ("workloads/simpletrack/Dockerfile", "none", "Dockerfile is not read by the program"),
        ("workloads/pyhf/test_pyhf_wrapper.py", "none", "test_pyhf_wrapper.py is not read by the program"),
        ("README.md", "none", "not deployed"),
        ("examples/gke-only/fleet.yaml", "none", "not deployed"),
        (".hadolint.yaml", "none", "not deployed"),
        ("docs/delivery.md", "none", "not deployed"),
        ("tests/test_gke.py", "none", "not deployed"),
        ("tests/e2e/test_mtail.py", "none", "not deployed"),
        ("benchmarks/plan_speed.py", "none", "not deployed"),
        (".github/workflows/deploy.yml", "none", "not deployed"),
        (".gitlab-ci.yml", "none", "not deployed"),
        (".ci/run", "none", "not deployed"),
        ("policy/fleet.schema.json", "none", "not deployed"),
        ("tools/new_script.py", "unclassified", "tools/new_script.py"),
    ],
)
def test_classify(path: str, kind: str, what: str) -> None:
    assert sel.classify(path) == (kind, what)


def test_docs_and_tests_only_touch_nothing() -> None:
    s = affected(["README.md", "tests/test_gke.py", "docs/x.md", ".github/workflows/deploy.yml"], SHIPPED, SHIPPED)
    assert s.names == [] and s.removed == () and s.notes == ()


def test_shared_code_touches_every_stack_central_last() -> None:
    s = affected(["components/kubernetes/infra.py", "fleet/model/core/fleet.py"], SHIPPED, SHIPPED)
    assert s.names == ALL
    assert [e.stack for e in s.central] == ["cern-main"]
    assert "shared code changed: components/kubernetes/infra.py, fleet/model/core/fleet.py" in reasons(s, "eks-eastus")


@pytest.mark.parametrize(
    "tool",
    [
        "fleet/report/plots.py",
        "fleet/report/command.py",
        "fleet/tools/cli.py",
        "fleet/tools/engine/plan.py",
        "fleet/tools/delivery/affected/selection.py",
    ],
)
def test_a_tool_of_the_repository_selects_no_stack(tool: str) -> None:
    """The CLI, the plan engine, render, report and stack selection are never deployed: editing a plot of the
    report previews nothing."""
    s = affected([tool], SHIPPED, SHIPPED)
    assert s.names == [] and s.notes == ()


def test_deployed_code_is_what_the_program_and_the_pack_import() -> None:
    deployed = sel.deployed_files()
    # the program (__main__ -> fleet.program.stack -> the model) and the pack (policy/ -> pool_view, pod_contract)
    for module in (
        "fleet/program/stack.py",
        "fleet/model/core/fleet.py",
        "fleet/model/core/workloads.py",
        "fleet/model/core/clouds/pool_view.py",
    ):
        assert module in deployed, module
    assert "fleet/model/core/catalogue.yaml" in deployed  # data named by a deployed module (catalogue.py)
    for tool in (
        "fleet/tools/cli.py",
        "fleet/report/command.py",
        "fleet/tools/engine/mock_engine.py",
        "fleet/tools/engine/mock_outputs.yaml",
    ):
        assert tool not in deployed, tool  # mock_engine: the pool reader imports it for type checkers only


def test_deployed_code_follows_the_imports_of_a_changed_tree(tmp_path: Path) -> None:
    """A tool that the program starts importing becomes deployed code; an import under TYPE_CHECKING does not."""
    (tmp_path / "fleet").mkdir()
    (tmp_path / "policy").mkdir()
    (tmp_path / "__main__.py").write_text("from fleet.app import main\n", encoding="utf-8")
    (tmp_path / "fleet" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "fleet" / "app.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fleet import typing_only\n"
        "def main():\n    import fleet.lazy\n",
        encoding="utf-8",
    )
    for name in ("lazy", "typing_only", "tool"):
        (tmp_path / "fleet" / f"{name}.py").write_text(
            "DATA = 'table.yaml'\n" if name == "lazy" else "", encoding="utf-8"
        )
    (tmp_path / "fleet" / "table.yaml").write_text("{}\n", encoding="utf-8")
    (tmp_path / "fleet" / "other.yaml").write_text("{}\n", encoding="utf-8")
    deployed = sel.deployed_files(tmp_path)
    assert deployed == frozenset({"fleet/__init__.py", "fleet/app.py", "fleet/lazy.py", "fleet/table.yaml"})


def test_many_shared_files_are_summarised() -> None:
    s = affected([f"fleet/m{i}.py" for i in range(7)], SHIPPED, SHIPPED)
    assert reasons(s, "cern-main").endswith("(+3 more)")


def test_unclassified_path_selects_everything_to_be_safe() -> None:
    s = affected(["tools/new_script.py"], SHIPPED, SHIPPED)
    assert s.names == ALL
    assert "not classified" in reasons(s, "aks-eastus")


def test_stack_config_change_touches_that_stack() -> None:
    s = affected(["stacks/Pulumi.eks-eastus.yaml"], SHIPPED, SHIPPED)
    assert s.names == ["eks-eastus"]
    assert s.stacks[0].cloud == "aws" and s.stacks[0].region == "us-east-1" and not s.stacks[0].central


def test_stack_file_without_cluster_is_a_note_not_a_plan() -> None:
    s = affected(["stacks/Pulumi.gone.yaml"], SHIPPED, SHIPPED)
    assert s.names == []
    assert "'gone' is not a cluster of the policy" in s.notes[0]


# --- the policy diff -------------------------------------------------------------------------------------------


def test_unchanged_or_comment_only_policy_touches_nothing() -> None:
    assert policy_change(SHIPPED).names == []
    assert policy_change(SHIPPED + "\n# a comment\n").names == []


def test_reordering_or_respelling_cards_touches_nothing() -> None:
    reordered = edit(SHIPPED, "gpus: [p4, p100, v100, a100, l4]", "gpus: [l4, a100, v100, p100, p4]")
    assert policy_change(reordered).names == []
    respelled = edit(SHIPPED, "gpus: [t4]", "gpus: {t4: {}}")
    assert policy_change(respelled).names == []


def test_own_section_changed_touches_only_that_cluster() -> None:
    s = policy_change(edit(SHIPPED, "gpus: [t4]", "gpus: [t4, l4]"))
    assert s.names == ["gke-uscentral1-a"]
    why = reasons(s, "gke-uscentral1-a")
    assert "clusters.gcp.gke-uscentral1-a changed" in why
    assert "+simpletrack/l4" in why and "+pyhf/l4 (0 3 * * 1)" in why


def test_pool_size_change_touches_only_that_cluster() -> None:
    s = policy_change(edit(SHIPPED, "a100: {max_nodes: 1}", "a100: {max_nodes: 2}"))
    assert s.names == ["aks-eastus"]


def test_cluster_added_touches_it_and_central() -> None:
    added = edit(
        SHIPPED,
        "      gpus: [t4]\n",
        "      gpus: [t4]\n    gke-europe-west4-b:\n      zone: europe-west4-b\n      gpus: [l4]\n",
    )
    s = policy_change(added)
    assert s.names == ["gke-europe-west4-b", "cern-main"]
    assert "cluster added" in reasons(s, "gke-europe-west4-b")
    assert "gke-europe-west4-b added" in reasons(s, "cern-main")
    assert s.removed == ()


AKS = """  azure:
    aks-eastus:
      region: eastus
      gpus:
        t4: {}
        a10: {}
        a100: {max_nodes: 1}
"""


def test_cluster_removed_touches_central_and_is_reported_not_planned() -> None:
    s = policy_change(edit(SHIPPED, AKS, ""))
    assert s.names == ["cern-main"]
    assert s.removed == ("aks-eastus",)
    assert "aks-eastus removed" in reasons(s, "cern-main")
    assert any("destroy it by hand" in n and "pulumi destroy --stack aks-eastus" in n for n in s.notes)
    # its stack file, deleted in the same change, is not planned either
    s = affected(["policy/fleet.yaml", "stacks/Pulumi.aks-eastus.yaml"], edit(SHIPPED, AKS, ""), SHIPPED)
    assert s.names == ["cern-main"] and not any("not a cluster" in n for n in s.notes)


def test_defaults_change_touches_clusters_whose_pools_change() -> None:
    # cern-main sets max_nodes on both its cards: a new default max does not reach it
    s = policy_change(edit(SHIPPED, "    max_nodes: 2\n", "    max_nodes: 3\n"))
    assert s.names == LEAVES
    assert "defaults changed its effective settings" in reasons(s, "eks-eastus")


def test_defaults_min_nodes_does_not_reach_magnum_whose_floor_is_already_one() -> None:
    s = policy_change(edit(SHIPPED, "    min_nodes: 0        #", "    min_nodes: 1        #"))
    assert s.names == LEAVES


def test_defaults_used_by_every_cluster_touch_all() -> None:
    assert policy_change(edit(SHIPPED, 'kubernetes_version: "1.33"', 'kubernetes_version: "1.34"')).names == ALL
    assert policy_change(edit(SHIPPED, "    max_nodes: 3\n", "    max_nodes: 5\n")).names == ALL  # system pool


def test_workload_placement_touches_clusters_whose_pairs_change() -> None:
    s = policy_change(edit(SHIPPED, "3dgan: [v100, t4, a10, a10g, l4, a100]", "3dgan: [v100, t4, a10g, l4, a100]"))
    assert s.names == ["aks-eastus"]
    assert "-3dgan/a10" in reasons(s, "aks-eastus")
    s = policy_change(edit(SHIPPED, "3dgan: [v100, t4, a10, a10g, l4, a100]", "3dgan: [v100, t4, a10, a10g, a100]"))
    assert s.names == ["gke-uscentral1-c", "eks-eastus"]


def test_schedule_and_enabled_are_part_of_the_pairs() -> None:
    s = policy_change(edit(SHIPPED, 'schedule: "0 3 * * 1"', 'schedule: "0 4 * * 1"'))
    assert s.names == ALL  # pyhf runs on every card
    s = affected(["policy/fleet.yaml"], edit(SMALL, "3dgan: [t4]", "3dgan: {gpus: [t4], enabled: false}"), SMALL)
    assert s.names == ["gke-a", "hub"]


def test_central_flag_moved_touches_old_and_new_central() -> None:
    moved = edit(SHIPPED, "      central: true\n", "")
    moved = edit(moved, "      zone: us-central1-a\n", "      zone: us-central1-a\n      central: true\n")
    s = policy_change(moved)
    assert s.names == ["cern-main", "gke-uscentral1-a"]  # the new central one last
    assert "no longer central" in reasons(s, "cern-main")
    assert "now the central cluster" in reasons(s, "gke-uscentral1-a")
    assert s.central[0].stack == "gke-uscentral1-a"


def test_monitoring_reaches_leaves_or_central_by_key() -> None:
    assert policy_change(edit(SHIPPED, "leaf_retention: 7d", "leaf_retention: 14d")).names == LEAVES
    assert policy_change(edit(SHIPPED, "central_retention: 180d", "central_retention: 365d")).names == ["cern-main"]
    assert policy_change(edit(SHIPPED, "federation_interval: 60s", "federation_interval: 30s")).names == ["cern-main"]
    assert policy_change(edit(SHIPPED, "scrape_interval: 30s", "scrape_interval: 15s")).names == ALL


def test_top_level_key_the_selection_does_not_model_selects_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selection, "POLICY_SECTIONS", ("defaults", "clusters", "workloads"))
    s = policy_change(edit(SHIPPED, "central_retention: 180d", "central_retention: 365d"))
    assert s.names == ALL
    assert "'monitoring'" in reasons(s, "eks-eastus")


def test_invalid_old_policy_selects_all_with_a_note() -> None:
    s = policy_change(SHIPPED, old="clusters: {\n")
    assert s.names == ALL
    assert "the old policy does not load" in s.notes[0]
    s = policy_change(SHIPPED, old=edit(SHIPPED, "gpus: [t4]", "gpus: [k80]"))  # a retired card
    assert s.names == ALL and "k80" in s.notes[0]


def test_missing_old_policy_selects_all_only_when_the_policy_changed() -> None:
    s = affected(["policy/fleet.yaml"], SHIPPED, None)
    assert s.names == ALL and "no old policy/fleet.yaml" in s.notes[0]
    assert affected(["stacks/Pulumi.eks-eastus.yaml"], SHIPPED, None).names == ["eks-eastus"]


def test_invalid_new_policy_is_an_input_error_naming_file_and_line() -> None:
    with pytest.raises(InputError) as err:
        affected(["policy/fleet.yaml"], edit(SHIPPED, "gpus: [t4]", "gpus: [t5]"), SHIPPED)
    assert re.match(
        r"policy/fleet\.yaml \(new\):\d+: clusters\.gcp\.gke-uscentral1-a\.gpus", str(err.value.problems[0])
    )


# --- workload folders ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("workloads/simpletrack/mtail/simpletrack.mtail", ["gke-b"]),
        ("workloads/simpletrack/workload.yaml", ["gke-b", "hub"]),  # the central one federates its metrics
        ("workloads/3dgan/mtail/3dgan.mtail", ["gke-a", "hub"]),  # hub runs 3dgan on t4 itself
        ("workloads/pyhf/files/fit.py", ["eks-a"]),
        ("workloads/pyhf/sample.log", []),
        ("workloads/madgraph4gpu/mtail/madgraph.mtail", []),  # placed nowhere
        ("workloads/madgraph4gpu/workload.yaml", ["hub"]),
    ],
)
def test_workload_folder_touches_the_clusters_that_run_it(path: str, expected: list[str]) -> None:
    assert affected([path], SMALL, SMALL).names == expected


def test_matrix_entries_carry_cloud_and_region() -> None:
    s = sel.select_all(sel.load_policy_text(SMALL, "small", FIXTURE_WORKLOADS))
    assert [e.matrix_entry() for e in s.stacks] == [
        {"stack": "gke-a", "cloud": "gcp", "region": "", "central": False, "approval": True},
        {"stack": "gke-b", "cloud": "gcp", "region": "", "central": False, "approval": True},
        {"stack": "eks-a", "cloud": "aws", "region": "us-east-1", "central": False, "approval": True},
        {"stack": "hub", "cloud": "openstack", "region": "cern", "central": True, "approval": True},
    ]


# --- output formats and their CI contracts ---------------------------------------------------------------------


def test_json_lines_and_markdown() -> None:
    s = policy_change(edit(SHIPPED, AKS, ""))
    data = json.loads(sel.render(s, "json"))
    assert data["stacks"] == ["cern-main"] and data["leaves"] == [] and data["removed"] == ["aks-eastus"]
    assert data["central"] == [
        {"stack": "cern-main", "cloud": "openstack", "region": "cern", "central": True, "approval": True}
    ]
    assert data["reasons"]["cern-main"] and data["notes"]
    assert sel.render(s, "lines") == "cern-main\n"
    md = sel.render(s, "markdown")
    assert "| `cern-main` (central, last) | openstack |" in md and ":warning: cluster `aks-eastus`" in md
    empty = affected(["README.md"], SHIPPED, SHIPPED)
    assert sel.render(empty, "lines") == "" and "None: nothing deployed changed." in sel.render(empty, "markdown")
    with pytest.raises(ValueError, match="unknown format"):
        sel.render(s, "xml")


GITLAB_CI = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("action", sel.GITLAB_ACTIONS)
def test_gitlab_child_pipeline_matches_gitlab_ci(action: str) -> None:
    child = yaml.safe_load(sel.render(sel.select_all(fixture_policy()), f"gitlab-{action}"))
    assert child.pop("include") == [{"local": ".gitlab-ci.yml"}]
    assert list(child) == [f"{action} {name}" for name in ALL]
    for name, job in child.items():
        assert job["extends"] in GITLAB_CI, f"{job['extends']} is not a hidden job of .gitlab-ci.yml"
        assert job["stage"] in GITLAB_CI["stages"]
        assert job["variables"]["STACK"] == name.split(" ", 1)[1]
        assert ("resource_group" in job) == (action == "up")
    stages = [job["stage"] for job in child.values()]
    if action == "up":
        assert stages == ["stacks"] * 4 + ["central"]
        assert child["up cern-main"]["resource_group"] == "pulumi-cern-main"
    else:
        assert set(stages) == {"stacks"}
    empty = yaml.safe_load(sel.render(affected(["README.md"], SHIPPED, SHIPPED), f"gitlab-{action}"))
    assert empty["no stack touched"]["extends"] in GITLAB_CI


def test_gitlab_child_pipeline_passes_the_vendored_schema(tmp_path: Path) -> None:
    pytest.importorskip("check_jsonschema")
    files = []
    for action in sel.GITLAB_ACTIONS:
        path = tmp_path / f"child-{action}.yml"
        path.write_text(
            sel.render(sel.select_all(fixture_policy()), f"gitlab-{action}"),
            encoding="utf-8",
        )
        files.append(str(path))
    empty = tmp_path / "child-empty.yml"
    empty.write_text(sel.render(affected(["README.md"], SHIPPED, SHIPPED), "gitlab-preview"), encoding="utf-8")
    files.append(str(empty))
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.gitlab-ci", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_github_workflows_use_only_what_the_selection_outputs() -> None:
    entry_keys = set(sel.select_all(fixture_policy()).stacks[0].matrix_entry())
    json_keys = set(sel.select_all(fixture_policy()).as_dict())
    workflows = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / ".github" / "workflows").glob("*.yml")}
    used = {m for text in workflows.values() for m in re.findall(r"matrix\.([a-z_]+)", text)}
    assert used and used <= entry_keys
    jq = set(re.findall(r"jq -c '\.(\w+)", workflows["select-stacks.yml"]))
    assert jq and jq <= json_keys
    assert "python -m fleet affected" in workflows["select-stacks.yml"]


SELECTION_DEPENDENCIES = {"yaml", "pydantic", "pydantic_core", "typing_extensions", "annotated_types"}
SELECTION_DEPENDENCIES |= {"typing_inspection", "_distutils_hack"}  # the last one: setuptools' .pth, always there
SELECTION_DEPENDENCIES |= {"croniter", "dateutil"}  # the model checks cron schedules (croniter needs dateutil)


def test_selection_needs_only_the_models_dependencies() -> None:
    """`python -m fleet affected` reads the model only: pydantic, pyyaml and croniter, no Pulumi SDK or provider."""
    code = (
        "import sys; from fleet.tools.cli import main; rc = main(['affected', '--all', '--format', 'json']);"
        "mods = [m for m in list(sys.modules.values()) if 'site-packages' in (getattr(m, '__file__', '') or '')];"
        "print(' '.join(sorted({m.__name__.split('.')[0] for m in mods})), file=sys.stderr); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    # the project's own editable install leaves a finder module in site-packages: it is gpu-fleet, not a dependency
    third_party = {name for name in proc.stderr.split() if not name.startswith("__editable__")}
    assert third_party - SELECTION_DEPENDENCIES == set(), "add them to the selection job's pip install"


# --- command line ----------------------------------------------------------------------------------------------


def test_cli_files_and_old_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(SHIPPED, encoding="utf-8")
    new = tmp_path / "new.yaml"
    new.write_text(edit(SHIPPED, "gpus: [t4]", "gpus: [t4, l4]"), encoding="utf-8")
    files = ["--files", "policy/fleet.yaml", "--old-policy", str(old)]
    rc = main(["affected", *files, "--policy", str(new), "--workloads-dir", str(FIXTURE_WORKLOADS)])
    out, err = capsys.readouterr()
    assert rc == 0 and out == "gke-uscentral1-a\n" and "clusters.gcp.gke-uscentral1-a changed" in err
    assert main(["affected", "--files", "README.md", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["stacks"] == []


def test_cli_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["affected", "--all", *ON_FIXTURE]) == 0
    assert capsys.readouterr().out.split() == ALL


def test_cli_bad_input_exits_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text(edit(SHIPPED, "gpus: [t4]", "gpus: [t5]"), encoding="utf-8")
    assert main(["affected", "--all", "--policy", str(bad), "--workloads-dir", str(FIXTURE_WORKLOADS)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "t5" in err and "Traceback" not in err
    assert main(["affected", "--files", "policy/fleet.yaml", "--old-policy", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml:1: cannot read the old policy" in capsys.readouterr().err
    assert main(["affected", "--base", "main", "--repo", str(tmp_path)]) == 2
    assert "not a git repository" in capsys.readouterr().err.lower()
    with pytest.raises(SystemExit) as exc:
        main(["affected", "--all", "--files", "README.md"])
    assert exc.value.code == 2


# --- the git layer, on a throwaway repository ------------------------------------------------------------------


def run_git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    return subprocess.run([*cmd, *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", message)
    return run_git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository laid out like this one: the shipped policy, workloads and stack files, one commit on main."""
    repo = tmp_path / "repo"
    (repo / "policy").mkdir(parents=True)
    (repo / "policy" / "fleet.yaml").write_text(SHIPPED, encoding="utf-8")
    shutil.copytree(FIXTURE_WORKLOADS, repo / "workloads")
    shutil.copytree(FIXTURE / "stacks", repo / "stacks")
    (repo / "components").mkdir()
    (repo / "components" / "infra.py").write_text("# infra\n", encoding="utf-8")
    (repo / "README.md").write_text("# fleet\n", encoding="utf-8")
    run_git(repo.parent, "init", "-q", "-b", "main", str(repo))
    commit_all(repo, "initial")
    return repo


def git_select(repo: Path, base: str, head: str | None = None) -> sel.Selection:
    return sel.select_from_git(
        base, head, repo=repo, policy_file=repo / "policy" / "fleet.yaml", workloads_dir=repo / "workloads"
    )


def test_git_branch_policy_edit(repo: Path) -> None:
    run_git(repo, "checkout", "-q", "-b", "feature")
    policy = repo / "policy" / "fleet.yaml"
    policy.write_text(edit(SHIPPED, "gpus: [t4]", "gpus: [t4, l4]"), encoding="utf-8")
    commit_all(repo, "l4 on gke-uscentral1-a")
    assert git_select(repo, "main", "feature").names == ["gke-uscentral1-a"]
    assert git_select(repo, "main").names == ["gke-uscentral1-a"]  # the working tree is the feature branch


def test_git_judges_a_branch_by_its_own_changes_from_the_merge_base(repo: Path) -> None:
    run_git(repo, "checkout", "-q", "-b", "feature")
    (repo / "README.md").write_text("# fleet, documented\n", encoding="utf-8")
    feature = commit_all(repo, "docs")
    run_git(repo, "checkout", "-q", "main")
    (repo / "components" / "infra.py").write_text("# infra, changed on main\n", encoding="utf-8")
    commit_all(repo, "main moved on")
    assert git_select(repo, "main", feature).names == []
    assert git_select(repo, feature, "main").names == ALL  # the other way round, main's change counts


def test_git_working_tree_includes_uncommitted_and_untracked(repo: Path) -> None:
    stack = repo / "stacks" / "Pulumi.eks-eastus.yaml"
    stack.write_text(stack.read_text(encoding="utf-8") + "  gpu-fleet:protect: true\n", encoding="utf-8")
    assert git_select(repo, "HEAD").names == ["eks-eastus"]
    (repo / "components" / "new.py").write_text("# new\n", encoding="utf-8")
    assert git_select(repo, "HEAD").names == ALL


def test_git_unknown_base_selects_all_with_a_note(repo: Path) -> None:
    for base in (sel.ZERO_SHA, "deadbeef" * 5):
        s = git_select(repo, base)
        assert s.names == ALL and "no commit" in s.notes[-1]


def test_git_workload_removed_with_its_policy_line(repo: Path) -> None:
    """The old policy is loaded with the workload folders of its own commit, so removing a workload together
    with its placement is a plain diff (the 3dgan pairs go), not an unloadable old policy."""
    run_git(repo, "checkout", "-q", "-b", "feature")
    shutil.rmtree(repo / "workloads" / "3dgan")
    (repo / "policy" / "fleet.yaml").write_text(
        edit(SHIPPED, "  3dgan: [v100, t4, a10, a10g, l4, a100]", ""), encoding="utf-8"
    )
    commit_all(repo, "retire 3dgan")
    s = git_select(repo, "main", "feature")
    assert s.notes == ()
    assert s.names == ALL  # 3dgan ran on a card of every cluster, and its metrics were federated
    assert "-3dgan/t4" in reasons(s, "gke-uscentral1-a")


def test_git_head_that_does_not_exist_is_an_error(repo: Path) -> None:
    with pytest.raises(sel.GitError, match="--head nope: no branch, tag or commit of that name"):
        git_select(repo, "main", "nope")


def test_cli_over_git(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_git(repo, "checkout", "-q", "-b", "feature")
    (repo / "stacks" / "Pulumi.aks-eastus.yaml").write_text("config: {}\n", encoding="utf-8")
    commit_all(repo, "aks config")
    args = ["affected", "--base", "main", "--head", "feature", "--repo", str(repo), "--format", "json"]
    assert main([*args, "--workloads-dir", str(repo / "workloads")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stacks"] == ["aks-eastus"]
    assert data["leaves"] == [
        {"stack": "aks-eastus", "cloud": "azure", "region": "eastus", "central": False, "approval": True}
    ]


def test_git_unrelated_histories_have_no_merge_base(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Diffing against the base's tip would judge the change by everything the two histories differ in."""
    run_git(repo, "checkout", "-q", "--orphan", "other")
    (repo / "README.md").write_text("# another history\n", encoding="utf-8")
    commit_all(repo, "unrelated root")
    with pytest.raises(sel.GitError, match=r"no merge base of main and other in .*: their histories are unrelated"):
        git_select(repo, "main", "other")
    args = ["affected", "--base", "main", "--head", "other", "--repo", str(repo)]
    assert main([*args, "--workloads-dir", str(repo / "workloads")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1 and captured.err.startswith("affected: no merge base of main and other")


def test_git_shallow_clone_without_the_merge_base_says_to_fetch_the_history(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI checkout of depth 1 has both tips but not the commit they branched from."""
    run_git(repo, "checkout", "-q", "-b", "feature")
    (repo / "README.md").write_text("# fleet, documented\n", encoding="utf-8")
    commit_all(repo, "docs")
    run_git(repo, "checkout", "-q", "main")
    (repo / "components" / "infra.py").write_text("# infra, changed on main\n", encoding="utf-8")
    commit_all(repo, "main moved on")
    clone = tmp_path / "clone"
    run_git(tmp_path, "clone", "-q", "--depth", "1", "--no-single-branch", "-b", "feature", repo.as_uri(), str(clone))
    assert run_git(clone, "rev-parse", "--is-shallow-repository") == "true"
    args = ["affected", "--base", "origin/main", "--repo", str(clone), "--policy", str(clone / "policy" / "fleet.yaml")]
    assert main([*args, "--workloads-dir", str(clone / "workloads")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err and captured.err.count("\n") == 1
    assert "affected: no merge base of origin/main and HEAD" in captured.err
    assert "this clone is shallow" in captured.err and "git fetch --unshallow" in captured.err
    assert "fetch-depth: 0" in captured.err
    run_git(clone, "fetch", "-q", "--unshallow")  # what the message says to do
    assert main([*args, "--workloads-dir", str(clone / "workloads")]) == 0
    assert capsys.readouterr().out == ""  # the feature branch changed only the README


def test_git_missing_is_a_message_not_a_traceback(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(repo / "no-such-bin"))
    assert main(["affected", "--base", "main", "--repo", str(repo)]) == 2
    assert capsys.readouterr().err.startswith("affected: cannot run git rev-parse --git-dir: ")


def test_the_probes_files_reach_every_stack() -> None:
    """The probe is the fleet's own workload in fleet/model/probes/probe: its script, program and spec are deployed."""
    from fleet.model.core.workloads import PROBE_DIR

    files = {str(p.relative_to(ROOT)) for p in PROBE_DIR.rglob("*") if p.is_file() and p.name != "sample.log"}
    assert {"fleet/model/probes/probe/files/probe.sh", "fleet/model/probes/probe/mtail/probe.mtail"} <= files
    assert files - sel.deployed_files() == set()


def test_a_base_a_shallow_clone_lacks_says_the_clone_is_shallow(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A single-branch clone of depth 1 has no main at all: not a typo of a branch name, but history to fetch."""
    clone = tmp_path / "clone"
    run_git(tmp_path, "clone", "-q", "--depth", "1", repo.as_uri(), str(clone))
    run_git(clone, "branch", "-q", "-r", "-d", "origin/main")  # what a single-branch CI checkout of a tag holds
    args = ["affected", "--base", "origin/main", "--repo", str(clone), "--policy", str(clone / "policy" / "fleet.yaml")]
    assert main([*args, "--workloads-dir", str(clone / "workloads")]) == 2
    err = capsys.readouterr().err
    assert "--base origin/main: no branch, tag or commit of that name" in err and "which is a shallow clone" in err
    assert "git fetch --unshallow origin origin/main" in err and "Traceback" not in err
