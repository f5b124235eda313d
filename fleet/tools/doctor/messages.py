"""The upstream strings the doctor's diagnosis matches: the scheduler's, the cluster-autoscaler's, the kubelet's and
the Job controller's reasons and messages, each with its source beside it."""

from __future__ import annotations

import re
from dataclasses import dataclass

# kube-scheduler records PodScheduled=False with reason "Unschedulable" and the FitError message
# "0/N nodes are available: <count> <reason>, ..." (kubernetes/kubernetes pkg/scheduler/framework/types.go FitError);
# the doctor reads that condition, which holds the whole message, where the FailedScheduling event holds it truncated
# (kubernetes v1.33.3 pkg/scheduler/schedule_one.go handleSchedulingFailure: Message: errMsg; the event's
# truncateMessage(errMsg)).
UNSCHEDULABLE = "Unschedulable"
# TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go): "node(s) had untolerated
# taint {<key>: <value>}" at v1.31.2, v1.33.3 and v1.34.1 (the first untolerated taint of the node), "node(s) had
# untolerated taint(s)" at v1.35.4 (kubernetes/kubernetes#134740); "node(s) had taint(s) that the pod didn't
# tolerate" in older releases. The doctor reads the taints from the nodes themselves, whichever spelling it gets.
TAINT_PATTERN = re.compile(r"untolerated taint|didn't tolerate")
# NodeResourcesFit: fmt.Sprintf("Insufficient %v", rName) for extended resources, "Insufficient cpu"/"memory"
# (kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest).
INSUFFICIENT_PATTERN = re.compile(r"Insufficient ([A-Za-z0-9](?:[A-Za-z0-9./_-]*[A-Za-z0-9])?)")
# The scheduler's whole message (kubernetes v1.33.3 pkg/scheduler/framework/types.go FitError.Error(), the same at
# v1.31.2, v1.34.1 and v1.35.4): "0/<nodes> nodes are available:" + " <PreFilter message>." when a PreFilter plugin
# refused the pod, else + " <count> <reason>" per reason, sort.Strings'ed, joined with ", ", then "."; then " " + the
# PostFilter message, which DefaultPreemption writes as "preemption: " + another FitError (plugins/defaultpreemption/
# default_preemption.go PostFilter; preemption/preemption.go Preempt): "<count> No preemption victims found for
# incoming pod" for the nodes preemption tried, "<count> Preemption is not helpful for scheduling" for the others.
# Each node counts once per reason its first failing filter plugin gave: NodeResourcesFit gives every resource the
# node is short of at once (plugins/noderesources/fit.go fitsRequest). So a pod too big for its machine on a pool
# with a free card reads "... 2 Insufficient cpu, 2 Insufficient memory, 1 Insufficient nvidia.com/gpu, ...": the
# accelerator named does not say the cards are all taken, its count does (here one of two nodes has none free).
FIT_ERROR_PATTERN = re.compile(r"^0/(\d+) nodes are available: (.*?)\.(?: |$)")
HISTOGRAM_ENTRY = re.compile(r"^(\d+) (.+)$")


def filter_reasons(message: str) -> dict[str, int]:
    """How many nodes gave each reason in the scheduler's FitError message (its first part, before the PostFilter
    message); empty when the message is not a FitError or a PreFilter plugin refused the pod."""
    found = FIT_ERROR_PATTERN.match(message.strip())
    if found is None:
        return {}
    counts: dict[str, int] = {}
    for entry in found.group(2).split(", "):
        part = HISTOGRAM_ENTRY.match(entry)
        if part is None:  # a PreFilter message, not a histogram
            return {}
        counts[part.group(2)] = counts.get(part.group(2), 0) + int(part.group(1))
    return counts


# Taints the node lifecycle controller owns (k8s.io/api core/v1 well_known_taints.go TaintNodeUnreachable,
# TaintNodeNotReady; pkg/controller/nodelifecycle): it sets them when a kubelet stops reporting and removes them itself
# when it reports again. Never a user's to remove.
NODE_CONTROLLER_TAINTS = {
    "node.kubernetes.io/unreachable": "unreachable (its kubelet stopped reporting: a reclaimed spot VM, a failed one)",
    "node.kubernetes.io/not-ready": "not ready (its kubelet reports NotReady)",
}


@dataclass(frozen=True)
class SystemTaint:
    """A taint a component of the cluster sets and lifts itself: who owns it, what it says of the node, and what to do
    instead of removing it (``waiting``: the node is on its way out, a new one comes for the pod)."""

    owner: str
    state: str
    instead: str
    waiting: bool = False


