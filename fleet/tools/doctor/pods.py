"""Why a pod does not run: not scheduled (:mod:`fleet.tools.doctor.scheduling`), or a container waiting on its image
or its configuration."""

from __future__ import annotations

from kubernetes.client import V1Pod

from fleet.model.core.fleet import Fleet
from fleet.model.loader import ROOT
from fleet.tools.doctor.context import Context, Diagnosis
from fleet.tools.doctor.kube_objects import labels_of
from fleet.tools.doctor.messages import IMAGE_PULL_REASONS, STARTING_REASONS, UNSCHEDULABLE
from fleet.tools.doctor.scheduling import scheduling_diagnoses


def image_source(pod: V1Pod, container: str, fleet: Fleet) -> str:
    """Where the image of a fleet pod's container is set: the workload's workload.yaml, else the pinned images."""
    name = labels_of(pod).get("workload", "")
    workload = fleet.deployed_workloads.get(name)
    if container == "workload" and workload is not None:
        file = workload.folder / "workload.yaml"
        shown = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
        return f"{shown} (image)"
    return "components/kubernetes/images.yaml"


def container_diagnoses(pod: V1Pod, ctx: Context) -> list[Diagnosis]:
    """A diagnosis per container of the pod waiting for something: its image, its configuration, or its start."""
    status = pod.status
    statuses = [
        *((status.init_container_statuses if status else None) or []),
        *((status.container_statuses if status else None) or []),
    ]
    out = []
    namespace, name = pod.metadata.namespace, pod.metadata.name
    for cs in statuses:
        waiting = cs.state.waiting if cs.state else None
        if waiting is None or not waiting.reason:
            continue
        message = f": {waiting.message}" if waiting.message else ""
        if waiting.reason in IMAGE_PULL_REASONS:
            out.append(
                Diagnosis(
                    f"container {cs.name} cannot pull its image {cs.image} ({waiting.reason}{message})",
                    f"check that the image exists and that the nodes may pull it (docker manifest inspect {cs.image}; "
                    f"registry credentials or the node role's pull permission); it is set in "
                    f"{image_source(pod, cs.name, ctx.fleet)}, then {ctx.up}",
                )
            )
        elif waiting.reason in STARTING_REASONS:
            out.append(Diagnosis(f"container {cs.name} is starting ({waiting.reason})", waiting=True))
        elif waiting.reason == "CreateContainerConfigError":
            out.append(
                Diagnosis(
                    f"container {cs.name} cannot be configured ({waiting.reason}{message})",
                    "a Secret or ConfigMap it reads is missing: for workload credentials set them with pulumi config "
                    f"set --stack {ctx.stack} --secret --path 'gpu-fleet:workloadSecrets.<workload>.<VAR>' <value> "
                    f"and {ctx.up} (docs/policy-file.md, Adding a workload)",
                )
            )
        else:
            out.append(
                Diagnosis(
                    f"container {cs.name} is waiting: {waiting.reason}{message}",
                    f"{ctx.kubectl} -n {namespace} describe pod {name}; {ctx.kubectl} -n {namespace} logs {name} "
                    f"-c {cs.name} --previous",
                )
            )
    return out


def diagnose_pod(pod: V1Pod, ctx: Context) -> list[Diagnosis]:
    """Why a Pending pod does not run, from its conditions, container states and the events about it.

    * PodScheduled False / Unschedulable: a pool node's taint the pod does not tolerate; GPU nodes without the
      pool's label; the pool's nodes full or advertising no accelerator; and what the cluster-autoscaler said
      (``NotTriggerScaleUp``: at its maximum, a node template without the accelerator, a taint or a label missing
      from every template; ``TriggeredScaleUp``: a node is coming, a wait);
    * a container waiting on its image (``ErrImagePull``, ``ImagePullBackOff``, ``InvalidImageName``) or its
      configuration (a missing Secret).

    Each diagnosis names its likely fix. An empty list: nothing is wrong that the doctor can see.
    """
    labels = labels_of(pod)
    pool = ctx.pool_of(labels)
    conditions = (pod.status.conditions if pod.status else None) or []
    scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
    if scheduled is not None and scheduled.status == "False" and scheduled.reason == UNSCHEDULABLE:
        return scheduling_diagnoses(pod, scheduled.message or "", pool, ctx)
    found = container_diagnoses(pod, ctx)
    if found:
        return found
    if scheduled is None or scheduled.status != "True":
        return [Diagnosis("waiting for the scheduler", waiting=True)]
    return []
