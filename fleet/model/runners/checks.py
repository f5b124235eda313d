"""The checks of the policy's ``runners`` section that its shape cannot say: runners only on clusters of the policy,
for cards they offer, on a pool of their own wherever the fleet builds pools, asking for no more cards than a node
(or a time slice) has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.model.core import pod_contract
from fleet.model.core.catalogue import Catalogue
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.fits import more_than_a_machine, more_than_a_slice
from fleet.model.runners.settings import RunnerSettings
from fleet.model.sharing.settings import SharingSettings

Located = tuple[tuple[object, ...], str]  # (key path in the policy file, message)


def runner_problems(
    runners: Mapping[str, Mapping[str, RunnerSettings]],
    clusters: Mapping[str, tuple[str, Mapping[str, SharingSettings | None]]],
    raw: Mapping[str, Any],
    catalogue: Catalogue,
) -> list[Located]:
    """Every problem of ``runners`` (cluster -> card -> settings), located: ``clusters`` gives each cluster of the
    policy its cloud and its cards with their sharing, ``raw`` the section as written (a list of cards or a mapping)."""
    problems: list[Located] = []
    for name, cards in runners.items():
        where = ("runners", "clusters", name)
        if name not in clusters:
            problems.append((where, f"no cluster named {name!r} (clusters: {', '.join(clusters)})"))
            continue
        cloud, offered = clusters[name]
        listed = isinstance(raw.get(name), list)
        for card, settings in cards.items():
            at = (*where, raw[name].index(card)) if listed else (*where, card)
            if card not in offered:
                problems.append(
                    (
                        at,
                        f"cluster {name} offers no {card} (its cards: {', '.join(offered) or 'none'}); add the "
                        f"card under clusters.{cloud}.{name}.gpus or remove the runner",
                    )
                )
                continue
            offer = catalogue.offer(card, cloud) if cloud_rules(cloud).builds_pools else None
            problems += runner_pool_problems(at, name, cloud, card, settings)
            shared = offered[card] if not settings.own_pool else None
            time_sliced = shared is not None and shared.time_slicing is not None
            if more_than_a_slice(settings.accelerators, time_sliced):
                problems.append(
                    (
                        (*at, "accelerators") if not listed else at,
                        f"a CI job asks for {settings.accelerators} {card}, but the {card} pool is time-sliced: a pod "
                        "gets one slice at most (the device plugin and GKE refuse more)",
                    )
                )
            if offer is not None and more_than_a_machine(settings.accelerators, offer.count):
                problems.append(
                    (
                        (*at, "accelerators") if not listed else at,
                        f"a CI job asks for {settings.accelerators} {card}, but {offer.machine_type} has {offer.count}",
                    )
                )
    return problems


def runner_pool_problems(
    at: tuple[object, ...], cluster: str, cloud: str, card: str, settings: RunnerSettings
) -> list[Located]:
    """A runner's CI jobs get a pool of their own wherever the fleet creates pools; only on an existing cluster,
    whose pools are the site's, may (and must) a runner say ``own_pool: false``."""
    own = settings.own_pool
    builds_pools = cloud_rules(cloud).builds_pools
    if not builds_pools and own:
        return [
            (
                at,
                f"{cluster} is an existing cluster: the fleet creates no node pool there, so the {card} runner's CI "
                f"jobs cannot get a pool of their own ({pod_contract.ci_pool_name(card)}); set own_pool: false to run "
                f"them on the {card} pool beside the benchmarks (which may hold credentials: docs/runners.md), or "
                "remove the runner",
            )
        ]
    if builds_pools and not own:
        return [
            (
                (*at, "own_pool"),
                f"own_pool: false is for existing clusters only: on {cloud} the fleet gives the {card} runner's CI "
                f"jobs a pool of their own ({pod_contract.ci_pool_name(card)}), so a job never shares a node with a "
                "benchmark that holds credentials; remove own_pool",
            )
        ]
    return []
