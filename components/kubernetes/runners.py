"""GitLab CI runners on the fleet's pools: per (cluster, card) of the policy's ``runners`` section, the official
gitlab-runner chart with the Kubernetes executor, whose CI job pods select the card's pool, tolerate its taints and
**request the card** (``nvidia.com/gpu``, ``google.com/tpu``, ...), so several jobs run at once without sharing one
(on a time-sliced pool, a slice each).

Facts this relies on (gitlab-runner 18.9.0, the chart's appVersion; gitlab-org/gitlab-runner docs and
common/config.go at v19.3.0, which agree):

* the Kubernetes executor has no setting for an extended resource: the job pod is patched with
  ``[[runners.kubernetes.pod_spec]]`` (a strategic merge patch of the ``build`` container's resources; docs
  configuration/gpus.md), which needs the feature flag ``FF_USE_ADVANCED_POD_SPEC_CONFIGURATION`` (off by default,
  "Beta"; docs configuration/feature-flags.md). It is set in ``[runners.feature_flags]``, which a CI job's own
  variables cannot override ("runner setting takes precedence if defined", common/build_settings.go at v19.3.0;
  a job variable overrides only the default, and so a flag set through ``environment``). A ``merge`` patch would replace
  the container list;
* ``node_selector`` is a table and ``node_tolerations`` a table of ``"key=value" = "Effect"`` (docs
  executors/kubernetes); ``poll_timeout`` (default 180 s) is how long the runner waits for the job pod to start,
  which a pool scaling up from zero can exceed;
* the runner serves its metrics (``gitlab_runner_jobs_total``, ``gitlab_runner_job_duration_seconds``,
  ``gitlab_runner_failed_jobs_total``) on ``listen_address``, port 9252 by default; the chart writes it when
  ``metrics.enabled`` (templates/configmap.yaml);
* an authentication token (``glrt-...``, a runner created in GitLab's UI, where its tags are set) goes in the
  ``runner-token`` key of the Secret ``runners.secret`` names; the chart mounts ``runner-registration-token`` too.

The token comes from the stack's secret config ``gpu-fleet:runnerTokens.<card>`` into a Kubernetes Secret; without
it the plan warns with the command to set it and the runner's pod waits for the Secret (the release is not awaited,
so the deploy does not fail meanwhile).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import tomli_w
import yaml

from components.kubernetes.benchmark import driver_exports
from components.kubernetes.images import helm_release, image
from components.kubernetes.pod_monitor import pod_monitor
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import Runner
from fleet.model.core.pools import GpuPool

RUNNER_METRICS_PORT = 9252
RUNNER_METRICS_PORT_NAME = "metrics"
# What the runner waits for a CI job's pod to start: long enough for a node to scale up from zero and pull an image.
POLL_TIMEOUT_SECONDS = 1800
# The image of a CI job that names none (jobs name their own, such as nvidia/cuda): the fleet's copy of Docker Hub's
# official Ubuntu; and the helper container of every job pod (clone, artifacts, cache), the fleet's copy of the
# runner's default helper (images.yaml: ubuntu, gitlab-runner-helper). Neither is pulled from where upstream
# publishes it: Docker Hub rate-limits anonymous pulls. Both in the fleet's registry (Cluster.registry).
DEFAULT_JOB_IMAGE = "ubuntu"
HELPER_IMAGE = "gitlab-runner-helper"
# What the runner needs in the job namespace (gitlab-runner docs executors/kubernetes, "Configure runner API
# permissions"): its job pods, exec and attach into them, their logs, the Secrets and Services of a job.
JOB_NAMESPACE_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/exec", "pods/attach"], "verbs": ["create", "delete", "get", "patch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "get", "update"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
]


def accelerator_patch(runner: Runner) -> str:
    """The strategic merge patch that makes a CI job's ``build`` container request the runner's cards."""
    count = runner.accelerators
    resources = {"requests": {runner.pool.resource: count}, "limits": {runner.pool.resource: count}}
    return yaml.safe_dump({"containers": [{"name": "build", "resources": resources}]}, sort_keys=False)


def job_pod_labels(cluster: Cluster, runner: Runner) -> dict[str, str]:
    """Labels of a CI job's pod: which fleet, card and cluster it runs on."""
    return {
        "app.kubernetes.io/part-of": "gpu-fleet-ci-job",
        "gpu": runner.pool.card,
        "cluster": cluster.name,
        "cloud": cluster.cloud,
    }


