"""Shared by the end-to-end tests: throwaway certificates (openssl), promtool, YAML files, the promtool unit tests of
the central alert rules (``rule_tests``), and mtail's one-shot runs with the parsed Prometheus text they print."""

from __future__ import annotations

import html
import os
import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.model.core.workloads import PROBE_DIR, MetricSpec
from fleet.model.monitoring.prometheus import BENCHMARK_LAST_SAMPLE_RULE, central_alert_rules, to_yaml
from tests.conftest import require_tool
from tests.e2e.processes import PATIENCE_S

METRICS = [
    MetricSpec(name="benchmark_events_per_second", type="gauge", help="events/s", labels=["stage"]),
    MetricSpec(name="benchmark_fit_seconds", type="histogram", help="fit time"),
    MetricSpec(name="benchmark_runs_total", type="counter", help="runs"),
]


@dataclass(frozen=True)
class Pki:
    """A throwaway CA with one server and one client certificate (EC P-256, valid two days)."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


EC_KEY = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"


def _openssl(command: str, *extra: str, cwd: Path) -> None:
    """Run ``openssl`` with ``command`` (split on spaces) followed by ``extra`` arguments kept whole."""
    args = ["openssl", *command.split(), *extra]
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=PATIENCE_S)


def make_pki(directory: Path, server_dns: str = "prometheus.leaf.gpufleet.test") -> Pki:
    """Make a CA, a server certificate for ``server_dns`` and 127.0.0.1, and a client certificate."""
    require_tool("openssl")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        f"req -x509 -keyout ca.key -out ca.crt -days 2 {EC_KEY}",
        "-subj",
        "/CN=gpufleet test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )
    exts = {
        "server": f"subjectAltName=DNS:{server_dns},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        "client": "subjectAltName=DNS:central.gpufleet.test\nextendedKeyUsage=clientAuth\n",
    }
    for serial, (name, ext) in enumerate(exts.items(), start=2):
        (directory / f"{name}.ext").write_text(ext + "keyUsage=critical,digitalSignature\n", encoding="utf-8")
        _openssl(f"req -new -keyout {name}.key -out {name}.csr {EC_KEY}", "-subj", f"/CN={name}", cwd=directory)
        sign = f"x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -set_serial {serial} -days 2 -out {name}.crt"
        _openssl(sign, "-extfile", f"{name}.ext", cwd=directory)
    d = directory
    return Pki(d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool, returning the finished process (never raising on a non-zero exit)."""
    exe = require_tool("promtool")
    return subprocess.run(
        [exe, *map(str, args)], check=False, cwd=cwd, capture_output=True, text=True, timeout=PATIENCE_S
    )


def write_yaml(path: Path, obj: Any) -> Path:
    path.write_text(to_yaml(obj), encoding="utf-8")
    return path


# --- promtool test rules -----------------------------------------------------------------------------------


def alert_annotations(rules: dict[str, Any], alertname: str, labels: dict[str, str], value: str) -> dict[str, str]:
    """The annotations of ``alertname`` in ``rules`` expanded as Prometheus would for ``labels`` and a pre-formatted
    ``$value`` (as humanizeDuration or plain)."""
    rule = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == alertname)
    out = {}
    for key, text in rule["annotations"].items():
        text = text.replace("{{ $value | humanizeDuration }}", value).replace("{{ $value }}", value)
        for name, label in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label)
        assert "{{" not in text, text
        out[key] = text
    return out


def _alert_annotations(alertname: str, labels: dict[str, str], value: str) -> dict[str, str]:
    return alert_annotations(central_alert_rules(METRICS), alertname, labels, value)


