"""A site's existing cluster: the fleet builds no pools there, so most rules are the site's."""

from __future__ import annotations

from fleet.model.core.clouds.rules import CloudRules, DoctorContext


class Existing(CloudRules):
    """An existing cluster: no pools built, no sharing configured, the site's autoscaler."""

    name = "existing"
    builds_pools = False
    private_api_endpoint = False
    # a site's own cluster (kubeadm's static pods carry the labels the chart's Services select): the chart's monitors
    control_plane_pods = True
    control_plane_nodes = True

    def sharing_refusal(self) -> str | None:
        """The site's nodes are not the fleet's to configure."""
        return "an existing cluster's nodes are not the fleet's to configure: no sharing"

    def template_fix(self, ctx: DoctorContext) -> str:
        """The site must offer such a node."""
        return f"the site must offer a node (or a node template) with {ctx.resource} and the label {ctx.selector}"

    def label_fix(self, ctx: DoctorContext, nodes: tuple[str, ...]) -> str:
        """The site labels its own nodes."""
        names = " ".join(nodes) or "<node>"
        return f"label the site's {ctx.card} nodes: {ctx.kubectl} label node {names} {ctx.selector.replace(',', ' ')}"


RULES = Existing()