def runner_config(cluster: Cluster, runner: Runner, jobs_namespace: str) -> dict[str, Any]:
    """The ``[[runners]]`` entry of config.toml (as data): the Kubernetes executor on the card's pool."""
    pool = runner.pool
    return {
        "runners": [
            {
                "feature_flags": {pod_contract.ADVANCED_POD_SPEC_FLAG: True},
                "kubernetes": {
                    "namespace": jobs_namespace,
                    "image": image(DEFAULT_JOB_IMAGE, cluster.registry),
                    "helper_image": image(HELPER_IMAGE, cluster.registry),
                    "privileged": False,
                    # no API token in a CI job's pods ([runners.kubernetes] automount_service_account_token,
                    # gitlab-org/gitlab-runner!4543); a job may not pick another service account
                    # (service_account_overwrite_allowed unset: no overwrite, docs executors/kubernetes)
                    "automount_service_account_token": False,
                    "cpu_request": runner.cpu_request,
                    "memory_request": runner.memory_request,
                    "cpu_limit": runner.cpu_limit,
                    "memory_limit": runner.memory_limit,
                    "poll_timeout": POLL_TIMEOUT_SECONDS,
                    "node_selector": dict(pool.node_selector),
                    "node_tolerations": {f"{t.key}={t.value}": t.effect for t in pool.pod_tolerations},
                    "pod_labels": job_pod_labels(cluster, runner),
                    "pod_spec": [
                        {"name": "accelerator", "patch_type": "strategic", "patch": accelerator_patch(runner)}
                    ],
                },
                **_driver_settings(pool),
            }
        ]
    }


def _driver_settings(pool: GpuPool) -> dict[str, Any]:
    """Where the cloud mounts the driver without telling the container (GKE), a CI job's shell appends its libraries
    and tools to the image's own ``LD_LIBRARY_PATH`` and ``PATH`` before the job's script (the runner's
    ``pre_build_script``; a variable in ``environment`` would replace the image's value): CUDA and nvidia-smi work in
    any job image."""
    exports = driver_exports(pool.driver_env)
    return {"pre_build_script": exports.strip()} if exports else {}


def runner_config_toml(cluster: Cluster, runner: Runner, jobs_namespace: str) -> str:
    """config.toml's ``[[runners]]`` as the chart's ``runners.config`` takes it (TOML text)."""
    return tomli_w.dumps(runner_config(cluster, runner, jobs_namespace))


