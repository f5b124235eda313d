"""The upstream messages the diagnosis matches (fleet/tools/doctor/messages.py), in every spelling upstream has
used, and the tests' FailedScheduling message as the scheduler formats it."""

from __future__ import annotations

from fleet.tools.doctor.messages import (
    INSUFFICIENT_PATTERN,
    MAX_SIZE_PATTERN,
    QUOTA_PATTERN,
    SELECTOR_PATTERN,
    TAINT_PATTERN,
    filter_reasons,
)
from tests.tools.doctor.world import fit_error


def test_the_diagnosis_reads_the_real_message_formats():
    """The patterns match every spelling upstream has used (see the sources in fleet/tools/doctor/messages.py)."""
    for message in (
        "0/3 nodes are available: 3 node(s) had untolerated taint(s).",
        "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}.",
        "0/1 nodes are available: 1 node(s) had taints that the pod didn't tolerate.",
    ):
        assert TAINT_PATTERN.search(message)
    found = INSUFFICIENT_PATTERN.findall("0/4 nodes are available: 1 Insufficient cpu, 3 Insufficient nvidia.com/gpu.")
    assert found == ["cpu", "nvidia.com/gpu"]
    assert SELECTOR_PATTERN.search("2 node(s) didn't match Pod's node affinity/selector")
    quota = QUOTA_PATTERN.search(
        'pods "x" is forbidden: exceeded quota: benchmarks, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"
    )
    assert quota and quota.group(1) == "benchmarks" and quota.group(3) == "requests.nvidia.com/gpu=4"
    assert MAX_SIZE_PATTERN.search("max node group size reached")
    assert MAX_SIZE_PATTERN.search("max total nodes in cluster reached")


def test_fit_error_is_formatted_as_the_scheduler_formats_it():
    # the example of issue 34, byte for byte
    assert (
        fit_error(5, {"Insufficient cpu": 1, "node(s) had untolerated taint {nvidia.com/gpu: present}": 2,
                      "node(s) didn't match Pod's node affinity/selector": 2}, victims=1)
        == "0/5 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector, 2 "
        "node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/5 nodes are available: 1 No "
        "preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling."
    )  # fmt: skip


def test_the_node_counts_are_read_from_the_filter_part_of_the_message():
    """The histogram before the PostFilter message, one count a reason (kubernetes v1.33.3 FitError.Error())."""
    message = fit_error(
        4,
        {
            "Insufficient cpu": 2,
            "Insufficient nvidia.com/gpu": 1,
            "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
        },
        victims=2,
    )
    assert filter_reasons(message) == {
        "Insufficient cpu": 2,
        "Insufficient nvidia.com/gpu": 1,
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1,
    }
    # a PreFilter plugin's refusal names no node counts; neither does a message of another component
    assert (
        filter_reasons(
            "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: "
            "0/4 nodes are available: 4 Preemption is not helpful for scheduling."
        )
        == {}
    )
    assert filter_reasons("pod didn't trigger scale-up: 1 max node group size reached") == {}
