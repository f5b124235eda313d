"""The workloads' mtail programs under the real mtail (Debian 3.0.0~rc50).

1. Every program compiles (``--compile_only`` exits 0), and a broken program is shown to fail the same check.
2. ``--one_shot`` over each sample log yields exactly the expected series and values.
3. A live mtail started with the sidecar's own flags (``fleet.pod_contract.mtail_args``) on a pre-created empty
   log file sees every line the workload appends afterwards; a file that already held lines when mtail
   started loses them, which is why the pod's init container creates the file empty first.

Every mtail here listens on 127.0.0.1 only and logs to stderr (without ``--logtostderr`` glog writes
files into /tmp); one-shot and compile runs use port 0 so they never collide with anything.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fleet.model.core.pod_contract import mtail_args
from fleet.model.core.workloads import WORKLOADS_DIR, load_workloads
from tests.conftest import require_tool
from tests.e2e.processes import PATIENCE_S
from tests.e2e.support import QUIET, Series, one_shot, parse_prometheus, series

pytestmark = pytest.mark.e2e

# The last value of each gauge and the count of each counter in workloads/<name>/sample.log.
EXPECTED: dict[str, dict[Series, float]] = {
    "simpletrack": {
        series("simpletrack_throughput_particle_turns_per_second", device="0.0"): 1175208,
        series("simpletrack_particles", device="0.0"): 20000,
        series("simpletrack_turns", device="0.0"): 15,
        series("simpletrack_runs_total", device="0.0"): 5,
    },
    "madgraph4gpu": {
        series("madgraph_throughput_events_per_second", stage="Rmb+ME"): 3.673078e07,
        series("madgraph_throughput_events_per_second", stage="MatrixElems"): 6.825567e07,
        series("madgraph_throughput_events_per_second", stage="MECalcOnly"): 7.195237e07,
        series("madgraph_total_duration_seconds"): 0.789113,
        series("madgraph_runs_total"): 3,
    },
    "pyhf": {
        series("pyhf_fit_duration_seconds", backend="jax"): 0.4123,
        series("pyhf_cls_observed", backend="jax"): 0.000819411,
        series("pyhf_fits_total", backend="jax"): 20,
    },
    "3dgan": {
        series("gan3d_epoch_duration_seconds"): 2.3243281172550265,
        series("gan3d_batch_duration_seconds"): 0.28193779165794536,
        series("gan3d_test_duration_seconds"): 2.882917214653494,
        series("gan3d_epochs_total"): 5,
        series("gan3d_batches_total"): 25,
    },
}

# The workload folders of the repository: generic checks run on each; EXPECTED's exact values on those it knows
# (a team that removes a shipped workload removes its expectations with it, one that adds one gets the checks).
PRESENT = sorted(load_workloads())
KNOWN = sorted(set(EXPECTED) & set(PRESENT))

# Lines of each sample that a counter must count, found without mtail: ties EXPECTED's counts to the files.
COUNTED = {
    "simpletrack": ("simpletrack_runs_total", re.compile(r" particles\*turns/seconds, ")),
    "madgraph4gpu": ("madgraph_runs_total", re.compile(r"^TOTAL +:")),
    "pyhf": ("pyhf_fits_total", re.compile(r"^pyhf fit ")),
    "3dgan": ("gan3d_batches_total", re.compile(r"^Time taken by batch ")),
}


def workload_series(samples: dict[Series, float], name: str) -> dict[Series, float]:
    """The samples of the metrics the workload declares (drops mtail's and Go's own)."""
    declared = {m.name for m in load_workloads()[name].spec.metrics}
    return {key: value for key, value in samples.items() if key[0] in declared}


def programs_dir(name: str) -> Path:
    return load_workloads()[name].folder / "mtail"


def sample_lines(name: str) -> list[str]:
    return load_workloads()[name].sample_log.read_text(encoding="utf-8").splitlines(keepends=True)


# --- 1. compile ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESENT)
def test_program_compiles(name: str) -> None:
    mtail = require_tool("mtail")
    run = subprocess.run(
        [mtail, "--compile_only", "--progs", str(programs_dir(name)), *QUIET],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert run.returncode == 0, run.stderr


# A program of the tests' own (any team keeps it, whatever its workloads), the shape of a workload's: a counter by a
# label its regular expression captures.
DEMO_PROGRAM = (
    "counter demo_runs_total by device\n"
    "\n"
    "/^(?P<npart>\\d+) particles on device (?P<device>\\S+)$/ {\n"
    "  demo_runs_total[$device]++\n"
    "}\n"
)
DEMO_LINE = "20000 particles on device 0.0\n"
DEMO_RUNS = series("demo_runs_total", device="0.0")

BREAKAGES = {
    "unbalanced brace": ("  demo_runs_total[$device]++\n}\n", "  demo_runs_total[$device]++\n"),
    "undeclared metric": ("demo_runs_total[$device]++", "demo_run_total[$device]++"),
    "invalid regexp": ("(?P<npart>\\d+) particles", "(?P<npart>\\d+ particles"),
    "none (the program as it is)": ("", ""),
}


def demo_programs(folder: Path, text: str = DEMO_PROGRAM) -> Path:
    """``folder`` holding the tests' own program ``demo.mtail`` (``text``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo.mtail").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_broken_program_fails_the_compile_check(tmp_path: Path, breakage: str) -> None:
    mtail = require_tool("mtail")
    old, new = BREAKAGES[breakage]
    assert old in DEMO_PROGRAM
    run = subprocess.run(
        [mtail, "--compile_only", "--progs", str(demo_programs(tmp_path, DEMO_PROGRAM.replace(old, new, 1))), *QUIET],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    if not old:  # the control: the program itself compiles, so each breakage is what fails
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode != 0
    assert "compile failed for demo.mtail" in run.stderr


# --- 2. one-shot over the sample logs -------------------------------------------------------------------


@pytest.mark.parametrize("name", KNOWN)
def test_one_shot_over_the_sample_gives_the_known_values(name: str) -> None:
    mtail = require_tool("mtail")
    samples = one_shot(mtail, programs_dir(name), load_workloads()[name].sample_log)
    # Exactly the expected series: none missing, no stray label value, and one-shot exports nothing else.
    assert samples == EXPECTED[name]
    declared = {m.name for m in load_workloads()[name].spec.metrics}
    assert {key[0] for key in samples} == declared


@pytest.mark.parametrize("name", PRESENT)
def test_the_sample_yields_every_declared_metric(name: str) -> None:
    """Any workload folder, known here or not: its program turns its real sample log into every metric it declares,
    but those declared ``in_sample: false`` (an error counter the sample's run never counts), which it may."""
    mtail = require_tool("mtail")
    samples = one_shot(mtail, programs_dir(name), load_workloads()[name].sample_log)
    metrics = load_workloads()[name].spec.metrics
    exported = {key[0] for key in samples}
    assert {m.name for m in metrics if m.in_sample} <= exported <= {m.name for m in metrics}


@pytest.mark.parametrize("name", KNOWN)
def test_expected_counts_match_the_sample_lines(name: str) -> None:
    metric, pattern = COUNTED[name]
    count = sum(1 for line in sample_lines(name) if pattern.search(line))
    assert [value for (series_name, _), value in EXPECTED[name].items() if series_name == metric] == [count]


@pytest.mark.skipif(
    not (WORKLOADS_DIR / "madgraph4gpu").is_dir(), reason="the shipped madgraph4gpu workload was removed"
)
def test_one_shot_ignores_lines_that_only_look_alike(tmp_path: Path) -> None:
    mtail = require_tool("mtail")
    log = tmp_path / "madgraph4gpu.log"
    log.write_text(
        "EvtsPerSec[Rnd+Rmb+ME](123) = ( 3.246864e+07                 )  sec^-1\n"
        "TOTAL (123) :     0.193770 sec\n"
        "TOTAL  (23) :     0.172283 sec\n"
        "TOTAL       :     1.250000 sec\n",
        encoding="utf-8",
    )
    assert one_shot(mtail, programs_dir("madgraph4gpu"), log) == {
        series("madgraph_total_duration_seconds"): 1.25,
        series("madgraph_runs_total"): 1,
    }


# --- 3. a live mtail with the sidecar's flags ------------------------------------------------------------


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(port: int) -> dict[Series, float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return parse_prometheus(response.read().decode("utf-8"))
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


class LiveMtail:
    """A real mtail process run with ``fleet.pod_contract.mtail_args``, bound to 127.0.0.1."""

    def __init__(self, mtail: str, progs: Path, log: Path, stderr: Path):
        self.port = free_loopback_port()
        self.log = log
        self.stderr_path = stderr
        args = mtail_args(programs_dir=str(progs), logs=str(log), port=self.port)
        assert "--emit_prog_label=false" in args
        self.stderr = stderr.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [mtail, *args, "--address", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=self.stderr
        )

    def wait_until_serving(self, seconds: float = PATIENCE_S) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"mtail exited: {self.stderr_path.read_text()}"
            if scrape(self.port) is not None:
                return
            time.sleep(0.05)
        pytest.fail(f"mtail did not answer on 127.0.0.1:{self.port} within {seconds} s")

    def lines_read(self, samples: dict[Series, float]) -> float:
        return samples.get(series("mtail_log_lines_total", logfile=str(self.log)), 0)

    def scrape_until(self, done, seconds: float = PATIENCE_S) -> dict[Series, float]:
        """Poll /metrics until ``done(samples)`` holds or ``seconds`` pass; the last scrape either way."""
        deadline = time.monotonic() + seconds
        samples: dict[Series, float] = {}
        while time.monotonic() < deadline:
            samples = scrape(self.port) or samples
            if done(samples):
                break
            time.sleep(0.1)
        return samples

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.stderr.close()


@pytest.fixture
def live_mtail(tmp_path: Path):
    """Starts LiveMtail instances for a test and always stops them, whatever the test does."""
    started: list[LiveMtail] = []

    def start(name: str | Path, log: Path) -> LiveMtail:
        """mtail tailing ``log`` with the programs of the workload ``name`` (or of the folder ``name``)."""
        programs = name if isinstance(name, Path) else programs_dir(name)
        live = LiveMtail(require_tool("mtail"), programs, log, tmp_path / f"mtail-{len(started)}.err")
        started.append(live)
        live.wait_until_serving()
        return live

    yield start
    for live in started:
        live.stop()


def append_slowly(log: Path, lines: list[str]) -> None:
    """Append lines one by one, flushed, the way a running workload writes its log."""
    with log.open("a", encoding="utf-8") as handle:
        for n, line in enumerate(lines):
            handle.write(line)
            handle.flush()
            if n % 10 == 9:
                time.sleep(0.01)


@pytest.mark.parametrize("name", KNOWN)
def test_live_mtail_on_a_precreated_file_loses_no_line(tmp_path: Path, live_mtail, name: str) -> None:
    log = tmp_path / f"{name}.log"
    log.touch()  # what the pod's init container does before mtail and the workload start
    live = live_mtail(name, log)
    lines = sample_lines(name)
    append_slowly(log, lines)
    # The line counter moves when the tailer reads a line, before the program has run on it: wait for both.
    samples = live.scrape_until(
        lambda s: live.lines_read(s) == len(lines) and workload_series(s, name) == EXPECTED[name]
    )
    assert live.lines_read(samples) == len(lines)
    assert workload_series(samples, name) == EXPECTED[name]


def test_lines_written_before_mtail_opened_the_file_are_lost(tmp_path: Path, live_mtail) -> None:
    # The trap the init container avoids: mtail starts reading a file it finds at its end.
    lines = ["starting\n", DEMO_LINE, "noise\n", DEMO_LINE, DEMO_LINE, "noise\n", DEMO_LINE, DEMO_LINE]
    log = tmp_path / "demo.log"
    log.write_text("".join(lines[:3]), encoding="utf-8")  # the first run's result is in these lines
    live = live_mtail(demo_programs(tmp_path / "programs"), log)
    append_slowly(log, lines[3:])
    expected_runs = lines[3:].count(DEMO_LINE)  # one run fewer than the whole log holds
    samples = live.scrape_until(lambda s: live.lines_read(s) == len(lines) - 3 and s.get(DEMO_RUNS) == expected_runs)
    assert live.lines_read(samples) == len(lines) - 3
    assert samples.get(DEMO_RUNS) == expected_runs == lines.count(DEMO_LINE) - 1
