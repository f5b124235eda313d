"""How a pool's cards are shared, resolved (fleet/model/sharing/ resolves the policy's ``sharing``), and the node
labels that select the device plugin's configuration."""

from __future__ import annotations

from dataclasses import dataclass

# The node label naming the device plugin's configuration a node uses (NVIDIA/k8s-device-plugin v0.17.1 README,
# "Updating Per-Node Configuration With a Node Label"; the chart's config-manager reads it), and the fleet's own label
# telling how a pool's cards are shared.
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
SHARING_LABEL = "gpu-fleet.io/sharing"


@dataclass(frozen=True)
class Sharing:
    """How a pool's cards are shared: ``units`` pods per card, by time-slicing or as MIG instances of ``profile``."""

    kind: str  # "time-slicing" or "mig"
    units: int  # pods per card: the time slices, or the profile's instances per card
    profile: str = ""  # the MIG profile

    @property
    def name(self) -> str:
        """``time-slicing-4`` or ``mig-1g.5gb``: the device plugin configuration's name and the sharing label."""
        return f"time-slicing-{self.units}" if self.kind == "time-slicing" else f"mig-{self.profile}"
