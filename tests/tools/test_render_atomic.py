"""``render --out DIR`` replaces each stack folder as a whole: concurrent runs take turns, an interrupted run
leaves the old output (or puts it back), and an unusable ``--out`` is bad input."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fleet.tools.cli import main
from fleet.tools.engine import render
from fleet.tools.engine.plan import StackPlan
from fleet.tools.engine.render import LOCK_FILE, render_stack, rendered_files
from tests.conftest import FIXTURES
from tests.helpers import plan_one, write_policy

RENDERS = 8
HUNG_AFTER_S = 300.0  # an upper bound only a hang reaches, not a measure of speed (8 renders take seconds)


POLICY = """
clusters:
  existing:
    lab: {central: true, gpus: [t4]}
workloads:
  tracker: all
  fitter: all
"""
# The tests' own workloads (tests/fixtures/fleet/workloads), not the shipped ones a team may replace.
WORKLOADS = FIXTURES / "fleet" / "workloads"
CONFIG = {"gpu-fleet:kubeconfig": {"secure": "djE6..."}, "gpu-fleet:storageClass": "local-path"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> StackPlan:
    """A small central stack that runs two workloads (17 files)."""
    return plan_one(tmp_path_factory.mktemp("policy"), POLICY, "lab", CONFIG, workloads_dir=WORKLOADS)


def tree(root: Path) -> dict[str, str]:
    """Relative path -> text of every file under ``root``."""
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file()}


def test_concurrent_renders_into_one_folder_all_succeed(plan: StackPlan, tmp_path: Path) -> None:
    out = tmp_path / "out"
    start = threading.Barrier(RENDERS)
    results: list[object] = [None] * RENDERS

    def one(i: int) -> None:
        start.wait(timeout=HUNG_AFTER_S)
        try:
            results[i] = render_stack(plan, out)
        except Exception as exc:  # every failure is reported by the assertion below
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(RENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HUNG_AFTER_S)
    failures = [r for r in results if not isinstance(r, list)]
    assert not failures, failures
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "lab"]  # no temporary folder left
    assert tree(out / "lab") == rendered_files(plan)


def test_an_interrupted_render_keeps_the_old_output(
    plan: StackPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    render_stack(plan, out)
    (out / "lab" / "kubernetes" / "Job_benchmarks_gone.yaml").write_text("kind: Job\n", encoding="utf-8")
    before = tree(out / "lab")
    write_text = Path.write_text
    calls = 0

    def interrupted(self: Path, *args: object, **kwargs: object) -> int:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise KeyboardInterrupt  # Ctrl-C in the middle of writing the new files
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        render_stack(plan, out)
    monkeypatch.undo()
    assert calls == 4
    assert tree(out / "lab") == before
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "lab"]


def test_a_killed_render_is_undone_by_the_next_one(plan: StackPlan, tmp_path: Path) -> None:
    """A render killed between moving the old folder aside and renaming the new one into place leaves both;
    the next render into the folder, of any stack, puts the old output back and drops the partial one."""
    out = tmp_path / "out"
    for stack in ("lab", "other", "done"):
        aside = out / f"{render._OLD}{stack}"
        aside.mkdir(parents=True)
        (aside / "old.yaml").write_text(f"{stack}: old\n", encoding="utf-8")
        (out / f"{render._NEW}{stack}").mkdir()
        (out / f"{render._NEW}{stack}" / "half.yaml").write_text("half", encoding="utf-8")
    (out / "done").mkdir()
    (out / "done" / "new.yaml").write_text("done: new\n", encoding="utf-8")  # killed after the swap
    render_stack(plan, out)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "done", "lab", "other"]
    assert tree(out / "lab") == rendered_files(plan)
    assert tree(out / "other") == {"old.yaml": "other: old\n"}
    assert tree(out / "done") == {"new.yaml": "done: new\n"}


@pytest.mark.parametrize("below", ["", "sub"])
def test_out_that_is_a_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], below: str) -> None:
    file = tmp_path / "rendered"
    file.write_text("not a folder\n", encoding="utf-8")
    out = file / below if below else file
    assert main(["render", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"render: --out {out}") and "is not a directory; nothing was rendered" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert file.read_text(encoding="utf-8") == "not a folder\n"


def test_a_folder_that_cannot_be_written_is_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy, stacks = write_policy(tmp_path, POLICY, {"lab": CONFIG})
    out = tmp_path / "out"
    (out / LOCK_FILE).mkdir(parents=True)  # the lock file cannot be opened
    args = ["--policy", str(policy), "--stacks-dir", str(stacks), "--workloads-dir", str(WORKLOADS)]
    assert main(["render", *args, "--stack", "lab", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"render: cannot write {out / LOCK_FILE}: Is a directory; lab keeps its old files\n"), err
    assert "Traceback" not in err