def release_values(
    cluster: Cluster, runner: Runner, jobs_namespace: str, secret: str, system_selector: Mapping[str, str]
) -> dict[str, Any]:
    """The gitlab-runner chart's values for one card's runner (keys of chart 0.86.0 values.yaml)."""
    return {
        "gitlabUrl": runner.gitlab_url,
        "concurrent": runner.concurrency,
        "checkInterval": 3,
        "unregisterRunners": False,  # an authentication token's runner lives in GitLab, not in the pod
        "runners": {
            "secret": secret,
            "jobNamespace": jobs_namespace,
            "config": runner_config_toml(cluster, runner, jobs_namespace),
        },
        "rbac": {"create": True, "rules": JOB_NAMESPACE_RULES},
        "serviceAccount": {"create": True},
        "metrics": {"enabled": True, "portName": RUNNER_METRICS_PORT_NAME, "port": RUNNER_METRICS_PORT},
        # the labels the PodMonitor copies onto the runner's metrics (RUNNER_METRIC_LABELS): on a leaf federation
        # would add cluster and cloud, but a runner on the central is never federated
        "podLabels": {
            "app.kubernetes.io/part-of": pod_contract.RUNNER_PART_OF,
            "gpu": runner.pool.card,
            "cluster": cluster.name,
            "cloud": cluster.cloud,
        },
        "podSecurityContext": {
            "runAsUser": 100,
            "runAsNonRoot": True,
            "fsGroup": 65533,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": False,
            "runAsNonRoot": True,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "nodeSelector": dict(system_selector),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
    }


def token_command(cluster: Cluster, runner: Runner) -> str:
    """The command that gives a card's runner its token."""
    key = f"gpu-fleet:runnerTokens.{runner.pool.card}"
    return f"pulumi config set --stack {cluster.name} --secret --path '{key}' <glrt-...>"


class GitLabRunners(pulumi.ComponentResource):
    """The GitLab CI runners of one cluster: per card, a token Secret, the gitlab-runner release and, for all of
    them, a PodMonitor that scrapes the runners' metrics with the card as a label."""

    TYPE = "gpufleet:index:GitLabRunners"

    def __init__(
        self,
        cluster: Cluster,
        runners: tuple[Runner, ...],
        namespaces: tuple[pulumi.Input[str], pulumi.Input[str]],
        tokens: Mapping[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """``namespaces``: where the runners run and where their CI jobs run; ``tokens``: card -> token."""
        super().__init__(self.TYPE, f"{cluster.name}-ci-runners", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        runners_ns, jobs_ns = namespaces
        cards = {r.pool.card for r in runners}
        for card in sorted(set(tokens) - cards):
            pulumi.log.warn(
                f"{cluster.name}: gpu-fleet:runnerTokens.{card} is not used: the policy gives no {card} runner"
            )
        self.releases: dict[str, pulumi.Resource] = {}
        for runner in runners:
            card = runner.pool.card
            depends: list[pulumi.Resource] = []
            if card in tokens:
                depends.append(
                    k8s.core.v1.Secret(
                        f"{cluster.name}-{runner.name}-token",
                        metadata={
                            "name": runner.name,
                            "namespace": runners_ns,
                            "labels": {"app.kubernetes.io/part-of": pod_contract.RUNNER_PART_OF, "gpu": card},
                        },
                        type="Opaque",
                        string_data={
                            "runner-token": pulumi.Output.secret(tokens[card]),
                            "runner-registration-token": "",
                        },
                        opts=child,
                    )
                )
            else:
                tags = ", ".join(runner.tags)
                pulumi.log.warn(
                    f"{cluster.name}: the {card} runner waits for its token: create a runner in GitLab "
                    f"({runner.gitlab_url}) with the tags {tags}, then {token_command(cluster, runner)}"
                )
            values = pulumi.Output.from_input(jobs_ns).apply(
                lambda ns, r=runner: release_values(cluster, r, ns, r.name, cluster.system_selector)
            )
            # Not awaited: without its token Secret the runner's pod waits (the chart mounts it), and Helm would fail
            # the deploy after its timeout; `fleet doctor` tells which runner has no pod.
            self.releases[card] = helm_release(
                f"{cluster.name}-{runner.name}",
                pod_contract.RUNNER_CHART,
                runner.name,
                runners_ns,
                values,
                pulumi.ResourceOptions(parent=self, depends_on=depends),
                registry=cluster.registry,
                skip_await=True,
            )
        pod_monitor(
            f"{cluster.name}-ci-runners-podmonitor",
            pod_contract.RUNNER_POD_MONITOR,
            runners_ns,
            {"app.kubernetes.io/part-of": pod_contract.RUNNER_PART_OF},
            RUNNER_METRICS_PORT_NAME,
            pod_contract.RUNNER_METRIC_LABELS,
            child,
        )
        self.register_outputs({"runners": sorted(cards)})
