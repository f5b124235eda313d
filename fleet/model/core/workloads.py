"""Benchmark workload definitions: one folder per workload under ``workloads/``.

A folder holds ``workload.yaml`` (what to run and what metrics it yields), ``mtail/*.mtail`` (the programs
that turn its log lines into Prometheus metrics), ``sample.log`` (a real log, used by the tests) and optional
``files/`` (small scripts mounted into the pod). Adding a workload is a new folder plus a line in the
policy file.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pydantic

from fleet.model.core.errors import InputError, Problem
from fleet.model.core.input_files import read_input_text, shown_path
from fleet.model.core.quantity import parse_quantity
from fleet.model.core.validation import StrictModel, validate_document
from fleet.model.core.yaml_source import read_yaml

WORKLOADS_DIR = Path(__file__).resolve().parents[3] / "workloads"
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Labels the fleet puts on every benchmark series (the PodMonitor's podTargetLabels): a program must not export them.
FLEET_LABELS = ("workload", "gpu", "cluster", "cloud")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MetricSpec(StrictModel):
    """A metric the workload's mtail programs export."""

    name: str = pydantic.Field(
        description="The metric's name as the mtail program exports it (a counter ends in _total)."
    )
    type: Literal["gauge", "counter", "histogram"] = pydantic.Field(
        description="gauge, counter or histogram, as the program declares it."
    )
    help: str = pydantic.Field(description="What it measures, in words (the dashboards show it).")
    labels: list[str] = pydantic.Field(
        default_factory=list,
        description=(
            "Its labels, as the program's `by` names them (not workload, gpu, cluster or cloud: the fleet sets those)."
        ),
    )
    # false for a metric the sample's run does not produce, such as a counter of errors: the checks then do not look
    # for it in the sample log's metrics (the program must still export it)
    in_sample: bool = pydantic.Field(
        default=True,
        description=(
            "false for a metric the sample's run does not produce, such as a counter of "
            "errors: the checks then do not look for it in the sample log's metrics."
        ),
    )

    @pydantic.field_validator("name")
    @classmethod
    def _prometheus_name(cls, v: str) -> str:
        if not METRIC_NAME.match(v):
            raise ValueError(f"{v!r} is not a valid Prometheus metric name")
        return v

    @pydantic.field_validator("labels")
    @classmethod
    def _no_fleet_label(cls, v: list[str]) -> list[str]:
        clash = sorted(set(v) & set(FLEET_LABELS))
        if clash:
            raise ValueError(
                f"label(s) {', '.join(clash)} are set by the fleet on every series ({', '.join(FLEET_LABELS)}): "
                "rename them in the mtail program"
            )
        return v

    @pydantic.model_validator(mode="after")
    def _counter_suffix(self) -> MetricSpec:
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name!r} must end in _total")
        return self


class Headline(StrictModel):
    """The one number reports compare across cards, and which way is better."""

    metric: str = pydantic.Field(description="The declared metric the reports compare across cards.")
    unit: str = pydantic.Field(description="Its unit, as the reports show it (s, events/s).")
    higher_is_better: bool = pydantic.Field(
        default=True, description="Whether a higher value is better (throughput) or a lower one (a duration)."
    )
    match: dict[str, str] = pydantic.Field(
        default_factory=dict,
        description=(
            "Label values that pick the headline's series, such as a stage; each must appear in the sample log."
        ),
    )


