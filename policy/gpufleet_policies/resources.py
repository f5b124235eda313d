"""What every policy reads: the fleet of the policy file, the stack and cluster of a resource, its properties as plain
data, and the pod template of any pod-bearing kind.

Each policy learns its stack from the resource URN (``urn:pulumi:<stack>::<project>::...``) and reads the fleet from
the policy file named by the ``GPU_FLEET_POLICY`` environment variable (default ``policy/fleet.yaml``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pulumi_policy import ResourceValidationArgs
from pulumi_policy.proxy import UnknownValueError

from fleet.model.core.clusters import Cluster
from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import POLICY_FILE, load_fleet_cached

POLICY_ENV = "GPU_FLEET_POLICY"
WORKLOADS_ENV = "GPU_FLEET_WORKLOADS"


def fleet() -> Fleet:
    """The fleet of the policy file (``GPU_FLEET_POLICY`` or policy/fleet.yaml) with its workloads
    (``GPU_FLEET_WORKLOADS`` or workloads/), cached per file version."""
    workloads = os.environ.get(WORKLOADS_ENV)
    return load_fleet_cached(
        Path(os.environ.get(POLICY_ENV) or POLICY_FILE), Path(workloads) if workloads else WORKLOADS_DIR
    )


def stack_of(urn: str) -> str:
    """The stack named in a URN ``urn:pulumi:<stack>::<project>::<type>::<name>``."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:")


def cluster_of(urn: str) -> Cluster | None:
    """The cluster of the stack in ``urn``; None when the policy has no such cluster."""
    return fleet().clusters.get(stack_of(urn))


def plain(value: Any) -> Any:
    """Property proxies as plain dicts/lists, whole numbers as int (numbers cross the wire as doubles), and what a
    preview cannot know yet left out (a resource's ``status``, an output of a resource still to be created): the
    proxy raises ``UnknownValueError`` on reading such a value, and a policy that read the whole resource would not run
    at all during previews ("can't run policy ... during preview", seen on the real engine), so it runs on what is
    known and again at deploy on everything."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "keys"):
        out = {}
        for key in value.keys():
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                continue
        return out
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        items = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index]))
            except UnknownValueError:
                continue
        return items
    return value


# A chart archive as `helm pull` names it: <chart>-<version>.tgz (gpu-fleet:chartCache, components/kubernetes/images.py)
_ARCHIVE = re.compile(r"^(?P<name>.+?)-v?\d+(?:\.\d+)*(?:[-+][\w.]+)?\.tgz$")


def release_chart(props: Any) -> str:
    """The chart a Helm release installs, by name, however the release names it: ``kueue``, ``oci://.../kueue`` or
    a chart cache's archive ``.../kueue-0.19.2.tgz``."""
    chart = str((plain(props) or {}).get("chart", "")).rsplit("/", 1)[-1]
    archive = _ARCHIVE.match(chart)
    return archive.group("name") if archive else chart


def release_charts(resources: Any) -> set[str]:
    """The charts of every Helm release among a stack's ``resources`` (``release_chart``)."""
    return {release_chart(r.props) for r in resources if r.resource_type == HELM_RELEASE}


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
TRAINING_RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
# The pod-bearing kinds and where their pod template is (the CronJob's inside its job template; a list index picks
# an item).
POD_BEARING = {
    "kubernetes:core/v1:Pod": (),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    # a sweep job's workers: the Job template of the runtime's (only) replicated job (components/kubernetes/sweeps.py)
    TRAINING_RUNTIME: ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:core/v1:ReplicationController": ("spec", "template"),
}


def pod_template(props: dict[str, Any], resource_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(owner spec, pod template) of a pod-bearing resource: the spec that holds the template (a Job's, a CronJob's
    job template's, a Deployment's, ...; {} for a Pod) and the template itself (``metadata``, ``spec``; a Pod is its
    own template). ({}, {}) for a resource that bears no pods."""
    path = POD_BEARING.get(resource_type)
    if path is None:
        return {}, {}
    owner: Any = {}
    node: Any = props
    for key in path:
        if isinstance(key, int):
            items = node if isinstance(node, list) else []
            owner, node = node, items[key] if len(items) > key else {}
        else:
            owner, node = node, (node or {}).get(key) or {}
    return (owner if path else {}), node


def no_cluster(stack: str) -> str:
    """The message for a stack that is not a cluster of the policy file."""
    known = ", ".join(fleet().clusters)
    return (
        f"stack {stack!r} is not a cluster of {fleet().file} (known: {known}); "
        "add the cluster to the policy file or select one of its stacks"
    )


def pod_of(args: ResourceValidationArgs) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(pod metadata, pod spec) of any pod-bearing resource; None for other resources."""
    if args.resource_type not in POD_BEARING:
        return None
    _, template = pod_template(plain(args.props), args.resource_type)
    return template.get("metadata") or {}, template.get("spec") or {}


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init, regular and ephemeral containers of a pod spec."""
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or []), *(pod.get("ephemeralContainers") or [])]


def subject(args: ResourceValidationArgs) -> str:
    """How a message names the resource: its kind and name (``Job 'fix-eks-debug'``)."""
    return f"{args.resource_type.rsplit(':', 1)[-1]} {args.name!r}"


def stack_cluster(args: Any, report: Any) -> tuple[list[Any], str, Cluster] | None:
    """A stack policy's resources, stack name and cluster; None (reported when the stack is no cluster of the policy
    file) when there is nothing to check."""
    resources = list(args.resources)
    if not resources:
        return None
    stack = stack_of(resources[0].urn)
    cluster = cluster_of(resources[0].urn)
    if cluster is None:
        report(no_cluster(stack))
        return None
    return resources, stack, cluster
