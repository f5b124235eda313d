"""The state of one Job of the fleet: Complete, Running, Failed (and why: its exit code, its pod never scheduled, its
pod gone at the deadline), Suspended, or Pending with the diagnosis of its pod or of the quota that refused it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubernetes.client import V1Job, V1Pod

from fleet.tools.doctor.autoscaler import autoscaler_said
from fleet.tools.doctor.context import Context, Diagnosis
from fleet.tools.doctor.hints import autoscaler_logs
from fleet.tools.doctor.kube_objects import age_of, event_time, events_for, labels_of, owner_of
from fleet.tools.doctor.messages import FAILED_CREATE, QUOTA_PATTERN
from fleet.tools.doctor.pods import diagnose_pod


def _pods_of(job: V1Job, pods: Sequence[V1Pod]) -> list[V1Pod]:
    name = job.metadata.name
    return [
        p
        for p in pods
        if p.metadata.namespace == job.metadata.namespace
        and (
            owner_of(p, "Job") == name
            or labels_of(p).get("batch.kubernetes.io/job-name") == name
            or labels_of(p).get("job-name") == name
        )
    ]


def _condition(job: V1Job, kind: str) -> Any:
    for c in (job.status.conditions if job.status else None) or []:
        if c.type == kind and c.status == "True":
            return c
    return None


def _quota_diagnosis(job: V1Job, ctx: Context) -> Diagnosis | None:
    """The Job controller could not create a pod: the namespace's ResourceQuota (or another admission) refused it."""
    events = [
        e
        for e in events_for(ctx.snapshot.events, "Job", job.metadata.namespace, job.metadata.name)
        if e.reason == FAILED_CREATE
    ]
    if not events:
        return None
    message = (events[-1].message or "").strip()
    namespace = job.metadata.namespace
    quota = QUOTA_PATTERN.search(message)
    if quota:
        name, requested, limited = quota.group(1), quota.group(2), quota.group(3)
        return Diagnosis(
            f"the ResourceQuota {name} refuses its pod (requested {requested}, limit {limited})",
            f"the quota sums max_nodes x accelerators per node over the pools (components/kubernetes/namespaces.py "
            f"benchmark_quota) and other benchmark pods hold it: wait for them, or raise max_nodes in the policy file "
            f"and {ctx.up}; {ctx.kubectl} -n {namespace} describe resourcequota {name}",
        )
    return Diagnosis(
        f"the Job controller cannot create its pod ({FAILED_CREATE}: {message})",
        f"{ctx.kubectl} -n {namespace} describe job {job.metadata.name}",
    )


def _gone_pod_diagnosis(job: V1Job, ctx: Context) -> Diagnosis | None:
    """For a failed Job whose pods are gone: what the cluster-autoscaler said about them (events outlive their pod,
    an hour by default), or None."""
    namespace, prefix = job.metadata.namespace, f"{job.metadata.name}-"
    about = sorted(
        (
            e
            for e in ctx.snapshot.events
            if e.involved_object
            and e.involved_object.kind == "Pod"
            and (e.involved_object.name or "").startswith(prefix)
            and (e.involved_object.namespace or namespace) == namespace
        ),
        key=event_time,
    )
    if not about:
        return None
    pod_name = about[-1].involved_object.name
    said = autoscaler_said(about, namespace, pod_name, ctx.pool_of(labels_of(job)), ctx)
    if said is None:
        return None
    if said.waiting:  # a node was on its way when the deadline passed
        return Diagnosis(
            f"its pod {pod_name} never ran: {said.cause} when the Job's deadline passed",
            f"the pool scales up slower than the Job's activeDeadlineSeconds allows; {autoscaler_logs(ctx)}",
        )
    return Diagnosis(f"its pod {pod_name} never ran: {said.cause}", said.fix)


def job_state(job: V1Job, ctx: Context) -> tuple[str, str, str]:
    """The state of one Job as (state, problem, fix): Complete, Running, Failed with why, or Pending with the
    diagnosis of its pod."""
    status = job.status
    namespace, name = job.metadata.namespace, job.metadata.name
    if _condition(job, "Complete") is not None:
        done = status.completion_time if status else None
        return f"Complete {age_of(done, ctx.now)} ago", "", ""
    failed = _condition(job, "Failed")
    pods = sorted(_pods_of(job, ctx.snapshot.pods), key=lambda p: p.metadata.creation_timestamp or ctx.now)
    if failed is not None:
        reason = f"{failed.reason}: {failed.message}" if failed.message else str(failed.reason)
        last = pods[-1] if pods else None
        if last is not None and last.status and last.status.phase == "Pending":
            causes = [d for d in diagnose_pod(last, ctx) if not d.waiting]
            if causes:
                return (
                    f"Failed ({failed.reason})",
                    f"Job {name} failed ({reason}) while its pod was Pending: {'; '.join(d.cause for d in causes)}",
                    "; ".join(d.fix for d in causes if d.fix),
                )
        if last is None:  # the Job controller deleted the pod at the deadline: what was said about it remains
            gone = _gone_pod_diagnosis(job, ctx)
            if gone is not None:
                return f"Failed ({failed.reason})", f"Job {name} failed ({reason}): {gone.cause}", gone.fix
        exited = ""
        for cs in (last.status.container_statuses if last and last.status else None) or []:
            ended = cs.state.terminated if cs.state else None
            if cs.name == "workload" and ended is not None:
                exited = f"; the workload exited with code {ended.exit_code} ({ended.reason or 'no reason'})"
        return (
            f"Failed ({failed.reason})",
            f"Job {name} failed: {reason}{exited}",
            f"{ctx.kubectl} -n {namespace} logs job/{name} -c workload; "
            f"{ctx.kubectl} -n {namespace} describe job {name}",
        )
    if job.spec and job.spec.suspend:
        return (
            "Suspended",
            f"Job {name} is suspended",
            f"{ctx.up} (or {ctx.kubectl} -n {namespace} get job {name} -o yaml)",
        )
    active = [p for p in pods if p.status and p.status.phase in ("Pending", "Running")]
    running = [p for p in active if p.status.phase == "Running"]
    if running:
        node = running[-1].spec.node_name if running[-1].spec else "?"
        return f"Running on {node} for {age_of(running[-1].status.start_time, ctx.now)}", "", ""
    pending = [p for p in active if p.status.phase == "Pending"]
    if pending:
        pod = pending[-1]
        age = age_of(pod.metadata.creation_timestamp, ctx.now)
        diagnoses = diagnose_pod(pod, ctx)
        problems = [d for d in diagnoses if not d.waiting]
        if problems:
            return (
                f"Pending {age} (pod {pod.metadata.name})",
                "; ".join(d.cause for d in problems),
                "; ".join(d.fix for d in problems if d.fix),
            )
        waiting = "; ".join(d.cause for d in diagnoses) or "starting"
        return f"Pending {age}: {waiting}", "", ""
    quota = _quota_diagnosis(job, ctx)
    if quota is not None:
        return f"no pod ({age_of(job.metadata.creation_timestamp, ctx.now)})", quota.cause, quota.fix
    return f"starting ({age_of(job.metadata.creation_timestamp, ctx.now)})", "", ""
