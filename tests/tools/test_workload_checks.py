"""validate and plan check each workload folder's mtail programs against what workload.yaml declares, with the real
mtail where it is installed (CI installs it): compile, and one run over the real sample log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleet.model.core.errors import InputError
from fleet.model.core.workloads import load_workloads
from fleet.tools.checks.workload_checks import NO_MTAIL_NOTE, check_workloads, mtail_declarations
from fleet.tools.cli import main
from tests.conftest import FIXTURES, require_tool

FIXTURE = FIXTURES / "fleet"


@pytest.fixture
def workloads(tmp_path: Path) -> Path:
    """A copy of the fixture workloads a test may break."""
    shutil.copytree(FIXTURE / "workloads", tmp_path / "workloads")
    return tmp_path / "workloads"


def problems_of(folder: Path, mtail: str | None) -> list[str]:
    found, _ = check_workloads(load_workloads(folder), mtail)
    return [str(p) for p in found]


def test_declaration_parser_reads_labels_aliases_and_hidden() -> None:
    text = """
# counter not_a_declaration
counter a_total by device, stage
gauge b
histogram c_seconds by stage buckets 0.1, 1, 10
hidden gauge scratch
gauge d as "d_exported"
/gauge e/ {
  b = 1
}
"""
    assert mtail_declarations(text) == {
        ("a_total", "counter", ("device", "stage")),
        ("b", "gauge", ()),
        ("c_seconds", "histogram", ("stage",)),
        ("d_exported", "gauge", ()),
    }


def test_the_fixture_workloads_pass(workloads):
    assert problems_of(workloads, shutil.which("mtail")) == []


def test_a_metric_the_program_does_not_export(workloads):
    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    program.write_text(program.read_text().replace("tracker_throughput", "tracker_rate"), encoding="utf-8")
    found = problems_of(workloads, None)
    assert any("workload.yaml:" in p and "gauge tracker_throughput by [] is declared but no" in p for p in found)
    assert any("exports gauge tracker_rate by []: declare it here" in p for p in found)


def test_a_missing_or_unterminated_sample_log(workloads):
    (workloads / "tracker" / "sample.log").unlink()
    (workloads / "fitter" / "sample.log").write_text("fit duration_seconds=0.25", encoding="utf-8")
    found = problems_of(workloads, None)
    assert any("tracker/sample.log:1: missing" in p for p in found)
    assert any("fitter/sample.log:1: the last line has no newline" in p for p in found)
    (workloads / "fitter" / "sample.log").write_text("fit duration_seconds=0.25\nfit", encoding="utf-8")
    assert any("fitter/sample.log:2: the last line has no newline" in p for p in problems_of(workloads, None))


def test_a_program_that_does_not_compile_under_real_mtail(workloads):
    mtail = require_tool("mtail")
    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    program.write_text(program.read_text() + "\n/unclosed {\n", encoding="utf-8")
    lines = program.read_text().count("\n")
    found = problems_of(workloads, mtail)
    # at the program and the line mtail names, not at the folder's first line
    failed = [p for p in found if f"tracker/mtail/tracker.mtail:{lines}: mtail cannot compile it: " in p]
    assert failed and all("mtail version" not in p and "compile failed for" not in p for p in failed), found
    assert "Unterminated regular expression" in failed[0], failed


def test_mtail_errors_are_located_at_each_program_and_line():
    from fleet.tools.checks.workload_checks import compile_problems

    stderr = (
        "I1125 16:21:22.109151   10798 main.go:116] mtail version 3.0.0\n"
        "E1125 16:21:22.109923   10798 main.go:226] compile failed for a.mtail:\n"
        "a.mtail:4:3-5: Identifier `bar' not declared.\n"
        "\tTry adding `counter bar' to the top of the program.\n"
    )
    (found,) = compile_problems(stderr, Path("w/mtail"))
    assert str(found) == (
        "w/mtail/a.mtail:4: mtail cannot compile it: Identifier `bar' not declared. Try adding `counter bar' to the "
        "top of the program."
    )
    (unknown,) = compile_problems("E1125 1:2:3.4 1 main.go:1] out of memory\n", Path("w/mtail"))
    assert str(unknown) == "w/mtail:1: mtail --compile_only fails: out of memory"


def test_an_empty_sample_log_says_it_is_empty(workloads):
    (workloads / "fitter" / "sample.log").write_text("", encoding="utf-8")
    (workloads / "tracker" / "sample.log").write_text("\n\n", encoding="utf-8")
    found = problems_of(workloads, shutil.which("mtail"))
    assert any("fitter/sample.log:1: is empty: put a real log" in p for p in found), found
    assert any("tracker/sample.log:1: is empty" in p for p in found), found
    assert not any("no newline" in p or "yields no" in p for p in found), found


def test_a_sample_log_that_is_not_a_file_is_refused(workloads):
    log = workloads / "fitter" / "sample.log"
    log.unlink()
    log.symlink_to("/dev/zero")
    found = problems_of(workloads, shutil.which("mtail"))
    assert any("fitter/sample.log:1: is not a regular file" in p for p in found), found


@pytest.mark.parametrize("make", ["not-utf8", "folder"])
def test_an_unreadable_program_or_definition_is_named_for_what_it_is(workloads, make):
    """An mtail program that is not UTF-8 or is a folder was also "no *.mtail program" (it is there); a workload.yaml
    that is a folder was "no workload definition"."""
    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    definition = workloads / "fitter" / "workload.yaml"
    definition.unlink()
    definition.mkdir()
    if make == "folder":
        program.unlink()
        program.mkdir()
    else:
        program.write_bytes(b"# caf\xe9\ncounter tracker_runs_total\n")
    with pytest.raises(InputError) as exc:
        load_workloads(workloads)
    found = [str(p) for p in exc.value.problems]
    expected = "is a folder, not a file" if make == "folder" else "not UTF-8 text: byte 0xe9"
    assert any("tracker/mtail/tracker.mtail:" in p and expected in p for p in found), found
    assert any("fitter/workload.yaml:1: is a folder, not a file" in p for p in found), found
    assert not any("no *.mtail program" in p for p in found), found


def test_a_sample_that_yields_no_declared_metric_under_real_mtail(workloads):
    mtail = require_tool("mtail")
    (workloads / "tracker" / "sample.log").write_text("tracker started\ntracker done\n", encoding="utf-8")
    found = problems_of(workloads, mtail)
    assert any("tracker/sample.log:1: yields no tracker_throughput" in p for p in found), found


def test_without_mtail_the_programs_are_not_compiled_and_it_says_so(workloads, monkeypatch):
    import fleet.tools.checks.workload_checks

    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    program.write_text(program.read_text() + "\n/unclosed {\n", encoding="utf-8")
    monkeypatch.setattr(fleet.tools.checks.workload_checks.shutil, "which", lambda name: None)
    found, notes = check_workloads(load_workloads(workloads))
    assert notes == [NO_MTAIL_NOTE] and found == []  # nothing could compile it: no claim that it does


def test_a_histogram_is_checked_by_its_series_under_real_mtail(workloads):
    """mtail exports a histogram as _bucket, _sum and _count, never under the declared name itself."""
    mtail = require_tool("mtail")
    spec_file = workloads / "fitter" / "workload.yaml"
    spec_file.write_text(spec_file.read_text().replace("type: gauge", "type: histogram"), encoding="utf-8")
    program = workloads / "fitter" / "mtail" / "fitter.mtail"
    program.write_text(
        program.read_text().replace(
            "gauge fitter_duration_seconds", "histogram fitter_duration_seconds buckets 0.1, 1"
        ),
        encoding="utf-8",
    )
    assert problems_of(workloads, mtail) == []  # before: "yields no fitter_duration_seconds", with the series there


def test_validate_refuses_a_broken_workload_folder(workloads, capsys):
    (workloads / "tracker" / "sample.log").unlink()
    args = ["validate", "--policy", str(FIXTURE / "fleet.yaml"), "--stacks-dir", str(FIXTURE / "stacks")]
    assert main([*args, "--workloads-dir", str(workloads)]) == 2
    err = capsys.readouterr().err
    assert "tracker/sample.log:1: missing" in err and "Traceback" not in err


def stand_in_mtail(folder: Path, exported: str) -> str:
    """An executable that answers as mtail does for these checks: ``--compile_only`` succeeds, a one-shot run prints
    ``exported`` (the Prometheus text mtail would print); the real mtail's behaviour is what the tests above check."""
    folder = folder / f"stand-in-{len(list(folder.glob('stand-in-*')))}"  # its own path: mtail's runs are cached
    folder.mkdir()
    script = folder / "mtail"
    (folder / "exported.prom").write_text(exported, encoding="utf-8")
    script.write_text(f'#!/bin/sh\ncase "$*" in *--compile_only*) exit 0;; esac\ncat {folder / "exported.prom"}\n')
    script.chmod(0o755)
    return str(script)


