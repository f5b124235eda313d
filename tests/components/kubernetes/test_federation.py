"""The central cluster learns each leaf from its stack's outputs (components/kubernetes/federation.py)."""

from __future__ import annotations

import pytest

from tests.helpers import plan_one

POLICY = """
clusters:
  gcp:
    central-test:
      zone: us-central1-a
      central: true
    gke-leaf:
      zone: us-central1-c
      gpus:
        t4: {}
"""


def test_a_leaf_not_deployed_yet_names_the_stack_to_deploy_first(tmp_path):
    # the real CLI's StackReference to a stack with no outputs yet (the real tier saw "KeyError: 'federation_ca'")
    with pytest.raises(
        Exception, match=r"federates gke-leaf, whose stack has no output federation_\w+: deploy it first"
    ):
        plan_one(tmp_path, POLICY, "central-test", {"gcp:project": "proj-1"}, references={"gke-leaf": ({}, [])})
