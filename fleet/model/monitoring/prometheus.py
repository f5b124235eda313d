"""The Prometheus side of federation, as plain dicts: leaf web config and rules, central scrape jobs and alerts.

Every cluster runs its own Prometheus (kube-prometheus-stack). A central Prometheus pulls from each one,
through ``/federate``, only what the reports need:

* the benchmark metrics the workloads declare (``workload.yaml`` ``metrics``; a histogram is pulled as its
  ``_bucket``, ``_sum`` and ``_count`` series), and
* a few ``gpufleet:*`` recording rules that each leaf evaluates over dcgm-exporter's per-GPU metrics, so
  the GPU data crosses the wire already aggregated per card model and pod.

There is never a match-all selector: every ``match[]`` names its metric (a match-all federation of a
kube-prometheus-stack is hundreds of MB per scrape and times out).

The leaf is reached over mutual TLS: the Prometheus Operator's ``Prometheus`` resource supports only TLS in
``spec.web`` (no basic auth, prometheus-operator #4200), so each leaf serves HTTPS and requires a client
certificate signed by the fleet's CA. Certificates are made elsewhere (pulumi-tls); this module only takes
the paths where they are mounted.

Each leaf sets the external labels ``cluster`` and ``cloud``: ``/federate`` attaches them to every series it
returns, and the central job uses ``honor_labels: true`` so they (and the leaf's ``job``/``instance``)
are kept rather than renamed to ``exported_*``. The central job's own target labels carry the same
``cluster``/``cloud``, so ``up`` of a federation job says which cluster is unreachable. A leaf does not decide
its own ``cluster`` and ``cloud`` on the central, though: ``/federate`` attaches an external label only to a
series that lacks it, and ``honor_labels`` keeps what the leaf sent, so a series exported with another cluster's
labels (a compromised leaf or benchmark pod) would be booked to that cluster. The job's
``metric_relabel_configs`` therefore set both on every federated sample from the job's own configuration (they
run after the scrape, on the merged labels; an empty ``source_labels`` with the default regex always matches).

Staleness does not cross federation (samples come with explicit timestamps): the central keeps a series'
last value for up to 5 minutes after the leaf stops exporting it. Reports should query
``max_over_time``/``last_over_time`` over the run window, never instant values.

All functions are pure: they return dicts (render them with :func:`to_yaml`) and raise ``ValueError`` on
input that would produce a config Prometheus rejects or a federation that silently pulls nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from fleet.model.core.workloads import MetricSpec, Workload
from fleet.model.monitoring.rule_files import fill, rule_file

#: Prefix of every central federation job; the alert rules select on it.
FEDERATE_JOB_PREFIX = "federate-"

DEFAULT_INTERVAL = "60s"
DEFAULT_TIMEOUT = "45s"
#: Benchmark series are few (tens per workload and card) and the GPU aggregates one per card model and
#: pod: 20,000 samples per leaf leaves an order of magnitude of headroom while stopping a runaway selector.
DEFAULT_SAMPLE_LIMIT = 20_000
DEFAULT_BODY_SIZE_LIMIT = "16MB"

#: Labels the leaf GPU aggregates keep: the card model and the pod using it (empty for an idle GPU).
GPU_AGGREGATION_LABELS: tuple[str, ...] = ("modelName", "namespace", "pod")
#: Labels that identify one benchmark series on the central Prometheus: leaf external label ``cluster``
#: plus the ``workload`` and ``gpu`` pod labels the PodMonitor copies onto the mtail metrics.
BENCHMARK_IDENTITY_LABELS: tuple[str, ...] = ("cluster", "workload", "gpu")

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# A selector that names its metric, optionally narrowed by label matchers: never match-all.
_NAMED_SELECTOR = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?$")
_CLUSTER = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")
_DURATION = re.compile(
    r"^((?P<y>[0-9]+)y)?((?P<w>[0-9]+)w)?((?P<d>[0-9]+)d)?((?P<h>[0-9]+)h)?((?P<m>[0-9]+)m)?((?P<s>[0-9]+)s)?((?P<ms>[0-9]+)ms)?$"
)
_DURATION_UNITS = {"y": 365 * 86400.0, "w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_BYTES = re.compile(r"^[0-9]+(B|KB|MB|GB|TB|PB|EB)$")

#: The leaf's GPU recording rules, a Prometheus rule file (fleet/model/monitoring/rules/).
LEAF_RULES_FILE = "leaf-gpu-aggregates.yaml"
#: The central's alert rules, with ${name} placeholders central_alert_rules fills.
CENTRAL_RULES_FILE = "central-alerts.yaml"
#: The central's probe alerts, after one group of per-pool expectations that probe_alert_rules writes.
PROBE_RULES_FILE = "central-probe-alerts.yaml"
#: Central recording rules, one series per probed pool: how long "no probe result" is normal, and the slowest
#: acceptable scale-up, in seconds (labels cluster, cloud, gpu).
PROBE_STALE_RULE = "gpufleet:probe_stale_after_seconds"
PROBE_SCALE_UP_RULE = "gpufleet:probe_scaleup_alert_seconds"
#: Names of the leaf recording rules that federation pulls for GPU data.
GPU_RECORDING_RULES: tuple[str, ...] = tuple(
    rule["record"] for group in rule_file(LEAF_RULES_FILE)["groups"] for rule in group["rules"]
)
#: What the central federates of the GitLab runners' own metrics (gitlab-runner commands/builds_helper.go and
#: helpers/prometheus/failures_collector.go): jobs started, jobs failed by reason, and the job duration histogram's
#: sum and count (its buckets stay on the leaf).
RUNNER_SERIES: tuple[str, ...] = (
    "gitlab_runner_jobs_total",
    "gitlab_runner_failed_jobs_total",
    "gitlab_runner_job_duration_seconds_sum",
    "gitlab_runner_job_duration_seconds_count",
)
#: Central recording rule: per (cluster, workload, gpu), the timestamp of the newest benchmark sample.
BENCHMARK_LAST_SAMPLE_RULE = "gpufleet:benchmark_last_sample_timestamp_seconds:max"


def duration_seconds(duration: str) -> float:
    """Seconds in a Prometheus duration such as ``45s``, ``1m30s``, ``500ms`` or ``7d``; ``ValueError`` otherwise."""
    match = _DURATION.match(duration) if isinstance(duration, str) and duration else None
    if not match or not any(match.groupdict().values()):
        raise ValueError(f"{duration!r} is not a Prometheus duration such as 45s, 1m30s or 7d")
    return sum(int(v) * _DURATION_UNITS[k] for k, v in match.groupdict().items() if v)


def _check_label_name(name: str) -> str:
    if not _LABEL_NAME.match(name) or name.startswith("__"):
        raise ValueError(f"{name!r} is not a valid label name")
    return name


def workload_metrics(workloads: Iterable[Workload] | Mapping[str, Workload]) -> list[MetricSpec]:
    """Every metric the workloads declare, deduplicated by name (pass ``load_workloads()`` or its values).

    Raises ``ValueError`` when two workloads declare the same name with different types: on one
    Prometheus that is a real conflict (a gauge and a histogram cannot share a name).
    """
    items = workloads.values() if isinstance(workloads, Mapping) else workloads
    seen: dict[str, tuple[MetricSpec, str]] = {}
    for wl in items:
        for metric in wl.spec.metrics:
            prior = seen.get(metric.name)
            if prior is None:
                seen[metric.name] = (metric, wl.name)
            elif prior[0].type != metric.type:
                raise ValueError(
                    f"metric {metric.name!r} is a {prior[0].type} in workload {prior[1]!r} "
                    f"but a {metric.type} in workload {wl.name!r}"
                )
    return [spec for spec, _ in seen.values()]


def series_names(metric: MetricSpec) -> list[str]:
    """The series names a metric is exposed as: a histogram's ``_bucket``/``_sum``/``_count``, else its name."""
    if metric.type == "histogram":
        return [f"{metric.name}_bucket", f"{metric.name}_sum", f"{metric.name}_count"]
    return [metric.name]