class Resources(StrictModel):
    """CPU and memory per pod (Kubernetes quantities); the accelerator count is separate."""

    cpu_request: str = pydantic.Field(description="CPU the pod requests (a Kubernetes quantity such as 500m or 2).")
    memory_request: str = pydantic.Field(description="Memory the pod requests (such as 8Gi).")
    cpu_limit: str = pydantic.Field(description="CPU the pod may use at most.")
    memory_limit: str = pydantic.Field(description="Memory the pod may use at most.")

    @pydantic.field_validator("*", mode="before")
    @classmethod
    def _quantity(cls, v: object) -> str:
        # YAML reads `cpu_request: 0.5` as a number; Kubernetes takes it, and so do we, as its quantity string
        text = str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
        if not isinstance(text, str):
            raise ValueError(f"{v!r} is not a Kubernetes quantity such as 500m, 2, 8Gi or 1e3")
        if parse_quantity(text) < 0:
            raise ValueError(f"{text!r} is negative: Kubernetes refuses negative resources")
        return text

    @pydantic.model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        for what, request, limit in (
            ("cpu", self.cpu_request, self.cpu_limit),
            ("memory", self.memory_request, self.memory_limit),
        ):
            if parse_quantity(request) > parse_quantity(limit):
                raise ValueError(f"{what}_request {request} exceeds {what}_limit {limit}: Kubernetes rejects the pod")
        return self


class DataVolume(StrictModel):
    """Input data mounted into the workload container."""

    name: str = pydantic.Field(description="The volume's name in the pod.")
    mount_path: str = pydantic.Field(description="Where the workload container sees it.")
    claim_name: str = pydantic.Field(
        default="", description="An existing PersistentVolumeClaim; empty: a scratch emptyDir."
    )
    size_limit: str = pydantic.Field(default="", description="The scratch emptyDir's size limit (such as 10Gi).")
    read_only: bool = pydantic.Field(default=False, description="Mounted read-only.")


class EgressRule(StrictModel):
    """A destination the workload's pods may open connections to: benchmark pods may reach DNS and these only
    (where the cluster enforces NetworkPolicy); the instance metadata address stays out of any range."""

    cidr: str = pydantic.Field(description="A network the pods may connect to, such as 188.184.0.0/16.")
    ports: list[int] = pydantic.Field(description="Its TCP ports.", min_length=1)

    @pydantic.field_validator("cidr")
    @classmethod
    def _network(cls, v: str) -> str:
        try:
            return str(ipaddress.ip_network(v, strict=True))
        except ValueError as exc:
            raise ValueError(f"{v!r} is not a network address such as 0.0.0.0/0 or 188.184.0.0/16 ({exc})") from None

    @pydantic.field_validator("ports")
    @classmethod
    def _ports(cls, v: list[int]) -> list[int]:
        bad = [n for n in v if not 0 < n < 65536]
        if bad:
            raise ValueError(f"{bad} are not TCP ports (1 to 65535)")
        return v


# The labels a distributed workload's epoch counters carry: the job's accelerator count, the worker (process) and the
# JobSet restart attempt, so that the report can tell per-epoch time per accelerator count (fleet/report/sweeps.py).
SWEEP_LABELS = ("accelerators", "worker", "attempt")


class Distributed(StrictModel):
    """How a workload runs as one distributed training job over many accelerators (a scaling sweep point)."""

    framework: Literal["jax"] = pydantic.Field(
        description="Kubeflow Trainer ML policy of the job's runtime (the fleet's TrainingRuntime)."
    )
    restarts: int = pydantic.Field(
        default=3, ge=0, le=20, description="Times the whole job restarts after a worker fails (JobSet maxRestarts)."
    )
    epoch_seconds: str = pydantic.Field(description="Counter of timed epoch seconds, by accelerators/worker/attempt.")
    epochs: str = pydantic.Field(description="Counter of timed epochs, by accelerators/worker/attempt.")
    env_by_kind: dict[str, dict[str, str]] = pydantic.Field(
        default_factory=dict, description="Extra environment per accelerator kind (e.g. JAX_PLATFORMS)."
    )
    checkpoint_dir: str = pydantic.Field(
        default="", description="Where the code saves and resumes (GPUFLEET_CHECKPOINT_DIR); empty: no checkpoints."
    )