# Other taints the cluster's own components set and lift, never a user's to remove (k8s.io/api v0.33.3 core/v1
# well_known_taints.go: the node lifecycle controller's TaintNodesByCondition taints from the kubelet's conditions,
# TaintNodeUnschedulable for a cordoned node; kubernetes/autoscaler cluster-autoscaler-1.33.6 utils/taints/taints.go:
# ToBeDeletedTaint on a node it is removing, and the GKE node termination handler's taint on a VM being reclaimed).
SYSTEM_TAINTS = {
    "node.kubernetes.io/memory-pressure": SystemTaint(
        "the node controller",
        "short of memory (its kubelet reports MemoryPressure)",
        "see what fills it ({kubectl} describe node {node}, Conditions); the taint goes when the pressure does",
    ),
    "node.kubernetes.io/disk-pressure": SystemTaint(
        "the node controller",
        "short of disk (its kubelet reports DiskPressure)",
        "see what fills it ({kubectl} describe node {node}, Conditions: images, logs, emptyDirs); the taint goes "
        "when the pressure does",
    ),
    "node.kubernetes.io/pid-pressure": SystemTaint(
        "the node controller",
        "short of process ids (its kubelet reports PIDPressure)",
        "see what runs there ({kubectl} describe node {node}); the taint goes when the pressure does",
    ),
    "node.kubernetes.io/network-unavailable": SystemTaint(
        "the node controller",
        "without a network (its NetworkUnavailable condition)",
        "check the network plugin's pod on it ({kubectl} -n kube-system get pods -o wide --field-selector "
        "spec.nodeName={node}); the taint goes when the network is up",
    ),
    "node.kubernetes.io/unschedulable": SystemTaint(
        "the node controller (for a cordoned node)",
        "cordoned (a drain: an upgrade or a removal in progress, or a person's kubectl cordon)",
        "if nobody is draining it, {kubectl} uncordon {node}",
    ),
    "ToBeDeletedByClusterAutoscaler": SystemTaint(
        "the cluster-autoscaler",
        "being removed by the cluster-autoscaler (scale-down)",
        "nothing: the autoscaler adds a node for the pod once this one is gone",
        waiting=True,
    ),
    "cloud.google.com/impending-node-termination": SystemTaint(
        "GKE's node termination handler",
        "being reclaimed (a spot or preemptible VM's termination notice)",
        "nothing: a new node replaces it",
        waiting=True,
    ),
}
# NodeUnschedulable: ErrReasonUnschedulable = "node(s) were unschedulable" (kubernetes v1.33.3 pkg/scheduler/framework/
# plugins/nodeunschedulable/node_unschedulable.go), for a node with spec.unschedulable (cordoned), whose taint the pod
# does not tolerate: that plugin runs before TaintToleration, so the message names it instead of the taint.
CORDONED_PATTERN = re.compile(r"node\(s\) were unschedulable")
# NodeAffinity: ErrReasonPod = "node(s) didn't match Pod's node affinity/selector" (kubernetes/kubernetes
# pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go at 5ae369a0).
SELECTOR_PATTERN = re.compile(r"didn't match Pod's node affinity")
# cluster-autoscaler events on the pod: reason "NotTriggerScaleUp", message "pod didn't trigger scale-up: <count>
# <reason>, ..." (scheduler predicate reasons of each rejected node group, or a skipped group's reason such as "max
# node group size reached"), or "max total nodes in cluster reached"; reason "TriggeredScaleUp", message "pod
# triggered scale-up: [{<group> <current>-><new> (max: <max>)}]" (kubernetes/autoscaler cluster-autoscaler-1.34.2,
# cluster-autoscaler/processors/status/eventing_scale_up_processor.go, core/scaleup/orchestrator/skippedreasons.go,
# processors/nodegroupset/nodegroup_set_processor.go ScaleUpInfo.String).
NOT_TRIGGERED = "NotTriggerScaleUp"
TRIGGERED = "TriggeredScaleUp"
MAX_SIZE_PATTERN = re.compile(r"max node group size reached|max total nodes in cluster reached|max cluster .* reached")
# Container waiting reasons of an image that cannot be pulled (kubernetes/kubernetes pkg/kubelet/images/types.go:
# ErrImagePullBackOff, ErrImagePull, ErrInvalidImageName).
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
# Waiting reasons of a container on its way up: not a problem.
STARTING_REASONS = ("ContainerCreating", "PodInitializing")
# The Job controller's event when it cannot create a pod: reason "FailedCreate", message "Error creating: <err>"
# (kubernetes/kubernetes pkg/controller/controller_utils.go, FailedCreatePodReason); the quota admission plugin's
# error: "exceeded quota: <name>, requested: <r>, used: <u>, limited: <l>" (plugin/pkg/admission/resourcequota/
# controller.go).
FAILED_CREATE = "FailedCreate"
QUOTA_PATTERN = re.compile(r"exceeded quota: ([^,]+), requested: ([^,]+(?:,[^,:]+=[^,]+)*), used: .*?limited: (\S+)")
