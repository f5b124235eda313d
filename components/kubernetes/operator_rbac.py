"""The RBAC of the kube-prometheus-stack release, declared by the fleet so the Prometheus Operator reads no Secret
outside the monitoring namespace.

kube-prometheus-stack 79.5.0 gives the operator one ClusterRole with ``*`` on ``configmaps`` and ``secrets``
(templates/prometheus-operator/clusterrole.yaml) and has no value that makes it namespaced; its only switch,
``global.rbac.create``, drops every role of the release at once (the operator's, Prometheus', the admission
webhook job's: every template that reads it). The operator itself works with namespaced rights when told where to
look (prometheus-operator v0.86.2, the chart's appVersion): with ``--namespaces`` and the
``--*-instance-namespaces`` flags its ConfigMap, Secret and StatefulSet informers list and watch only the
namespaces of its Prometheus and Alertmanager (pkg/prometheus/server/operator.go and pkg/alertmanager/operator.go,
``NewMetadataInformerFactory(allowList, ...)``; pkg/operator/config.go ``Namespaces.Finalize`` fills an unset instance
list from ``--namespaces``), and it checks its rights namespace by namespace (cmd/operator/main.go
``checkPrerequisites`` -> pkg/k8sutil ``IsAllowed`` with one SelfSubjectAccessReview per allowed namespace). Monitors'
own Secrets are read one by one with ``get`` in the monitor's namespace (pkg/assets/store.go); none of the fleet's
monitors names one.

So the release runs with ``global.rbac.create: false`` (``prometheus_values``) and this module declares what the
chart would have, rule for rule, except that the operator's ``configmaps``/``secrets`` rule is a Role in the
monitoring namespace instead of part of its ClusterRole. tests/components/kubernetes/test_chart_rbac.py renders the
chart with ``global.rbac.create: true`` and checks these rules against the chart's own.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

_RBAC_API = "rbac.authorization.k8s.io"

# templates/prometheus-operator/clusterrole.yaml of kube-prometheus-stack 79.5.0 (the same rules as
# prometheus-operator v0.86.2 example/rbac/prometheus-operator/prometheus-operator-cluster-role.yaml), but the
# configmaps/secrets rule, which OPERATOR_NAMESPACED_RULES grants in the monitoring namespace only.
OPERATOR_CLUSTER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["monitoring.coreos.com"],
        "resources": [
            "alertmanagers",
            "alertmanagers/finalizers",
            "alertmanagers/status",
            "alertmanagerconfigs",
            "prometheuses",
            "prometheuses/finalizers",
            "prometheuses/status",
            "prometheusagents",
            "prometheusagents/finalizers",
            "prometheusagents/status",
            "thanosrulers",
            "thanosrulers/finalizers",
            "thanosrulers/status",
            "scrapeconfigs",
            "scrapeconfigs/status",
            "servicemonitors",
            "servicemonitors/status",
            "podmonitors",
            "podmonitors/status",
            "probes",
            "probes/status",
            "prometheusrules",
        ],
        "verbs": ["*"],
    },
    {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
    {
        "apiGroups": [""],
        "resources": ["services", "services/finalizers", "endpoints"],
        "verbs": ["get", "create", "update", "delete"],
    },
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["patch", "create"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get"]},
    {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "verbs": ["get", "create", "list", "watch", "update", "delete"],
    },
]
# The chart's configmaps/secrets rule, now a Role of the monitoring namespace: the operator writes the generated
# configuration, TLS assets and rule ConfigMaps of its Prometheus and Alertmanager there.
OPERATOR_NAMESPACED_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["*"]}
]
# templates/prometheus/clusterrole.yaml (kube-prometheus-stack 79.5.0; no kube-rbac-proxy rules: the fleet keeps the
# node exporter's and kube-state-metrics' kubeRBACProxy off, the chart's default)
PROMETHEUS_CLUSTER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["nodes", "nodes/metrics", "services", "endpoints", "pods"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
    {"nonResourceURLs": ["/metrics", "/metrics/cadvisor"], "verbs": ["get"]},
]
# templates/prometheus-operator/admission-webhooks/job-patch/clusterrole.yaml and role.yaml: the hook Jobs that make
# the webhook's certificate Secret and patch it into the webhook configurations.
ADMISSION_CLUSTER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
        "verbs": ["get", "update"],
    }
]
ADMISSION_NAMESPACED_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]}
]


def release_rbac(
    prefix: str, release: str, namespace: pulumi.Input[str], labels: dict[str, str], opts: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """The roles and bindings of kube-prometheus-stack release ``release`` in ``namespace``, named as the chart
    names them (``<release>-operator``, ``-prometheus``, ``-admission``; bound to its service accounts of those
    names): the operator's Secret and ConfigMap rights only in ``namespace``."""
    out: list[pulumi.Resource] = []

    def bound(suffix: str, rules: list[dict[str, Any]], cluster_wide: bool) -> None:
        name = f"{release}-{suffix}"
        scope = "cluster" if cluster_wide else "ns"
        meta: dict[str, Any] = {"name": name, "labels": labels}
        if not cluster_wide:
            meta["namespace"] = namespace
        role_type = k8s.rbac.v1.ClusterRole if cluster_wide else k8s.rbac.v1.Role
        binding_type = k8s.rbac.v1.ClusterRoleBinding if cluster_wide else k8s.rbac.v1.RoleBinding
        role = role_type(f"{prefix}-{suffix}-{scope}-role", metadata=meta, rules=rules, opts=opts)
        binding = binding_type(
            f"{prefix}-{suffix}-{scope}-binding",
            metadata=meta,
            role_ref={"apiGroup": _RBAC_API, "kind": "ClusterRole" if cluster_wide else "Role", "name": name},
            subjects=[{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            opts=opts,
        )
        out.extend([role, binding])

    bound("operator", OPERATOR_CLUSTER_RULES, cluster_wide=True)
    bound("operator", OPERATOR_NAMESPACED_RULES, cluster_wide=False)
    bound("prometheus", PROMETHEUS_CLUSTER_RULES, cluster_wide=True)
    bound("admission", ADMISSION_CLUSTER_RULES, cluster_wide=True)
    bound("admission", ADMISSION_NAMESPACED_RULES, cluster_wide=False)
    return out
