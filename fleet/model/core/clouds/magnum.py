"""OpenStack Magnum: the fleet's rules for it (the SDK calls are in components/clusters/magnum.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.clouds.rules import CloudRules, DoctorContext, PoolView, Registration, open_to_all

# The fullnameOverride of the fleet's GPU cluster-autoscaler release on Magnum (components/clusters/magnum.py).
GPU_AUTOSCALER = "cluster-autoscaler-gpu"
# Who may reach the API through the masters' load balancer: a comma-separated CIDR list, applied by Octavia
# (magnum 11.0.0 and later, label master_lb_allowed_cidrs, doc/source/user/index.rst; Heat ussuri, Octavia train).
# The Magnum Kubernetes driver named by the Cluster API Helm chart (magnum-capi-helm) reads the same allow-list from
# api_master_lb_allowed_cidrs; upstream removed the heat driver after 22.0.0 (openstack/magnum 31b84327), so the
# template sets both labels (components/clusters/magnum.py), and each driver reads its own.
API_CIDRS_LABELS = ("master_lb_allowed_cidrs", "api_master_lb_allowed_cidrs")

# A node group's own Magnum labels reach its nodes' kubelet (openstack/magnum 20.0.0, heat driver): a group other
# than the defaults is a Heat stack of its own built from that group's labels (drivers/heat/driver.py
# create_nodegroup -> _create_stack(nodegroups=[nodegroup]); template_def.py _get_relevant_labels returns
# nodegroups[0].labels), whose `kubelet_options` label (k8s_template_def.py label_list; kubeminion.yaml
# $KUBELET_OPTIONS) is appended to the kubelet's arguments (fragments/configure-kubernetes-minion.sh
# `KUBELET_ARGS="${KUBELET_ARGS} ${KUBELET_OPTIONS}"`). The group's labels replace the cluster's unless
# merge_labels is set (api/controllers/v1/nodegroup.py post). The kubelet's --register-with-taints registers the node
# with those taints (`<key>=<value>:<effect>`, comma separated; kubelet command-line reference).
KUBELET_OPTIONS = "kubelet_options"
REGISTER_WITH_TAINTS = "--register-with-taints="


def kubelet_options_with_taints(taints: Iterable[str], site_options: str = "") -> str:
    """The ``kubelet_options`` label of a node group whose nodes register with ``taints`` (``key=value:Effect``):
    the site's own options (its ``extraLabels``, which the group's label would otherwise replace) and
    ``--register-with-taints``."""
    flag = REGISTER_WITH_TAINTS + ",".join(taints)
    return f"{site_options} {flag}".strip()


def registered_taints(labels: Mapping[str, str]) -> tuple[str, ...]:
    """The taints (``key=value:Effect``) a node group's ``kubelet_options`` label registers its nodes with."""
    found: list[str] = []
    for option in str(labels.get(KUBELET_OPTIONS, "")).split():
        if option.startswith(REGISTER_WITH_TAINTS):
            found += [t for t in option.removeprefix(REGISTER_WITH_TAINTS).split(",") if t]
    return tuple(found)


class Magnum(CloudRules):
    """Magnum: a site's own cloud (no fixed regions), the stack's kubeTag decides Kubernetes, no private endpoint."""

    name = "openstack"
    kubernetes_version_from_stack = True
    private_api_endpoint = False
    # the engine types of pulumi_openstack 5.5.3 containerinfra.Cluster, ClusterTemplate (whose labels hold the API
    # allow-list) and NodeGroup
    cluster_type = "openstack:containerinfra/cluster:Cluster"
    api_endpoint_type = "openstack:containerinfra/clusterTemplate:ClusterTemplate"
    pool_type = "openstack:containerinfra/nodeGroup:NodeGroup"
    # A node group has a flavor, an image, a role, counts and Magnum labels (driver parameters): no Kubernetes labels
    # or taints of ours and no spot capacity (pulumi_openstack 5.5.3 containerinfra NodeGroupArgs); the heat driver
    # labels its nodes magnum.openstack.org/role=<role>, which the catalogue's pool_selector selects.
    pool_labels = False
    pool_taints = False
    spot_pools = False
    # The heat driver runs kube-scheduler, kube-controller-manager, kube-apiserver and kube-proxy as systemd units
    # around `podman run` (openstack/magnum 20.0.0 fragments/configure-kubernetes-master.sh, kube-scheduler.service
    # "via Hyperkube"; configure-kubernetes-minion.sh kube-proxy.service) and etcd the same way (configure-etcd.sh
    # etcd.service): no pod for a Service to select. Magnum's own monitoring lists the masters' IPs
    # instead (helm/prometheus-operator.sh kubeEtcd/kubeScheduler.endpoints: ${KUBE_MASTERS_PRIVATE}).
    control_plane_pods = False
    # its masters register as nodes with the control-plane label and taint (fragments/enable-services-master.sh,
    # configure-kubernetes-master.sh), where the fleet's GPU autoscaler runs
    control_plane_nodes = True

    def kubernetes_version_refusal(self) -> str | None:
        """Magnum runs the Kubernetes of the kubeTag in the stack file."""
        return (
            "ignored on OpenStack Magnum: the cluster runs the Kubernetes of the kubeTag in its stack file's "
            "gpu-fleet:magnum settings (docs/clouds.md, Magnum upgrades); remove this line"
        )

    def api_open(self, inputs: dict[str, Any]) -> bool:
        """A template whose load-balancer allow-list (the heat driver's label) is missing, empty or 0.0.0.0/0."""
        cidrs = str((inputs.get("labels") or {}).get(API_CIDRS_LABELS[0]) or "")
        return open_to_all([c for c in cidrs.split(",") if c])

    def read_pool(self, registration: Registration) -> PoolView:
        """A ``NodeGroup``: its role names the card; no spot; the taints its ``kubelet_options`` label registers
        (a CI group's); its Magnum labels are driver parameters, not node labels."""
        inputs = registration.inputs
        magnum_labels = inputs.get("labels") or {}
        return PoolView(
            registration.type, registration.name, pod_contract.card_of_pool(inputs.get("role", "")) or "",
            inputs.get("flavorId", ""), inputs.get("minNodeCount"), inputs.get("maxNodeCount"), False,
            registered_taints(magnum_labels), {}, pod_contract.is_ci_pool(inputs.get("role", "")),
        )  # fmt: skip

    def autoscaler_logs(self, kubectl: str) -> str:
        """The fleet's own GPU autoscaler's logs."""
        return f"{kubectl} -n kube-system logs deploy/{GPU_AUTOSCALER} --tail=100"

    def template_fix(self, ctx: DoctorContext) -> str:
        """Magnum's autoscaler cannot scale a GPU node group up from zero."""
        return (
            "Magnum's autoscaler cannot scale a GPU node group up from zero (its template has no "
            f"{ctx.resource}): set min_nodes: 1 under {ctx.policy_key} in the policy file, then {ctx.up}"
        )

    def label_fix(self, ctx: DoctorContext, nodes: tuple[str, ...]) -> str:
        """The node group's role gives its nodes their labels."""
        return (
            f"the Magnum node group of {ctx.card} must have the role {ctx.pool_name} (its nodes get {ctx.selector}): "
            f"{ctx.up}"
        )


RULES = Magnum()
