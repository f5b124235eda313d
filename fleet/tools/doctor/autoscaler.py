"""What the cluster-autoscaler said about a pod (its ``NotTriggerScaleUp`` and ``TriggeredScaleUp`` events), as a
diagnosis: a node is coming, the pool is at its maximum, its node template lacks the accelerator, a taint or a label
is missing from every template."""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes.client import CoreV1Event, V1Pod

from fleet.model.core.pools import GpuPool
from fleet.tools.doctor.context import Context, Diagnosis
from fleet.tools.doctor.hints import autoscaler_logs, label_fix, template_fix
from fleet.tools.doctor.kube_objects import events_for, selector_text
from fleet.tools.doctor.messages import (
    INSUFFICIENT_PATTERN,
    MAX_SIZE_PATTERN,
    NOT_TRIGGERED,
    SELECTOR_PATTERN,
    TAINT_PATTERN,
    TRIGGERED,
)


def scale_up_diagnosis(pod: V1Pod, pool: GpuPool | None, ctx: Context) -> Diagnosis | None:
    """What the cluster-autoscaler last said about the pod, as a diagnosis (None when it said nothing)."""
    events = events_for(ctx.snapshot.events, "Pod", pod.metadata.namespace, pod.metadata.name)
    return autoscaler_said(events, pod.metadata.namespace, pod.metadata.name, pool, ctx)


def autoscaler_said(
    events: Sequence[CoreV1Event], namespace: str, pod_name: str, pool: GpuPool | None, ctx: Context
) -> Diagnosis | None:
    """The cluster-autoscaler's last word among ``events`` (about one pod, oldest first), as a diagnosis."""
    events = [e for e in events if e.reason in (NOT_TRIGGERED, TRIGGERED)]
    if not events:
        return None
    last = events[-1]
    message = (last.message or "").strip()
    if last.reason == TRIGGERED:
        return Diagnosis(f"waiting for a new node ({message})", waiting=True)
    said = message.removeprefix("pod didn't trigger scale-up:").strip() or "no node group can take it"
    cause = f"the cluster-autoscaler will not add a node ({NOT_TRIGGERED}: {said})"
    if pool is None:
        return Diagnosis(cause, f"{ctx.kubectl} -n {namespace} describe pod {pod_name}")
    if MAX_SIZE_PATTERN.search(said):
        return Diagnosis(
            f"pool {pool.name} is at its maximum of {pool.max_nodes} node(s): {cause}",
            f"wait for the pods on it to finish, or raise max_nodes under {ctx.policy_key(pool)} in the policy file "
            f"(now {pool.max_nodes}), then {ctx.up}",
        )
    # The reasons are summed over every node group, so only the pod's own resource blames the pool's template.
    short = set(INSUFFICIENT_PATTERN.findall(said))
    if pool.resource in short:
        return Diagnosis(
            f"the node template of pool {pool.name} has no {pool.resource}: {cause}", template_fix(pool, ctx)
        )
    if short:
        return Diagnosis(
            f"no node group has room for the pod's request of {', '.join(sorted(short))}: {cause}",
            f"compare the workload's resources (workload.yaml) with the machine of pool {pool.name} "
            f"({pool.machine_type or 'the site machine'}); {ctx.kubectl} -n {namespace} describe pod {pod_name}",
        )
    if TAINT_PATTERN.search(said):
        return Diagnosis(
            f"a node group carries a taint the pod does not tolerate (the message sums every group): {cause}",
            f"{autoscaler_logs(ctx)}; if the cloud adds that taint to pool {pool.name}, add it to spot_taints of "
            f"{ctx.cluster.cloud} in fleet/model/core/catalogue.yaml, then {ctx.up}",
        )
    if SELECTOR_PATTERN.search(said):
        return Diagnosis(
            f"no node group of the autoscaler carries the label {selector_text(pool.node_selector)}: {cause}",
            label_fix(pool, ctx, []),
        )
    return Diagnosis(
        f"no node group can take the pod: {cause}",
        f"check that pool {pool.name} exists and its autoscaler sees it: {autoscaler_logs(ctx)}",
    )