def match_selectors(metrics: Iterable[MetricSpec], gpu_aggregates: bool = True, extra: Iterable[str] = ()) -> list[str]:
    """The ``match[]`` selectors of a federation job: one bare metric name per selected series name.

    Covers each declared benchmark metric (histograms as ``_bucket``, ``_sum`` and ``_count``) and, unless
    ``gpu_aggregates`` is false, the leaf's GPU recording rules (:data:`GPU_RECORDING_RULES`). Bare names
    can never match everything. The list is sorted and deduplicated, so the rendered config is stable.
    """
    wanted = [name for metric in metrics for name in series_names(metric)]
    wanted += extra  # series named as such (the runners' metrics)
    for name in wanted:
        if not METRIC_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid Prometheus metric name")
    names = set(wanted)
    if gpu_aggregates:
        names.update(GPU_RECORDING_RULES)
    return sorted(names)


def check_selectors(selectors: Sequence[str]) -> list[str]:
    """The selectors, deduplicated in order, or ``ValueError`` if empty or if any does not name its metric.

    ``/federate`` with no ``match[]`` answers 200 with an empty body (a silent failure) and a selector
    such as ``{__name__=~".+"}`` pulls the whole leaf: both are refused here.
    """
    if isinstance(selectors, str):
        raise TypeError("selectors must be a list of selectors, not one string")
    out: list[str] = []
    for sel in selectors:
        if not isinstance(sel, str) or not _NAMED_SELECTOR.match(sel):
            raise ValueError(f"federation selector {sel!r} must start with a metric name (no match-all selectors)")
        if sel not in out:
            out.append(sel)
    if not out:
        raise ValueError("no federation selector: /federate without match[] returns nothing, silently")
    return out


