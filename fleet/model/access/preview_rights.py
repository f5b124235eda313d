"""What the pull-request preview identity may do in a cluster, and what it must never be able to do.

A ``pulumi preview`` of a Kubernetes object asks the API server for a dry run (pulumi-kubernetes
provider/pkg/await/await.go: ``DryRun: All`` on the create, or a ``get`` of the live object then a dry-run
server-side-apply ``patch`` on an update), so the identity needs ``get``, ``create``, ``update`` and ``patch`` on
the kinds the fleet registers itself, and nothing else:

* no ``list`` or ``watch``: a preview reads no collection (only ``pulumi refresh`` reads, and previews do not
  refresh);
* nothing on Secrets: a dry-run ``patch`` answers with the whole merged object, data included, so even a write
  verb would read every Secret. When a dry run is forbidden the provider previews the object from its inputs
  instead (provider/pkg/provider/provider.go, ``Create``/``Update``: ``apierrors.IsForbidden`` during a preview
  "defaulting to client-side"), so the fleet's own Secrets still show in a preview, from the program's values;
* nothing for Helm releases: ``helm.sh/v3:Release`` previews render the chart client-side (helm_release.go
  ``renderChartManifest``: ``ClientOnly``) and skip the install while previewing; reading a release (its Secret
  ``sh.helm.release.v1.*``, all its values) happens only on refresh or import, which previews do not do;
* no RBAC or admission objects: dry-running a role needs ``escalate``/``bind`` or the rights it grants, and the
  admission configuration is what keeps this identity to dry runs; those objects preview from their inputs;
* nothing outside the fleet's own namespaces: the namespaced kinds are granted by a RoleBinding in each namespace the
  fleet makes on the cluster (``NAMESPACED``), only the cluster-scoped kinds (``CLUSTER_SCOPED``) cluster-wide, so
  the identity reads no ConfigMap, Job or Deployment of ``kube-system`` or of anyone else.

Pulumi versions: pulumi-kubernetes at commit 94977969 (2026-07), the provider the pinned CLI 3.272.0 resolves.
"""

from __future__ import annotations

from fleet.model.access.rbac import Request

NAME = "gpu-fleet-previewer"
VERBS = ("get", "create", "update", "patch")
# (API group, resources): every Kubernetes kind the fleet's components register themselves, except Secrets (and
# the previewer's own RBAC and admission objects). tests/components/kubernetes/test_fencing.py holds this list to
# what the plans register, in both directions.
RESOURCES: dict[str, tuple[str, ...]] = {
    "": ("configmaps", "limitranges", "namespaces", "resourcequotas", "services"),
    "apps": ("deployments",),
    "batch": ("cronjobs", "jobs"),
    "networking.k8s.io": ("networkpolicies",),
    "monitoring.coreos.com": ("podmonitors",),
    "kueue.x-k8s.io": ("clusterqueues", "localqueues", "resourceflavors"),
    "trainer.kubeflow.org": ("trainingruntimes", "trainjobs"),
}
# The cluster-scoped ones among them (granted by a ClusterRoleBinding); the rest only in the fleet's namespaces.
CLUSTER_SCOPED: dict[str, tuple[str, ...]] = {
    "": ("namespaces",),
    "kueue.x-k8s.io": ("clusterqueues", "resourceflavors"),
}
NAMESPACED_NAME = f"{NAME}-namespaced"
# Kinds a preview shows from the program's inputs, never by asking the cluster (see the module's docstring).
CLIENT_SIDE_KINDS = ("Secret", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def rules(cluster_scoped: bool = True) -> list[dict[str, list[str]]]:
    """The previewer's ClusterRole rules, one per API group, its resources named, the preview verbs: of the
    cluster-scoped kinds (``cluster_scoped``), else of the namespaced ones (bound in the fleet's namespaces only)."""
    out = []
    for group, resources in RESOURCES.items():
        scoped = CLUSTER_SCOPED.get(group, ())
        named = [r for r in resources if (r in scoped) is cluster_scoped]
        if named:
            out.append({"apiGroups": [group], "resources": named, "verbs": list(VERBS)})
    return out


def _each(verbs: tuple[str, ...], resource: str, group: str = "", namespace: str = "monitoring") -> list[Request]:
    return [Request(v, resource, group, namespace=namespace) for v in verbs]


# Every right the preview identity must not hold, one request each; the pack (policy/gpufleet_policies/
# preview_access.py), the tests and `doctor` evaluate the rendered RBAC against this list.
REFUSED: tuple[Request, ...] = (
    # a Secret's data: read it, or have a dry-run write answer with it
    *_each(("get", "list", "watch"), "secrets", namespace=""),
    *_each(("get", "list", "watch", "create", "update", "patch", "delete"), "secrets"),
    Request("get", "secrets", namespace="monitoring", name="sh.helm.release.v1.kps.v1"),
    # logs, and the proxies to the kubelet, services and pods
    *_each(("get",), "pods/log"),
    *_each(("get", "create"), "nodes/proxy", namespace=""),
    *_each(("get", "create"), "services/proxy"),
    *_each(("get", "create"), "pods/proxy"),
    # tokens, and running commands in pods
    *_each(("create",), "serviceaccounts/token"),
    *_each(("get", "create"), "pods/exec"),
    *_each(("get", "create"), "pods/attach"),
    *_each(("get", "create"), "pods/portforward"),
    *_each(("update", "patch"), "pods/ephemeralcontainers"),
    # deploy-only: granting rights, acting as others, the admission configuration, deleting
    *_each(("escalate", "bind"), "clusterroles", "rbac.authorization.k8s.io", namespace=""),
    *_each(("create", "patch"), "clusterrolebindings", "rbac.authorization.k8s.io", namespace=""),
    *_each(("impersonate",), "users", namespace=""),
    *_each(("impersonate",), "serviceaccounts"),
    *_each(("patch", "delete"), "validatingadmissionpolicies", "admissionregistration.k8s.io", namespace=""),
    *_each(("patch", "delete"), "validatingadmissionpolicybindings", "admissionregistration.k8s.io", namespace=""),
    *_each(("create",), "certificatesigningrequests", "certificates.k8s.io", namespace=""),
    *_each(("delete", "deletecollection"), "namespaces", namespace=""),
    *_each(("delete",), "deployments", "apps"),
    Request("get", path="/logs/"),
    # reads outside the fleet's namespaces, and cluster-wide reads of namespaced kinds
    *(Request("get", r, g, namespace="kube-system") for g, r in (("", "configmaps"), ("apps", "deployments"))),
    *(Request("get", r, g, namespace="default") for g, r in (("batch", "jobs"), ("", "configmaps"))),
    *(Request("get", r, g) for g, r in (("", "configmaps"), ("batch", "jobs"), ("apps", "deployments"))),
)
