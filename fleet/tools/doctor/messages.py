"""The upstream strings the doctor's diagnosis matches: the scheduler's, the cluster-autoscaler's, the kubelet's and
the Job controller's reasons and messages, each with its source beside it."""

from __future__ import annotations

import re

# kube-scheduler records PodScheduled=False with reason "Unschedulable" and the FitError message
# "0/N nodes are available: <count> <reason>, ..." (kubernetes/kubernetes pkg/scheduler/framework/types.go FitError).
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