def sel(labels: dict[str, str]) -> str:
    """A PromQL label selector ``{k="v",...}``."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def no_alert(alertname: str, eval_time: str) -> dict[str, Any]:
    """A promtool alert test: no ``alertname`` alert at ``eval_time``."""
    return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": []}


def rule_tests() -> dict[str, Any]:
    """A ``promtool test rules`` file for the central rules, rendered next to them as central_alerts.yml."""
    down = {"job": "federate-alpha", "cluster": "alpha", "cloud": "gcp", "instance": "prometheus.alpha:443"}
    healthy = {"job": "federate-beta", "cluster": "beta", "cloud": "aws", "instance": "prometheus.beta:443"}
    stopped = {"cluster": "alpha", "workload": "madgraph", "gpu": "nvidia-t4"}
    running = {"cluster": "alpha", "workload": "pyhf", "gpu": "nvidia-t4"}
    daily = {"cluster": "beta", "workload": "madgraph", "gpu": "nvidia-a100"}
    last = BENCHMARK_LAST_SAMPLE_RULE
    return {
        "rule_files": ["central_alerts.yml"],
        # 5m keeps the 9-day run over a 7d max_over_time to about a second (1m takes over ten).
        "evaluation_interval": "5m",
        "tests": [
            {
                "name": "a federation job failing for over 5m fires; healthy or non-federation jobs never do",
                "interval": "1m",
                "input_series": [
                    {"series": "up" + sel(down), "values": "1 1 1 0x20"},  # down from 3m on
                    {"series": "up" + sel(healthy), "values": "1x23"},
                    {"series": 'up{job="node-exporter",instance="node-1:9100"}', "values": "0x23"},
                ],
                "alert_rule_test": [
                    no_alert("FederatedClusterDown", "2m"),
                    no_alert("FederatedClusterDown", "5m"),  # pending, not yet firing
                    {
                        "eval_time": "10m",
                        "alertname": "FederatedClusterDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {**down, "severity": "warning"},
                                "exp_annotations": _alert_annotations("FederatedClusterDown", down, ""),
                            }
                        ],
                    },
                ],
            },
            {
                "name": "a benchmark silent for over 26h fires, until its last sample leaves the 7d lookback",
                "interval": "10m",
                "input_series": [
                    # madgraph on T4 in alpha: two stages reporting during the first hour, then nothing.
                    {"series": f"benchmark_events_per_second{sel({**stopped, 'stage': 'rmb_me'})}", "values": "1x6"},
                    {"series": f"benchmark_events_per_second{sel({**stopped, 'stage': 'me_only'})}", "values": "2x6"},
                    # pyhf on T4 in alpha: a histogram whose _count keeps coming until about 33h.
                    {"series": f"benchmark_fit_seconds_count{sel(running)}", "values": "1+1x200"},
                    # ... beside a second metric with the very same labels (a workload reports several metrics):
                    # timestamp() drops the metric name, so the rule must tell the two apart or fail to evaluate.
                    {"series": f"benchmark_events_per_second{sel(running)}", "values": "3x200"},
                    # madgraph on A100 in beta: one run at 0h, the next at 24h (a daily CronJob).
                    {"series": f"benchmark_events_per_second{sel(daily)}", "values": "5 _x143 6"},
                    # A non-benchmark metric that stops is not watched.
                    {"series": f"node_load1{sel(stopped)}", "values": "1x6"},
                ],
                "promql_expr_test": [
                    {
                        # The record exists only while a sample is within the 5m lookback (beta's is not) ...
                        "expr": last,
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": last + sel(stopped), "value": 1800},
                            {"labels": last + sel(running), "value": 1800},
                        ],
                    },
                    {
                        # ... and max_over_time over the lookback remembers each series' newest sample.
                        "expr": f"max_over_time({last}[7d])",
                        "eval_time": "26h",
                        "exp_samples": [
                            {"labels": sel(stopped), "value": 3600},
                            {"labels": sel(running), "value": 93600},
                            {"labels": sel(daily), "value": 86400},
                        ],
                    },
                ],
                "alert_rule_test": [
                    no_alert("BenchmarkStoppedReporting", "2h"),
                    no_alert("BenchmarkStoppedReporting", "27h"),  # exactly 26h after the last sample: not yet
                    {
                        "eval_time": "28h",
                        "alertname": "BenchmarkStoppedReporting",
                        "exp_alerts": [
                            {
                                "exp_labels": {**stopped, "severity": "info"},
                                "exp_annotations": _alert_annotations(
                                    "BenchmarkStoppedReporting", stopped, "1d 3h 0m 0s"
                                ),
                            }
                        ],
                    },
                    # Past the 7d lookback every series here is forgotten: the alert resolves by itself.
                    no_alert("BenchmarkStoppedReporting", "9d"),
                ],
            },
        ],
    }


# --- mtail one-shot runs ---

QUIET = ["--logtostderr", "--address", "127.0.0.1", "--port", "0"]
Series = tuple[str, tuple[tuple[str, str], ...]]


def series(name: str, **labels: str) -> Series:
    return name, tuple(sorted(labels.items()))


SAMPLE_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)(?: \d+)?$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[Series, float]:
    """Every sample of a Prometheus text exposition, by (name, sorted labels)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        found = SAMPLE_LINE.match(line)
        assert found, f"not a Prometheus sample line: {line!r}"
        labels = tuple(sorted(LABEL.findall(found["labels"] or "")))
        out[(found["name"], labels)] = float(found["value"])
    return out


