"""The pod contract: what the components build and the policy pack checks, in one place (both import it).

- Pool names: every cloud's GPU pool of a card is ``gpu-<card>`` (a node-group role on Magnum).
- Benchmark pods: their labels (the PodMonitor selects them by ``app.kubernetes.io/part-of`` and turns
  ``METRIC_LABELS`` into metric labels), their namespaces, and the Pod Security labels of the fleet's namespaces.
- Probes: the fleet's own workload (fleet/model/probes/probe), one CronJob per probed GPU pool, shaped like any
benchmark;
  ``PROBE_METRICS`` are the series its mtail program exports.
- The mtail sidecar: the workload appends its output to ``LOG_DIR/<workload>.log`` on a shared ``emptyDir``. An
  init container creates that file empty before anything else starts, because mtail reads a file it sees for the
  first time from its end: lines written before mtail opened the file would be lost.
"""

from __future__ import annotations

import re

POOL_PREFIX = "gpu-"
BENCHMARK_PART_OF = "gpu-fleet-benchmark"
METRIC_LABELS = ("workload", "gpu", "cluster", "cloud")
# The probe's metrics: pod creation (the CronJob's scheduled time) to running, 1 or 0, and when it ran.
PROBE_METRICS = (
    "gpufleet_probe_scaleup_seconds",
    "gpufleet_probe_success",
    "gpufleet_probe_last_run_timestamp_seconds",
)
# Where the clouds hand out credentials, besides 169.254.169.254 (every cloud's instance metadata): the ECS/EKS
# container credentials endpoint 169.254.170.2 (AWS docs, "Task IAM role", AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)
# and Azure's WireServer 168.63.129.16 (Microsoft Learn, "What is IP address 168.63.129.16?"). No egress rule of the
# fleet reaches them (the pack's namespace-default-deny-egress).
CREDENTIAL_ADDRESSES = ("169.254.169.254/32", "169.254.170.2/32", "168.63.129.16/32")
BENCHMARK_NAMESPACE = "benchmarks"
# The training operator and the gang admission of the scaling sweeps (components/kubernetes/training.py), only on
# clusters that run a sweep; and the LocalQueue their jobs name (label kueue.x-k8s.io/queue-name).
TRAINER_NAMESPACE = "kubeflow-system"
KUEUE_NAMESPACE = "kueue-system"
SWEEP_QUEUE = "sweeps"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


def sweep_queue(pool_name: str) -> str:
    """The LocalQueue of the sweep points on one pool, ``sweeps-<pool>``: each pool a sweep uses has a ClusterQueue of
    its own (``sweep_cluster_queue``) holding its flavor alone, so Kueue can charge a point to no other pool's flavor
    (components/kubernetes/training.py says why)."""
    return f"{SWEEP_QUEUE}-{pool_name}"


def sweep_cluster_queue(pool_name: str) -> str:
    """The ClusterQueue of the sweep points on one pool: ``gpu-fleet-sweeps-<pool>``."""
    return f"gpu-fleet-{sweep_queue(pool_name)}"


# The benchmarks' own queue on every cluster that runs them (components/kubernetes/benchmark_queue.py): the LocalQueue
# each benchmark and probe Job names, in each benchmark namespace; its ClusterQueue; a ResourceFlavor per card pool.
BENCHMARK_QUEUE = "benchmarks"
BENCHMARK_CLUSTER_QUEUE = "gpu-fleet-benchmarks"


def benchmark_flavor(pool_name: str) -> str:
    """The ResourceFlavor of a card pool in the benchmark queue: ``benchmark-<pool>`` (the sweeps' flavor of the same
    pool is ``<pool>``, the fleet's queues' ``queue-<pool>``)."""
    return f"benchmark-{pool_name}"


def is_sweep_queue(name: str) -> bool:
    """Whether a LocalQueue (or a queue-name label) is a per-cluster sweep pool's (``sweep_queue``)."""
    return name.startswith(sweep_queue(""))


def is_sweep_cluster_queue(name: str) -> bool:
    """Whether a ClusterQueue is a per-cluster sweep pool's (``sweep_cluster_queue``)."""
    return name.startswith(sweep_cluster_queue(""))


def is_cluster_own_queue(name: str) -> bool:
    """Whether a ClusterQueue is one a cluster has for itself, not one of the fleet's queues: a sweep pool's
    (``sweep_cluster_queue``) or the benchmarks' (``BENCHMARK_CLUSTER_QUEUE``)."""
    return is_sweep_cluster_queue(name) or name == BENCHMARK_CLUSTER_QUEUE


# A TrainJob's name: a DNS-1035 label (trainer v2.3.0 trainjob CRD rule ^[a-z]([-a-z0-9]*[a-z0-9])?$), short enough
# that JobSet's child Job and pod names, <name>-node-<job index>-<pod index>-<5 chars>, stay within 63 characters
# (jobset v0.12.0 pkg/webhooks/jobset_webhook.go): the pod index has as many digits as the job's last node, so a job
# of more than 10 nodes has a name one character shorter (max_trainjob_name).
TRAINJOB_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_TRAINJOB_NAME = 48  # a job of at most 10 nodes (pod indexes 0-9)


