"""The central cluster learns each leaf from its stack's outputs (components/kubernetes/federation.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import ROOT

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
    # the real CLI's StackReference to a stack with no outputs yet (the real tier saw "KeyError: 'federation_ca'").
    # In a process of its own: the failed run's pending error would stay with the SDK and surface in the next plan.
    script = f"""
        from pathlib import Path
        from tests.helpers import plan_one
        try:
            plan_one(Path({str(tmp_path)!r}), {POLICY!r}, "central-test", {{"gcp:project": "proj-1"}},
                     references={{"gke-leaf": ({{}}, [])}})
        except Exception as exc:
            print(exc)
    """
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    expected = "central-test federates gke-leaf, whose stack has no output federation_"
    assert expected in run.stdout + run.stderr and "deploy it first (pulumi up --stack gke-leaf)" in run.stdout