class WorkloadSpec(StrictModel):
    """What ``workload.yaml`` holds."""

    name: str = pydantic.Field(description="The workload's name: its folder's, a DNS label of at most 40 characters.")
    description: str = pydantic.Field(description="What it runs, in words.")
    # The image, named relative to the fleet's registry (the policy's `registry`: pods pull <registry>/<image>); one
    # written with a registry host of its own must lie inside it (fleet.model.core.registry)
    image: str = pydantic.Field(
        description=(
            "The image, named relative to the policy's registry (pods pull "
            "<registry>/<image>), pinned by tag or digest."
        )
    )
    # Where the image is published when the fleet does not build it: the images workflow copies it, digest
    # unchanged, to `image` in the fleet's registry (as components/kubernetes/images.yaml does for its own).
    upstream: str = pydantic.Field(
        default="",
        description=(
            "Where the image is published when the fleet does not build it, by an exact "
            "version: the images workflow copies it to `image`."
        ),
    )
    command: list[str] = pydantic.Field(description="The container's command.", min_length=1)
    args: list[str] = pydantic.Field(default_factory=list, description="Its arguments.")
    accelerators: int = pydantic.Field(description="Cards each pod asks for.", default=1, ge=1, le=8)
    # The accelerator kinds (Kubernetes extended resources) the workload's code runs on: `all` in the policy means
    # every card of these kinds, and a card of another kind (a TPU for CUDA code) is refused.
    accelerator_kinds: list[str] = pydantic.Field(
        description=("The Kubernetes resources its code runs on: `all` in the policy means every card of these kinds."),
        default=["nvidia.com/gpu"],
        min_length=1,
    )
    resources: Resources = pydantic.Field(description="CPU and memory per pod.")
    env: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Environment variables (never credentials: secret_env)."
    )
    # What the fleet tells the pod beyond BENCHMARK_LOG, _CLUSTER and _GPU, only when asked (a new variable changes
    # the pod spec, and so the Job's name: every benchmark would run again): `accelerator` sets
    # BENCHMARK_ACCELERATOR (the pool's resource name), `job_name` sets BENCHMARK_JOB_NAME (the Job's name, which for
    # a CronJob's run carries its scheduled minute).
    fleet_env: list[Literal["accelerator", "job_name"]] = pydantic.Field(
        default_factory=list,
        description=(
            "What the fleet tells the pod besides BENCHMARK_LOG, _CLUSTER and _GPU: "
            "accelerator (BENCHMARK_ACCELERATOR), job_name (BENCHMARK_JOB_NAME)."
        ),
    )
    # Environment variables whose values are credentials: they come from the Secret ``<name>-credentials`` in
    # the benchmark namespace (filled from the stack's secret config), never from this committed file.
    secret_env: list[str] = pydantic.Field(
        default_factory=list,
        description=(
            "Variables whose values are credentials, read from the Secret <name>-credentials "
            "each stack makes from its secret config."
        ),
    )
    timeout_seconds: int = pydantic.Field(description="The Job's deadline (activeDeadlineSeconds).", ge=60)
    backoff_limit: int = pydantic.Field(description="Retries of a failed pod.", default=1, ge=0, le=6)
    # Only for the Jobs a schedule (CronJob) starts; a one-off Job is managed by Pulumi and kept (see benchmark.py).
    ttl_seconds_after_finished: int = pydantic.Field(
        description="How long a CronJob's finished Jobs are kept (a one-off Job is kept).", default=86400, ge=0
    )
    volumes: list[DataVolume] = pydantic.Field(
        default_factory=list, description="Input data mounted into the container."
    )
    # The user the workload container runs as: the benchmark namespace enforces the `restricted` Pod Security
    # level, which refuses root. Check the image's USER upstream and that this uid can write where the code does.
    run_as_user: int = pydantic.Field(
        description=(
            "The user the container runs as (the benchmarks namespace refuses root); a "
            "Dockerfile's last USER must be it."
        ),
        default=1000,
        ge=1,
    )
    # Only for an image that cannot run as non-root: why. Its pods then run as root in the `benchmarks-root`
    # namespace (Pod Security `baseline`), still with every capability dropped and no privilege escalation.
    needs_root: str = pydantic.Field(
        default="",
        description=(
            "Only for an image that cannot run as non-root: why. Its pods then run in "
            "benchmarks-root (Pod Security baseline)."
        ),
    )
    # Where the pods may connect besides DNS (data downloads, result uploads); none by default.
    egress: list[EgressRule] = pydantic.Field(
        default_factory=list, description="Where the pods may connect besides DNS; none by default."
    )
    metrics: list[MetricSpec] = pydantic.Field(
        description="Every metric the mtail program (mtail/<name>.mtail) exports.", min_length=1
    )
    headline: Headline = pydantic.Field(description="The one number the reports compare across cards.")
    # Set for code that runs as one job over many accelerators and nodes: the policy may then give it a `scale`.
    distributed: Distributed | None = pydantic.Field(
        default=None,
        description=("For code that runs as one job over many accelerators: the policy may then give it a scale."),
    )

    @pydantic.field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS_LABEL.match(v) or len(v) > 40:
            raise ValueError(f"{v!r} must be a DNS-1123 label of at most 40 characters")
        return v

    @pydantic.field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: list[str], info: pydantic.ValidationInfo) -> list[str]:
        bad = [n for n in v if not ENV_NAME.match(n)]
        if bad:
            raise ValueError(f"{bad} are not environment variable names (letters, digits and _, no leading digit)")
        if len(set(v)) != len(v):
            raise ValueError(f"{sorted({n for n in v if v.count(n) > 1})} listed twice")
        clash = sorted(set(v) & set(info.data.get("env", {})))
        if clash:
            raise ValueError(f"{clash} also have a plain value under env: a credential must not be in this file")
        return v

    @pydantic.field_validator("image")
    @classmethod
    def _pinned(cls, v: str) -> str:
        if "@sha256:" in v:
            return v
        last = v.rsplit("/", 1)[-1]
        if ":" not in last:
            raise ValueError(f"image {v!r} has no tag: pin it by tag or digest")
        if last.endswith(":latest"):
            raise ValueError(f"image {v!r} uses the moving tag 'latest': pin it by tag or digest")
        return v

    # A field validator (not a model validator) so the problem is located at the `headline` key, and is
    # reported together with problems elsewhere in the file; `metrics` is declared before `headline`.
    @pydantic.field_validator("headline")
    @classmethod
    def _headline_declared(cls, v: Headline, info: pydantic.ValidationInfo) -> Headline:
        metrics = {m.name: m for m in info.data.get("metrics", [])}
        if not metrics:
            return v  # metrics itself is invalid and reported
        if v.metric not in metrics:
            raise ValueError(f"headline metric {v.metric!r} is not among the declared metrics")
        unknown = sorted(set(v.match) - set(metrics[v.metric].labels))
        if unknown:
            raise ValueError(f"headline match uses {unknown}, which are not labels of {v.metric!r}")
        return v

    @pydantic.field_validator("distributed")
    @classmethod
    def _sweep_counters(cls, v: Distributed | None, info: pydantic.ValidationInfo) -> Distributed | None:
        metrics = {m.name: m for m in info.data.get("metrics", [])}
        if v is None or not metrics:
            return v
        for key in ("epoch_seconds", "epochs"):
            name = getattr(v, key)
            metric = metrics.get(name)
            if metric is None or metric.type != "counter" or not set(SWEEP_LABELS) <= set(metric.labels):
                raise ValueError(
                    f"{key}: {name!r} must be a declared counter with the labels {', '.join(SWEEP_LABELS)}"
                )
        kinds = set(info.data.get("accelerator_kinds", []))
        unknown = sorted(set(v.env_by_kind) - kinds)
        if unknown:
            raise ValueError(f"env_by_kind names {unknown}, which are not among accelerator_kinds")
        return v


