"""GPU sharing of a pool (policy: ``sharing``): time-slicing or MIG instances, resolved, and the node labels that
select the device plugin's configuration."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.model.catalogue import Offer
from fleet.model.spec_schema import PoolSettings

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


def resolve_sharing(settings: PoolSettings, offer: Offer | None) -> Sharing | None:
    """The pool's sharing, resolved: the pods per card of its time-slicing or of its MIG profile."""
    wanted = settings.sharing
    if wanted is None:
        return None
    if wanted.time_slicing is not None:
        return Sharing("time-slicing", wanted.time_slicing)
    assert wanted.mig is not None and offer is not None  # the checker refused a profile the offer lacks
    return Sharing("mig", offer.mig_profiles[wanted.mig], wanted.mig)
