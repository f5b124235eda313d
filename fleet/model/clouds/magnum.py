"""OpenStack Magnum: the fleet's rules for it (the SDK calls are in components/clusters/magnum.py)."""

from __future__ import annotations

from fleet.model import pod_contract
from fleet.model.clouds.rules import CloudRules, DoctorContext, PoolView, Registration

# The fullnameOverride of the fleet's GPU cluster-autoscaler release on Magnum (components/clusters/magnum.py).
GPU_AUTOSCALER = "cluster-autoscaler-gpu"


class Magnum(CloudRules):
    """Magnum: a site's own cloud (no fixed regions), the stack's kubeTag decides Kubernetes, no private endpoint."""

    name = "openstack"
    kubernetes_version_from_stack = True
    private_api_endpoint = False
    pool_type = "openstack:containerinfra/nodeGroup:NodeGroup"

    def kubernetes_version_refusal(self) -> str | None:
        """Magnum runs the Kubernetes of the kubeTag in the stack file."""
        return (
            "ignored on OpenStack Magnum: the cluster runs the Kubernetes of the kubeTag in its stack file's "
            "gpu-fleet:magnum settings (docs/clouds.md, Magnum upgrades); remove this line"
        )

    def read_pool(self, registration: Registration) -> PoolView:
        """A ``NodeGroup``: its role names the card; no spot, no taints of ours."""
        inputs = registration.inputs
        labels = inputs.get("labels", {})
        return PoolView(
            registration.type, registration.name, pod_contract.card_of_pool(inputs.get("role", "")) or "",
            inputs.get("flavorId", ""), inputs.get("minNodeCount"), inputs.get("maxNodeCount"), False, (), labels,
            pod_contract.is_ci_pool(inputs.get("role", "")),
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
