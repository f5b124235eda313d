"""fleet/model/access/can_i.py: the can-i table loads, prints kubectl's commands, and refuses a malformed row."""

from __future__ import annotations

import pytest

from fleet.model.access import can_i
from fleet.model.core.errors import InputError


def test_the_table_asks_both_identities_both_ways():
    questions = can_i.load()
    users = {q.user for q in questions}
    assert users == {"system:serviceaccount:kueue-system:multikueue", "gpu-fleet-preview"}
    for user in users:
        assert {q.allowed for q in questions if q.user == user} == {True, False}
    worker = next(q for q in questions if q.user in users and q.user.startswith("system:"))
    assert worker.who().groups[0] == "system:serviceaccounts"


def test_each_row_is_a_kubectl_command():
    by_text = {" ".join(q.kubectl()): q.allowed for q in can_i.load()}
    assert (
        by_text[
            "kubectl auth can-i --as system:serviceaccount:kueue-system:multikueue create jobs.batch -n node-agents"
        ]
        is False
    )
    assert by_text[
        "kubectl auth can-i --as system:serviceaccount:kueue-system:multikueue patch workloads.kueue.x-k8s.io "
        "--subresource=status -n benchmarks"
    ]
    assert by_text["kubectl auth can-i --as gpu-fleet-preview list secrets --all-namespaces"] is False


def test_a_malformed_row_is_located(tmp_path):
    table = tmp_path / "can_i.yaml"
    table.write_text("- {as: a, verb: get, resource: pods, group: '', namespace: x, allowed: maybe}\n- {as: a}\n")
    with pytest.raises(InputError) as caught:
        can_i.load(table)
    assert [str(p) for p in caught.value.problems] == [
        f"{table}:1: [0].allowed: must be true or false",
        f"{table}:2: [1]: must have exactly the keys as, verb, resource, group, namespace, allowed",
    ]