@dataclass(frozen=True)
class FederationTarget:
    """One leaf Prometheus as the central one reaches it.

    ``address`` is ``host:port`` (the leaf's LoadBalancer or Ingress); ``server_name`` is the DNS name
    in the leaf's serving certificate (checked against it, whatever the address); the three files are
    the fleet CA and the central's client certificate and key, as mounted in the central Prometheus.
    """

    cluster: str
    cloud: str
    address: str
    server_name: str
    ca_file: str
    cert_file: str
    key_file: str

    def __post_init__(self) -> None:
        if not _CLUSTER.match(self.cluster) or len(self.cluster) > 63:
            raise ValueError(f"cluster {self.cluster!r} must be a DNS-1123 label")
        if not self.cloud or not _CLUSTER.match(self.cloud):
            raise ValueError(f"cloud {self.cloud!r} must be a lower-case name such as gcp or aws")
        match = _HOST_PORT.match(self.address)
        if not match or not 0 < int(match.group(2)) < 65536:
            raise ValueError(f"address {self.address!r} must be host:port")
        if not self.server_name:
            raise ValueError(f"cluster {self.cluster!r}: server_name is required (the name in the leaf's certificate)")
        for field in ("ca_file", "cert_file", "key_file"):
            if not getattr(self, field):
                raise ValueError(f"cluster {self.cluster!r}: {field} is required for mutual TLS")

    @property
    def job_name(self) -> str:
        """The central scrape job's name: ``federate-<cluster>``."""
        return f"{FEDERATE_JOB_PREFIX}{self.cluster}"


def federation_timeout(interval: str) -> str:
    """The federation scrape's timeout for ``interval``: ``DEFAULT_TIMEOUT`` (45s), or three quarters of a shorter
    interval in whole seconds (Prometheus refuses a timeout above the interval, and equal leaves no slack)."""
    seconds = min(duration_seconds(DEFAULT_TIMEOUT), duration_seconds(interval) * 3 / 4)
    return f"{max(1, math.floor(seconds))}s"


