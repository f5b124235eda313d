"""Google Cloud's delivery identities as data: the project roles of the deploy service account, and the GitLab
trust of the deploy and preview service accounts (docs/delivery.md prints them as commands).

The deploy account may act as (``iam.serviceAccounts.actAs``, in ``roles/iam.serviceAccountUser``) the nodes'
service accounts only, which components/clusters/gke.py names ``<cluster>-nodes`` (``node_account_id``): a grant on
the project with an IAM condition on the account's name (Google Cloud IAM docs, "Resource attributes for IAM
Conditions": ``resource.name`` of a service account holds its email; a name in another form matches nothing, so
the condition fails closed). It creates, reads and deletes service accounts but cannot change who may use one
(no ``roles/iam.serviceAccountAdmin``, whose ``setIamPolicy`` would let it grant itself any account).
"""

from __future__ import annotations

NODE_ACCOUNT_SUFFIX = "-nodes"  # components/clusters/gke.py node_account_id


def node_accounts_condition(project: str) -> str:
    """The IAM condition that limits a grant to the nodes' service accounts of ``project``."""
    return f'resource.name.endsWith("{NODE_ACCOUNT_SUFFIX}@{project}.iam.gserviceaccount.com")'


def deploy_roles(project: str) -> list[tuple[str, str]]:
    """(role, IAM condition or "") of the deploy service account on ``project``."""
    return [
        ("roles/container.admin", ""),
        ("roles/cloudkms.admin", ""),
        ("roles/iam.serviceAccountCreator", ""),
        ("roles/iam.serviceAccountDeleter", ""),
        ("roles/iam.serviceAccountViewer", ""),
        ("roles/iam.serviceAccountUser", node_accounts_condition(project)),
        (
            "roles/resourcemanager.projectIamAdmin",
            "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', [])"
            ".hasOnly(['roles/container.defaultNodeServiceAccount'])",
        ),
        ("roles/compute.networkAdmin", ""),
    ]


def gitlab_principal(pool: str, project_path: str, deploy: bool) -> str:
    """Who may impersonate the deploy (``deploy``) or preview account from GitLab: the deploy account only the
    pipelines of the default branch ``main`` (the token's exact subject), the preview one any pipeline of the project
    (merge requests run on their branches)."""
    if deploy:
        return f"{pool}/subject/project_path:{project_path}:ref_type:branch:ref:main"
    return f"{pool.replace('principal://', 'principalSet://')}/attribute.project_path/{project_path}"
