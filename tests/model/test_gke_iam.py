"""fleet/model/core/clouds/gke_iam.py: the GCP deploy account acts only as node accounts; GitLab deploys from main
only."""

from __future__ import annotations

from components.clusters.gke import node_account_id
from fleet.model.core.clouds.gke_iam import deploy_roles, gitlab_principal, node_accounts_condition

POOL = "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/gpu-fleet"


def test_the_deploy_account_acts_only_as_the_nodes_accounts_and_cannot_grant_itself_another():
    roles = dict(deploy_roles("proj-1"))
    assert roles["roles/iam.serviceAccountUser"] == node_accounts_condition("proj-1")
    assert "roles/iam.serviceAccountAdmin" not in roles and "roles/owner" not in roles and "roles/editor" not in roles
    # the condition matches the account the stack makes for a cluster's nodes, and no other
    email = f"{node_account_id('gke-uscentral1-a')}@proj-1.iam.gserviceaccount.com"
    suffix = roles["roles/iam.serviceAccountUser"].split('endsWith("', 1)[1].rstrip('")')
    assert email.endswith(suffix)
    assert not "gpu-fleet-production@proj-1.iam.gserviceaccount.com".endswith(suffix)
    assert not f"{node_account_id('x')}@other.iam.gserviceaccount.com".endswith(suffix)


def test_gitlab_deploys_only_from_main():
    deploy = gitlab_principal(POOL, "it/gpu-fleet", deploy=True)
    assert deploy == f"{POOL}/subject/project_path:it/gpu-fleet:ref_type:branch:ref:main"
    preview = gitlab_principal(POOL, "it/gpu-fleet", deploy=False)
    assert preview.startswith("principalSet://") and preview.endswith("/attribute.project_path/it/gpu-fleet")