@dataclass(frozen=True)
class Workload:
    """A loaded workload: its spec plus the files beside it."""

    spec: WorkloadSpec
    folder: Path
    mtail_programs: dict[str, str]  # file name -> program text
    files: dict[str, str]  # file name -> content, mounted at FILES_MOUNT

    @property
    def name(self) -> str:
        """The workload's name (also its folder's)."""
        return self.spec.name

    @property
    def credentials_secret(self) -> str:
        """Name of the Kubernetes Secret its ``secret_env`` variables are read from (in the benchmark namespace)."""
        return f"{self.spec.name}-credentials"

    @property
    def sample_log(self) -> Path:
        """The real sample log the tests run the mtail programs over."""
        return self.folder / "sample.log"


FILES_MOUNT = "/opt/gpu-fleet"


def _read_files(paths: list[Path], problems: list[Problem]) -> dict[str, str]:
    """The text of each regular file by name. A symbolic link is refused (it could point at any file of the machine
    that renders or deploys, and its content would end up in a ConfigMap), and so is a file that is not UTF-8."""
    out: dict[str, str] = {}
    for path in paths:
        if path.is_symlink():
            problems.append(Problem(str(path), 1, "", "a symbolic link: put the file itself in the workload folder"))
        elif path.exists():
            try:
                out[path.name] = read_input_text(path)
            except InputError as exc:
                problems.extend(exc.problems)
    return out


