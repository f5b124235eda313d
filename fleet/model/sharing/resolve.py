"""GPU sharing of a pool (policy: ``sharing``): time-slicing or MIG instances, resolved into the pool's ``Sharing``
(fleet/model/core/card_sharing.py, with the node labels that select the device plugin's configuration)."""

from __future__ import annotations

from fleet.model.core.card_sharing import Sharing
from fleet.model.core.catalogue import Offer
from fleet.model.sharing.settings import SharingSettings


def resolve_sharing(wanted: SharingSettings | None, offer: Offer | None) -> Sharing | None:
    """The pool's sharing (its ``sharing`` settings), resolved: the pods per card of its time-slicing or of its MIG
    profile."""
    if wanted is None:
        return None
    if wanted.time_slicing is not None:
        return Sharing("time-slicing", wanted.time_slicing)
    assert wanted.mig is not None and offer is not None  # the checker refused a profile the offer lacks
    return Sharing("mig", offer.mig_profiles[wanted.mig], wanted.mig)
