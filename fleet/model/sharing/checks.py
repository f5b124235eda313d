"""The check of a pool's ``sharing`` that its shape cannot say: the card, the cloud and the MIG profile."""

from __future__ import annotations

from fleet.model.core.catalogue import Accelerator, CloudFacts, Offer
from fleet.model.sharing.settings import SharingSettings


def sharing_problem(
    sharing: SharingSettings, card: str, cloud: str, acc: Accelerator, offer: Offer, facts: CloudFacts
) -> str | None:
    """What is wrong with sharing ``card``'s pool on ``cloud`` this way, or None: an NVIDIA card, on a cloud that can
    share it that way, with a MIG profile the card has."""
    if not acc.is_nvidia:
        return f"{card} is a {acc.resource} accelerator: only NVIDIA GPUs are shared"
    if sharing.time_slicing is not None and not facts.time_slicing:
        return f"{facts.title} pools cannot be time-sliced: their nodes carry no label of ours to configure them"
    if sharing.time_slicing is not None and offer.ami_type.startswith("BOTTLEROCKET"):
        return f"{offer.ami_type} brings its own device plugin, which takes no time-slicing configuration"
    if sharing.mig is not None and not facts.mig_partitioning:
        return f"{facts.title} cannot partition GPUs into MIG instances itself; use time_slicing"
    if sharing.mig is not None and sharing.mig not in offer.mig_profiles:
        have = ", ".join(offer.mig_profiles) or "none: the card has no MIG"
        return f"{card} on {cloud} has no MIG profile {sharing.mig} (its profiles: {have})"
    return None