def load_workload(folder: Path) -> Workload:
    """Read one workload folder, raising ``InputError`` naming the file on any problem."""
    doc = read_yaml(folder / "workload.yaml")
    spec = validate_document(WorkloadSpec, doc)
    problems = []
    if spec.name != folder.name:
        problems.append(doc.problem(("name",), f"must equal the folder name {folder.name!r}"))
    for sub in ("mtail", "files"):
        if (folder / sub).is_symlink():
            problems.append(Problem(str(folder / sub), 1, "", "a symbolic link: put the folder itself here"))
    if problems:
        raise InputError(problems)
    found = sorted((folder / "mtail").glob("*.mtail"))
    programs = _read_files(found, problems)
    if not found:  # one that is there but unreadable has its own problem (not UTF-8, a folder, too large)
        problems.append(
            Problem(shown_path(folder / "mtail"), 1, "", "no *.mtail program: the workload would export no metric")
        )
    files_dir = folder / "files"
    files = _read_files(sorted(files_dir.iterdir()), problems) if files_dir.is_dir() else {}
    if problems:
        raise InputError(problems)
    return Workload(spec=spec, folder=folder, mtail_programs=programs, files=files)


#: The pool probe, the fleet's own workload: workload.yaml, mtail/probe.mtail, files/probe.sh and a real sample.log.
PROBE_DIR = Path(__file__).resolve().parents[1] / "probes" / "probe"


def load_probe_workload() -> Workload:
    """The pool probe (fleet/model/probes/probe), which the fleet runs on every probed pool."""
    return load_workload(PROBE_DIR)


def with_probe(workloads: dict[str, Workload]) -> dict[str, Workload]:
    """``workloads`` and the pool probe: every workload whose image the fleet copies or builds."""
    probe = load_probe_workload()
    return {**workloads, probe.name: probe}


@lru_cache(maxsize=4)
def load_workloads(root: Path = WORKLOADS_DIR) -> dict[str, Workload]:
    """Every workload folder under ``root``, by name; all problems of all folders at once."""
    out: dict[str, Workload] = {}
    problems: list[Problem] = []
    for folder in sorted(p for p in root.iterdir() if (p / "workload.yaml").exists()) if root.is_dir() else []:
        try:
            wl = load_workload(folder)
            out[wl.name] = wl
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return out


def _tokens(name: str) -> set[str]:
    words = [w for w in name.split("_") if w and w not in ("total", "seconds", "per", "second")]
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


def runs_counter(spec: WorkloadSpec) -> str | None:
    """The counter that counts the workload's results: of its declared counters, the one whose name shares
    most words with the headline metric (``gan3d_epochs_total`` for ``gan3d_epoch_duration_seconds``, not
    ``gan3d_batches_total``); the first declared on a tie; None if it declares no counter. A distributed workload's
    results are its epochs (``distributed.epochs``)."""
    if spec.distributed is not None:
        return spec.distributed.epochs
    headline = _tokens(spec.headline.metric)
    best: tuple[int, str] | None = None
    for metric in spec.metrics:
        if metric.type != "counter":
            continue
        score = len(_tokens(metric.name.removesuffix("_total")) & headline)
        if best is None or score > best[0]:
            best = (score, metric.name)
    return best[1] if best else None