def federation_scrape_config(
    target: FederationTarget,
    selectors: Sequence[str],
    interval: str = DEFAULT_INTERVAL,
    timeout: str = DEFAULT_TIMEOUT,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    body_size_limit: str = DEFAULT_BODY_SIZE_LIMIT,
) -> dict[str, Any]:
    """The central Prometheus' scrape job for one leaf: ``/federate`` over mutual TLS, labels honoured.

    ``timeout`` must be below ``interval`` (Prometheus rejects a timeout above it; equal leaves no slack),
    ``sample_limit`` and ``body_size_limit`` fail the scrape (``up`` 0) rather than ingest a runaway
    payload. The target labels ``cluster``/``cloud`` label ``up``; with ``honor_labels`` the federated
    series keep the leaf's own external labels, which say the same.
    """
    sels = check_selectors(selectors)
    if duration_seconds(timeout) >= duration_seconds(interval):
        raise ValueError(f"scrape timeout {timeout} must be below the scrape interval {interval}")
    if not isinstance(sample_limit, int) or isinstance(sample_limit, bool) or sample_limit <= 0:
        raise ValueError(f"sample_limit must be a positive integer (0 would mean no limit), not {sample_limit!r}")
    if not _BYTES.match(body_size_limit) or int(re.sub(r"\D", "", body_size_limit)) == 0:
        raise ValueError(f"body_size_limit {body_size_limit!r} must be a positive size such as 16MB (0 is no limit)")
    return {
        "job_name": target.job_name,
        "honor_labels": True,
        "metrics_path": "/federate",
        "scheme": "https",
        "params": {"match[]": sels},
        "scrape_interval": interval,
        "scrape_timeout": timeout,
        "sample_limit": sample_limit,
        "body_size_limit": body_size_limit,
        "tls_config": {
            "ca_file": target.ca_file,
            "cert_file": target.cert_file,
            "key_file": target.key_file,
            "server_name": target.server_name,
            "insecure_skip_verify": False,
        },
        "static_configs": [{"targets": [target.address], "labels": {"cluster": target.cluster, "cloud": target.cloud}}],
        "metric_relabel_configs": [
            {"action": "replace", "target_label": "cluster", "replacement": target.cluster},
            {"action": "replace", "target_label": "cloud", "replacement": target.cloud},
        ],
    }


def leaf_web_config(cert_file: str, key_file: str, client_ca_file: str) -> dict[str, Any]:
    """A leaf Prometheus' ``--web.config.file``: HTTPS that requires a client certificate from the fleet CA.

    This is what the Prometheus Operator renders from ``spec.web.tlsConfig`` (cert, keySecret, client_ca,
    ``clientAuthType: RequireAndVerifyClientCert``). Every endpoint, health checks included, then needs a
    client certificate: probes must use TCP or the operator's own config-reloader path.
    """
    for name, value in (("cert_file", cert_file), ("key_file", key_file), ("client_ca_file", client_ca_file)):
        if not value:
            raise ValueError(f"{name} is required")
    return {
        "tls_server_config": {
            "cert_file": cert_file,
            "key_file": key_file,
            "client_ca_file": client_ca_file,
            "client_auth_type": "RequireAndVerifyClientCert",
            "min_version": "TLS12",
        }
    }


# A ServiceMonitor that scrapes with the Prometheus' own ServiceAccount token names this scrape class instead of the
# endpoint field ``bearerTokenFile``, deprecated ("Deprecated: use `authorization` instead", prometheus-operator
# v0.86.2 pkg/apis/monitoring/v1/types.go Endpoint, the operator kube-prometheus-stack 79.5.0 runs). A ServiceMonitor's
# own ``authorization`` reads only a Secret (SafeAuthorization), which would mean a long-lived token Secret; a scrape
# class, defined by whoever owns the Prometheus, may read a file (``authorization.credentialsFile``), and the operator
# applies it to every endpoint of a ServiceMonitor naming it that has no authorization of its own (pkg/prometheus/
# promcfg.go mergeSafeAuthorizationWithScrapeClass; Documentation/developer/scrapeclass.md). So Prometheus keeps
# sending the projected, rotated token the kubelet mounts (the operator mounts it unless automountServiceAccountToken
# is false: prometheus_types.go), as ``authorization: {type: Bearer, credentials_file: ...}``.
SERVICE_ACCOUNT_SCRAPE_CLASS = "service-account-token"
SERVICE_ACCOUNT_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def scrape_classes() -> list[dict[str, Any]]:
    """The Prometheus' ``scrapeClasses``: :data:`SERVICE_ACCOUNT_SCRAPE_CLASS`, not the default (a ServiceMonitor
    uses it only by naming it in ``scrapeClass``)."""
    return [
        {
            "name": SERVICE_ACCOUNT_SCRAPE_CLASS,
            "default": False,
            "authorization": {"type": "Bearer", "credentialsFile": SERVICE_ACCOUNT_TOKEN_FILE},
        }
    ]


