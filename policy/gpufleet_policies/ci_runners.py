"""GitLab CI runners (Helm releases of the gitlab-runner chart): the CI jobs they start run on the card's CI pool
(fleet/model/runners/ci_pools.py), tolerate its taints, request its card, and have cpu and memory limits, as benchmark
pods do; and no other pod but the node agents tolerates the CI taint, so a benchmark never shares a node with a CI job.

The job pods are made by the runner, not by Pulumi, so the pack checks what makes them: the ``[[runners]]`` TOML in
the release's ``runners.config`` (components/kubernetes/runners.py writes it).
"""

from __future__ import annotations

import tomllib
from typing import Any

import yaml
from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core import pod_contract
from fleet.model.core.quantity import parse_quantity
from fleet.model.core.taints import CI_TAINT

from .registry import resource_policy
from .resources import HELM_RELEASE, cluster_of, fleet, plain, pod_of, release_chart, subject


def _requested(patches: list[dict[str, Any]], resource: str) -> int:
    """How many of ``resource`` the ``build`` container requests (limits) through the pod_spec patches."""
    count = 0
    for patch in patches:
        try:
            body = yaml.safe_load(str(patch.get("patch") or "")) or {}
        except yaml.YAMLError:
            continue
        if patch.get("patch_type", "strategic") not in ("", "strategic") or not isinstance(body, dict):
            continue
        for container in body.get("containers") or []:
            if isinstance(container, dict) and container.get("name") == "build":
                limits = (container.get("resources") or {}).get("limits") or {}
                try:
                    count = max(count, int(parse_quantity(str(limits.get(resource) or 0))))
                except ValueError:
                    continue  # not a quantity: no request
    return count


def _runner_problems(entry: dict[str, Any], pool: Any) -> list[str]:
    """What keeps one ``[[runners]]`` entry's job pods off the card's pool, or unbounded."""
    kube = entry.get("kubernetes") or {}
    problems = []
    selector = kube.get("node_selector") or {}
    if any(selector.get(k) != v for k, v in pool.node_selector.items()):
        want = ", ".join(f"{k}={v}" for k, v in pool.node_selector.items())
        what = f"the {pool.card} CI pool {pool.name}" if pool.ci else f"the {pool.card} pool"
        problems.append(f"[runners.kubernetes.node_selector] must select {what} ({want})")
    tolerations = [
        {"key": k.split("=", 1)[0], "value": k.split("=", 1)[1] if "=" in k else "", "effect": effect}
        for k, effect in (kube.get("node_tolerations") or {}).items()
    ]
    missing = [t.as_string() for t in pool.pod_tolerations if not t.tolerated_by(tolerations)]
    if missing:
        problems.append(f"[runners.kubernetes.node_tolerations] lacks {', '.join(missing)} of the {pool.name} pool")
    if _requested(kube.get("pod_spec") or [], pool.resource) < 1:
        problems.append(
            f"the CI job's build container requests no {pool.resource} (a strategic [[runners.kubernetes.pod_spec]] "
            "patch of its resources): jobs would share cards, or land on a node without one"
        )
    elif (entry.get("feature_flags") or {}).get(pod_contract.ADVANCED_POD_SPEC_FLAG) is not True:
        problems.append(
            f"pod_spec patches apply only with {pod_contract.ADVANCED_POD_SPEC_FLAG} = true in [runners.feature_flags] "
            "(a flag set in the runner's "
            "environment, a CI job's own variables can turn off)"
        )
    for key in ("cpu_limit", "memory_limit"):
        if not kube.get(key):
            problems.append(f"[runners.kubernetes] has no {key}: a CI job could starve the node")
    if kube.get("privileged"):
        problems.append("[runners.kubernetes] privileged is true: CI jobs must not run privileged")
    if kube.get("automount_service_account_token") is not False:
        problems.append(
            "[runners.kubernetes] automount_service_account_token must be false: a CI job's pod must hold no API "
            "token (the chart's service account could be reached from any job)"
        )
    for key in sorted(
        k for k in kube if k.endswith("_overwrite_allowed") and k.startswith(("service_account", "bearer"))
    ):
        problems.append(
            f"[runners.kubernetes] {key} lets a CI job choose its own identity (service_account_overwrite); remove it"
        )
    return problems


# Pods that must reach every GPU node, CI nodes included (the device plugin, dcgm-exporter): node agents, which hold
# no workload's credentials.
NODE_AGENTS = ("kubernetes:apps/v1:DaemonSet",)


def _fenced_problem(args: ResourceValidationArgs) -> str | None:
    """Why a pod-bearing resource other than a node agent could land on a CI pool's node: it tolerates the CI taint,
    or selects the CI label."""
    found = pod_of(args)
    if found is None or args.resource_type in NODE_AGENTS:
        return None
    _, spec = found
    if CI_TAINT.tolerated_by(spec.get("tolerations") or []):
        return (
            f"{subject(args)} tolerates {CI_TAINT.as_string()}, the taint of the CI pools: it could share a node "
            "with a CI job, which runs any code a merge request brings; only a runner's job pods may tolerate it "
            "(take its tolerations from GpuPool.pod_tolerations of its own pool)"
        )
    if (spec.get("nodeSelector") or {}).get(pod_contract.CI_LABEL) is not None:
        return (
            f"{subject(args)} selects {pod_contract.CI_LABEL}, the label of the CI pools: only a runner's job pods "
            "may run there"
        )
    return None


@resource_policy(
    "ci-runner-placement",
    "GitLab runners' CI jobs run on the card's CI pool (gpu-<card>-ci): they select it, tolerate its taints, request "
    "the card (so two jobs never share one) and have cpu and memory limits; never privileged, never with an API token "
    "or an identity of their choosing. No other pod but the node agents tolerates the CI pools' taint or selects "
    "their label, so a benchmark that holds credentials never shares a node with a CI job.",
)
def _validate_runner(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != HELM_RELEASE:
        problem = _fenced_problem(args)
        if problem is not None:
            report(problem)
        return
    props = plain(args.props)
    if release_chart(props) != pod_contract.RUNNER_CHART:
        return
    values = props.get("values") or {}
    card = (values.get("podLabels") or {}).get("gpu", "")
    cluster = cluster_of(args.urn)
    if cluster is None:
        return  # other policies name the stack that is no cluster
    runner = next((r for r in fleet().runners_of(cluster) if r.pool.card == card), None)
    if runner is None:
        offered = ", ".join(p.card for p in cluster.pools) or "none"
        report(
            f"{subject(args)}: serves card {card!r} (podLabels.gpu), for which {fleet().file} gives cluster "
            f"{cluster.name} no runner (its cards: {offered}); add it under runners.clusters.{cluster.name}"
        )
        return
    pool = runner.pool
    text = str((values.get("runners") or {}).get("config") or "")
    try:
        entries = tomllib.loads(text).get("runners") or []
    except tomllib.TOMLDecodeError as exc:
        report(f"{subject(args)}: runners.config is not TOML ({exc})")
        return
    if not entries:
        report(f"{subject(args)}: runners.config has no [[runners]] entry")
    for entry in entries:
        for problem in _runner_problems(entry, pool):
            report(f"{subject(args)}: {problem}")