ERRORS = """\
  - name: tracker_errors_total
    type: counter
    help: Runs that failed (none in the sample's run).
"""


def test_a_metric_the_sample_does_not_produce_is_declared_with_in_sample_false(workloads, tmp_path):
    """An error counter: the program exports it, the sample's run never counts one; declared ``in_sample: false``
    it is not looked for in the sample's metrics, otherwise it is, and its absence named with that way out."""
    spec = workloads / "tracker" / "workload.yaml"
    text = spec.read_text(encoding="utf-8").replace("headline:", ERRORS + "headline:")
    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    program.write_text("counter tracker_errors_total\n" + program.read_text(encoding="utf-8"), encoding="utf-8")
    mtail = stand_in_mtail(tmp_path, "tracker_throughput 1.5\n")
    spec.write_text(text, encoding="utf-8")
    found = [p for p in problems_of(workloads, mtail) if "/tracker/" in p]
    assert len(found) == 1 and "yields no tracker_errors_total" in found[0] and "in_sample: false" in found[0]
    spec.write_text(
        text.replace("(none in the sample's run).\n", "(none in the sample's run).\n    in_sample: false\n")
    )
    load_workloads.cache_clear()  # the folder is read again
    assert [p for p in problems_of(workloads, mtail) if "/tracker/" in p] == []


def test_a_headline_match_that_picks_no_series_of_the_sample_is_refused(workloads, tmp_path):
    spec = workloads / "tracker" / "workload.yaml"
    spec.write_text(
        spec.read_text(encoding="utf-8")
        .replace(
            "    help: Throughput of the last run.\n", "    help: Throughput of the last run.\n    labels: [device]\n"
        )
        .replace("  unit: items/s\n", "  unit: items/s\n  match: {device: gpu1}\n"),
        encoding="utf-8",
    )
    program = workloads / "tracker" / "mtail" / "tracker.mtail"
    program.write_text(program.read_text().replace("gauge tracker_throughput", "gauge tracker_throughput by device"))
    (workloads / "tracker" / "sample.log").write_text("tracker throughput=1.5 (gpu1 warming up)\n", encoding="utf-8")
    found = problems_of(workloads, stand_in_mtail(tmp_path, 'tracker_throughput{device="gpu0"} 1.5\n'))
    assert any('headline: match device="gpu1" picks no series of tracker_throughput' in p for p in found), found
    found = problems_of(workloads, stand_in_mtail(tmp_path, 'tracker_throughput{device="gpu1"} 1.5\n'))
    assert not [p for p in found if "/tracker/" in p], found