def leaf_external_labels(cluster: str, cloud: str) -> dict[str, str]:
    """The leaf's ``external_labels``: unique per cluster, so federated series never collide."""
    if not _CLUSTER.match(cluster) or not _CLUSTER.match(cloud):
        raise ValueError(f"cluster {cluster!r} and cloud {cloud!r} must be lower-case DNS labels")
    return {"cluster": cluster, "cloud": cloud}


def leaf_recording_rules(interval: str | None = None) -> dict[str, Any]:
    """The leaf's rule file (fleet/model/monitoring/rules/leaf-gpu-aggregates.yaml): dcgm-exporter metrics aggregated
    per card model and pod (``gpufleet:*``), evaluated every ``interval`` when given.

    The dcgm-exporter ServiceMonitor must honour its labels, or ``pod`` arrives as ``exported_pod``.
    """
    rules = rule_file(LEAF_RULES_FILE)
    if interval is not None:
        duration_seconds(interval)
        group = rules["groups"][0]
        rules["groups"][0] = {"name": group["name"], "interval": interval, **group}
    return rules


def _signal_series(metrics: Iterable[MetricSpec]) -> list[str]:
    """One series name per benchmark metric that shows the benchmark is alive (a histogram's ``_count``)."""
    out = set()
    for metric in metrics:
        out.add(f"{metric.name}_count" if metric.type == "histogram" else metric.name)
    return sorted(out)


def central_alert_rules(
    benchmark_metrics: Iterable[MetricSpec] = (),
    *,
    down_for: str = "5m",
    stale_after: str = "26h",
    lookback: str = "7d",
    scrape_timeout: str = DEFAULT_TIMEOUT,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
) -> dict[str, Any]:
    """The central Prometheus' rule file: federation health alerts and the benchmark freshness alert.

    * ``FederatedClusterDown``: a federation job's ``up`` is 0 for ``down_for`` (leaf unreachable, TLS
      refused, or a sample/body limit hit), labelled with the target's ``cluster`` and ``cloud``.
    * ``FederationScrapeSlow`` / ``FederationNearSampleLimit``: a federation scrape uses over 80% of
      ``scrape_timeout`` or of ``sample_limit`` for 15 minutes (pass the values the jobs use).
    * ``FederationLimitHit``: a scrape was refused by ``sample_limit`` or ``body_size_limit`` (the
      central's own counters: it must scrape itself, as kube-prometheus-stack does).
    * ``BenchmarkStoppedReporting``: a (cluster, workload, gpu) benchmark series seen within ``lookback``
      has had no new sample for over ``stale_after`` (see the rule's description). Omitted when no
      benchmark metric is given.
    """
    down_s, stale_s, lookback_s = (duration_seconds(d) for d in (down_for, stale_after, lookback))
    if lookback_s <= stale_s:
        raise ValueError(f"lookback {lookback} must be longer than stale_after {stale_after}")
    if down_s <= 0:
        raise ValueError("down_for must be positive")
    values = {
        "federation_jobs": f'job=~"{FEDERATE_JOB_PREFIX}.+"',
        "down_for": down_for,
        "slow_seconds": f"{0.8 * duration_seconds(scrape_timeout):g}",
        "scrape_timeout": scrape_timeout,
        "near_sample_limit": str(int(0.8 * sample_limit)),
        "sample_limit": str(sample_limit),
    }
    rules = rule_file(CENTRAL_RULES_FILE)
    signals = _signal_series(benchmark_metrics)
    if signals:
        values |= {
            "last_sample_rule": BENCHMARK_LAST_SAMPLE_RULE,
            "benchmark_labels": ", ".join(BENCHMARK_IDENTITY_LABELS),
            "benchmark_timestamps": " or ".join(
                f'label_replace(timestamp({name}), "metric", "{name}", "", "")' for name in signals
            ),
            "lookback": lookback,
            "stale_seconds": f"{stale_s:g}",
            "stale_after": stale_after,
        }
    else:
        rules["groups"] = [g for g in rules["groups"] if g["name"] != "gpufleet-benchmark-freshness"]
    return fill(rules, values, f"fleet/model/monitoring/rules/{CENTRAL_RULES_FILE}")