def max_trainjob_name(nodes: int) -> int:
    """The longest TrainJob name whose ``nodes`` pods (indexes 0 to nodes - 1) JobSet can name within 63 characters:
    63 - len("-node-0-") - digits of the last index - len("-xxxxx")."""
    return 63 - len("-node-0-") - len(str(max(nodes, 1) - 1)) - len("-xxxxx")


# Benchmarks whose image cannot run as non-root (workload.yaml `needs_root`): Pod Security `baseline`.
ROOT_BENCHMARK_NAMESPACE = "benchmarks-root"
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io"
# A namespace enforcing less than `restricted` says why in this annotation (the pack asks for it on `privileged`).
POD_SECURITY_EXCEPTION = "gpu-fleet.io/pod-security-exception"
# the last "gpu-" that starts the name or follows a dash: <cluster>-gpu-<card>, or a Magnum role gpu-<card>
_POOL_SUFFIX = re.compile(rf"^(?:.*-)?{POOL_PREFIX}([a-z0-9][a-z0-9-]*)$")


# A card's CI pool (fleet/model/runners/ci_pools.py) is its pool's name with this suffix: ``gpu-<card>-ci``.
CI_POOL_SUFFIX = "-ci"


def pool_name(card: str) -> str:
    """The name of ``card``'s GPU pool on every cloud (the node-group role on Magnum)."""
    return f"{POOL_PREFIX}{card}"


def ci_pool_name(card: str) -> str:
    """The name of ``card``'s CI pool on every cloud (the node-group role on Magnum): ``gpu-<card>-ci``."""
    return f"{pool_name(card)}{CI_POOL_SUFFIX}"


def card_of_pool(name: str) -> str | None:
    """The card of a pool named (or ending in) ``gpu-<card>`` or ``gpu-<card>-ci``; None for any other pool."""
    match = _POOL_SUFFIX.search(name)
    return match.group(1).removesuffix(CI_POOL_SUFFIX) if match else None


# The node label of a CI pool's nodes (fleet/model/runners/ci_pools.py: its taint has the same key); the pool readers
# (fleet/model/core/clouds/) tell a CI pool by it.
CI_LABEL = "gpu-fleet.io/ci"


def is_ci_pool(name: str) -> bool:
    """Whether a pool named (or ending in) ``gpu-<card>-ci`` is a CI pool (no card's name ends in ``-ci``)."""
    return card_of_pool(name) is not None and name.endswith(CI_POOL_SUFFIX)


# GitLab CI runners (components/kubernetes/runners.py): the chart, where the runners and their CI jobs run, the
# PodMonitor of the runners, the label their pods carry, and the runner feature flag that applies pod_spec patches.
RUNNER_CHART = "gitlab-runner"
RUNNER_NAMESPACE = "ci-runners"
CI_JOB_NAMESPACE = "ci-builds"
RUNNER_POD_MONITOR = "gpu-fleet-runners"
RUNNER_PART_OF = "gpu-fleet-runner"
RUNNER_METRIC_LABELS = ("gpu", "cluster", "cloud")
ADVANCED_POD_SPEC_FLAG = "FF_USE_ADVANCED_POD_SPEC_CONFIGURATION"

# The NVIDIA device plugin release's Helm post-renderer (components/kubernetes/postrender), by its path from the
# project's folder: it gives the containers the chart renders without resources (its config manager's, the MPS
# daemon's) the plugin's own; the pack's device-plugin-requests checks the release names it.
DEVICE_PLUGIN_POSTRENDER = "components/kubernetes/postrender/nvidia-device-plugin"

LOG_DIR = "/var/log/benchmark"
# What the log's init container and the mtail sidecar ask: part of every benchmark pod's requests (the placement check,
# fleet/model/placement/pods.py, counts them as the scheduler does: the sidecar added to the workload, the init
# container alone before it).
PREPARE_LOG_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
MTAIL_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
PROGRAMS_DIR = "/etc/mtail"
METRICS_PORT = 3903
METRICS_PORT_NAME = "mtail"
# Seconds the pod stays up after the workload's last line, so Prometheus scrapes the final values at
# least twice (two 30 s intervals plus margin) before the pod ends and its PodMonitor target disappears.
LINGER_SECONDS = 75
# Time a pod may spend waiting for a GPU node to scale up from zero and pull a large image, on top of the
# workload's own timeout.
SCALE_UP_ALLOWANCE_SECONDS = 3600


def active_deadline_seconds(timeout_seconds: int) -> int:
    """A benchmark or probe Job's ``activeDeadlineSeconds``: scale-up allowance, the workload's timeout, the linger."""
    return SCALE_UP_ALLOWANCE_SECONDS + timeout_seconds + LINGER_SECONDS


def log_file(workload: str) -> str:
    """The log file the workload appends to and mtail tails."""
    return f"{LOG_DIR}/{workload}.log"


def mtail_args(programs_dir: str = PROGRAMS_DIR, logs: str = f"{LOG_DIR}/*.log", port: int = METRICS_PORT) -> list[str]:
    """mtail's command line in the sidecar (and in the tests that prove the arrangement loses no line)."""
    return [
        "--progs",
        programs_dir,
        "--logs",
        logs,
        "--port",
        str(port),
        "--logtostderr",
        "--emit_prog_label=false",
    ]