def one_shot(mtail: str, progs: Path, logs: Path) -> dict[Series, float]:
    """mtail --one_shot of ``progs`` over ``logs``: every sample it prints."""
    run = subprocess.run(
        [
            mtail,
            "--one_shot",
            "--one_shot_format=prometheus",
            "--emit_prog_label=false",
            "--progs",
            str(progs),
            "--logs",
            str(logs),
            *QUIET,
        ],
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert run.returncode == 0, run.stderr
    return parse_prometheus(run.stdout)


# --- the pool probe ---


def run_probe(
    log: Path, job_name: str, accelerator: str = "nvidia.com/gpu", path: str | None = None, card: str = "t4"
) -> int:
    """The pool probe's real probe.sh with the pod's environment, its output appended to ``log`` as the benchmark
    wrapper does; its exit status. ``path`` replaces PATH (to put a stand-in nvidia-smi first)."""
    env = {
        "PATH": path or os.environ["PATH"],
        "BENCHMARK_JOB_NAME": job_name,
        "BENCHMARK_GPU": card,
        "BENCHMARK_ACCELERATOR": accelerator,
    }
    with log.open("a", encoding="utf-8") as out:
        return subprocess.run(
            ["/bin/sh", str(PROBE_DIR / "files" / "probe.sh")], env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def markdown_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The rows of each workload's table in report.md, by workload (``## name`` sections)."""
    tables: dict[str, list[dict[str, str]]] = {}
    section = ""
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            section, header = line[3:].strip(), None
        elif line.startswith("| ") and section:
            # the cells as read: Markdown's escapes and HTML entities undone (fleet/report/formatting.py)
            raw = re.split(r"(?<!\\) \| ", line.strip()[1:-1])
            cells = [html.unescape(re.sub(r"\\(.)", r"\1", c.strip())) for c in raw]
            if header is None:
                header = cells
            elif not set(cells[0]) <= set("-: "):
                tables.setdefault(section, []).append(dict(zip(header, cells, strict=True)))
        else:
            header = None if not line.startswith("|") else header
    return tables


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (fails if it is not a PNG)."""
    assert data[:8] == PNG_MAGIC, data[:8]
    assert data[12:16] == b"IHDR", data[12:16]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# The accounting tests' cluster (tests/e2e/test_accounting_rules.py, test_report_accounting.py): a GKE cluster billed
# to physics with a T4 pool time-sliced in two and a whole L4 pool; the fixture workload fitter billed to theory.
ACCOUNTING_POLICY = """\
clusters:
  gcp:
    acct-gke:
      zone: us-central1-a
      central: true
      billing_account: physics
      gpus:
        t4: {sharing: {time_slicing: 2}}
        l4: {}
monitoring:
  federation_interval: 60s
workloads:
  tracker: [t4, l4]
  fitter: {gpus: [t4], billing_account: theory}
"""


@dataclass(frozen=True)
class PageInBrowser:
    """What headless Chromium saw of a page: each image's source and whether it loaded, the console's errors."""

    images: list[tuple[str, bool]]
    console_errors: list[str]


#: Headless Chromium as the machine's Debian package runs it as root with no network (the flags keep it from calling
#: home: without them its background connections are refused, many at a time).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--no-first-run",
)  # fmt: skip
SCREEN = (1280, 900)


def open_in_chromium(page: Path, screenshot: Path | None = None) -> PageInBrowser:
    """Open ``page`` in headless Chromium through its WebDriver (Debian's chromium and chromium-driver, driven by
    selenium), read every image's load state and the console's errors, and save the first screen to ``screenshot``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = require_tool("chromium")
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(require_tool("chromedriver")), options=options)
    try:  # the viewport itself is the screen (a window's size would include the browser's own frame)
        width, height = SCREEN
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        driver.get(page.resolve().as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => "
            "[i.src.startsWith('data:') ? i.src.slice(0, 40) : i.src, i.complete && i.naturalWidth > 0])"
        )
        errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        if screenshot is not None:
            driver.save_screenshot(str(screenshot))
        return PageInBrowser([(src, bool(ok)) for src, ok in images], errors)
    finally:
        driver.quit()


def blocks_from_openmetrics(promtool: str, text: str, directory: Path) -> Path:
    """Load ``text`` (OpenMetrics with explicit timestamps) into TSDB blocks with ``promtool tsdb create-blocks-from
    openmetrics``, under ``directory/prometheus/data`` where a ``Prometheus`` started on ``directory/prometheus``
    reads them; the data folder. Every sample's time is the one written."""
    source = directory / "series.om"
    source.write_text(text, encoding="utf-8")
    data = directory / "prometheus" / "data"
    data.mkdir(parents=True)
    load = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True, text=True, timeout=PATIENCE_S,
    )  # fmt: skip
    assert load.returncode == 0, load.stdout + load.stderr
    return data