@dataclass(frozen=True)
class ProbeExpectation:
    """One probed pool as the central's probe alerts know it (from the policy file's resolved probes)."""

    cluster: str
    cloud: str
    gpu: str
    stale_after_seconds: float
    scale_up_alert_seconds: float


def _seconds(value: float) -> str:
    """A whole number of seconds as a Prometheus duration (``90195s``)."""
    return f"{math.ceil(value)}s"


def probe_alert_rules(expectations: Sequence[ProbeExpectation]) -> dict[str, Any]:
    """The central's probe rules: per probed pool, the two expectation records (whole seconds); then each pool's last
    run kept as state, and ProbeFailed, ProbeNotRun, ProbeNeverReported and ProbeSlowScaleUp over it
    (fleet/model/monitoring/rules/central-probe-alerts.yaml).

    ``ValueError`` for no pool, or a pool given twice.
    """
    if not expectations:
        raise ValueError("no probed pool: leave the probe rules out")
    seen: set[tuple[str, str]] = set()
    records: list[dict[str, Any]] = []
    for e in expectations:
        if (e.cluster, e.gpu) in seen:
            raise ValueError(f"the {e.gpu} pool of {e.cluster} is expected twice")
        seen.add((e.cluster, e.gpu))
        labels = {"cluster": e.cluster, "cloud": e.cloud, "gpu": e.gpu}
        for record, value in (
            (PROBE_STALE_RULE, e.stale_after_seconds),
            (PROBE_SCALE_UP_RULE, e.scale_up_alert_seconds),
        ):
            records.append({"record": record, "expr": f"vector({math.ceil(value)})", "labels": dict(labels)})
    values = {"never_reported_for": _seconds(max(e.stale_after_seconds for e in expectations))}
    alerts = fill(rule_file(PROBE_RULES_FILE), values, f"fleet/model/monitoring/rules/{PROBE_RULES_FILE}")
    return {"groups": [{"name": "gpufleet-probe-expectations", "rules": records}, *alerts["groups"]]}


def central_prometheus_config(
    targets: Iterable[FederationTarget],
    selectors: Sequence[str],
    external_labels: Mapping[str, str],
    *,
    rule_files: Sequence[str] = (),
    interval: str = DEFAULT_INTERVAL,
    timeout: str = DEFAULT_TIMEOUT,
    evaluation_interval: str = "1m",
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    body_size_limit: str = DEFAULT_BODY_SIZE_LIMIT,
    self_address: str | None = None,
) -> dict[str, Any]:
    """A complete ``prometheus.yml`` for the central Prometheus: one federation job per target cluster.

    ``external_labels`` identify the central itself (for example ``{"role": "central"}``) and must not
    use ``cluster``/``cloud``, which belong to the federated series. ``self_address`` adds a job that
    scrapes the central's own metrics (the FederationLimitHit alert reads them); kube-prometheus-stack
    already has one, so leave it ``None`` there.
    """
    jobs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for target in targets:
        if target.cluster in seen:
            raise ValueError(f"cluster {target.cluster!r} is federated twice")
        seen.add(target.cluster)
        jobs.append(federation_scrape_config(target, selectors, interval, timeout, sample_limit, body_size_limit))
    if not jobs:
        raise ValueError("no cluster to federate")
    labels = {_check_label_name(k): str(v) for k, v in external_labels.items()}
    clash = {"cluster", "cloud"} & labels.keys()
    if clash:
        raise ValueError(f"the central's external labels must not set {sorted(clash)}: federated series carry them")
    duration_seconds(evaluation_interval)
    if self_address is not None:
        if not _HOST_PORT.match(self_address):
            raise ValueError(f"self_address {self_address!r} must be host:port")
        jobs.insert(0, {"job_name": "prometheus", "static_configs": [{"targets": [self_address]}]})
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": timeout,
            "evaluation_interval": evaluation_interval,
            "external_labels": labels,
        },
        "rule_files": list(rule_files),
        "scrape_configs": jobs,
    }
    return config


def to_yaml(obj: Any) -> str:
    """YAML text of a config or rule dict, keys in the order built (as Prometheus' docs show them)."""
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)
