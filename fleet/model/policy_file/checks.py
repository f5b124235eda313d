"""The policy file's cross-key checks: what the JSON Schema cannot say (clusters against the catalogue and the
cloud's rules, workloads against their folders), each problem located in the file, with each feature's own checks
(fleet/model/<feature>/checks.py: sharing, runners, queues, monitoring) run in their place."""

from __future__ import annotations

import re

from fleet.model.core.catalogue import Accelerator, Catalogue, Offer, version_key
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.errors import Problem, did_you_mean
from fleet.model.core.fits import more_than_a_machine, more_than_a_slice
from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import YamlDocument, read_yaml
from fleet.model.monitoring.checks import monitoring_problems
from fleet.model.policy_file.schema import FleetFile, PoolSettings
from fleet.model.queues.checks import check_queued_workloads, check_queues
from fleet.model.queues.dispatch import pool_capacity
from fleet.model.runners.checks import runner_problems
from fleet.model.sharing.checks import sharing_problem

CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


class Checker:
    """Cross-key rules of the policy file, collecting every problem with its line."""

    def __init__(self, doc: YamlDocument, spec: FleetFile, catalogue: Catalogue, workloads: dict[str, Workload]):
        self.doc, self.spec, self.catalogue, self.workloads = doc, spec, catalogue, workloads
        self.problems: list[Problem] = []
        self.early_warnings: list[str] = []  # found while checking, shown with warnings()

    def report(self, path: tuple[object, ...], message: str) -> None:
        self.problems.append(self.doc.problem(path, message))

    def warn(self, path: tuple[object, ...], message: str) -> None:
        self.early_warnings.append(str(self.doc.problem(path, message)))

    def card_path(self, cluster_path: tuple[object, ...], card: str) -> tuple[object, ...]:
        """Key path of a card whether the cluster lists cards or maps them to settings."""
        raw = self.doc.data["clusters"][cluster_path[1]][cluster_path[2]].get("gpus")
        if isinstance(raw, list):
            return (*cluster_path, "gpus", raw.index(card))
        return (*cluster_path, "gpus", card)

    def check_clusters(self) -> None:
        seen: dict[str, str] = {}
        central = []
        for cloud, clusters in self.spec.clusters.items():
            for name, settings in clusters.items():
                path = ("clusters", cloud, name)
                if not CLUSTER_NAME.match(name):
                    self.report(
                        path,
                        f"cluster name {name!r} must be a DNS-1123 label: lower-case letters, digits and '-', "
                        "starting with a letter, at most 40 characters",
                    )
                if name in seen:
                    self.report(path, f"cluster name {name!r} is used twice (also under clusters.{seen[name]})")
                seen[name] = cloud
                if settings.central:
                    central.append(path)
                self.check_location(cloud, path, settings.region, settings.zone)
                for card, pool in settings.gpus.items():
                    self.check_card(cloud, path, card, pool, settings.zone)
                if settings.site_provides and cloud_rules(cloud).builds_pools:
                    self.report(
                        (*path, "site_provides"),
                        f"only for existing clusters: on {cloud} the fleet builds the cluster and installs what it "
                        "needs; remove site_provides",
                    )
        if not central:
            self.report(
                ("clusters",), "no cluster is marked 'central: true': exactly one must hold the central Prometheus"
            )
        for path in central[1:]:
            first = ".".join(str(p) for p in central[0])
            self.report(
                (*path, "central"),
                f"a second central cluster: only one may hold the central Prometheus (first: {first})",
            )

    def check_runners(self) -> None:
        """The runners (fleet/model/runners/checks.py), each problem located in the file."""
        cards = {
            name: (cloud, {card: pool.sharing for card, pool in c.gpus.items()})
            for cloud, cs in self.spec.clusters.items()
            for name, c in cs.items()
        }
        raw = (self.doc.data.get("runners") or {}).get("clusters") or {}
        for path, message in runner_problems(self.spec.runners.clusters, cards, raw, self.catalogue):
            self.report(path, message)

    def offered(self) -> dict[str, tuple[str, frozenset[str]]]:
        """Every cluster of the policy: its cloud and the cards it offers."""
        return {
            name: (cloud, frozenset(c.gpus))
            for cloud, clusters in self.spec.clusters.items()
            for name, c in clusters.items()
        }

    def check_queues(self) -> None:
        """The fleet-wide queues (fleet/model/queues/): a known manager that is no worker, known clusters that offer
        the queue's cards."""
        if self.spec.queues is None:
            return
        self.problems.extend(check_queues(self.doc, self.spec.queues, self.offered(), self.catalogue))
        central = [n for cs in self.spec.clusters.values() for n, c in cs.items() if c.central]
        manager = self.spec.queues.manager
        if central and manager in self.offered() and manager != central[0]:
            self.report(
                ("queues", "manager"),
                f"the manager reads every worker's stack outputs, as the central cluster ({central[0]}) reads every "
                f"leaf's, and is deployed after them: make the central cluster the manager (manager: {central[0]})",
            )

    def check_queued_workloads(self) -> None:
        """Workloads that name a queue (fleet/model/queues/): a known queue, cards it serves, a Job it can
        dispatch."""
        self.problems.extend(
            check_queued_workloads(
                self.doc, self.spec.workloads, self.spec.queues, self.workloads, self.offered(), self.catalogue
            )
        )

    def check_monitoring(self) -> None:
        """The monitoring settings (fleet/model/monitoring/checks.py)."""
        for key, message in monitoring_problems(self.spec.monitoring):
            self.report(("monitoring", key), message)

    def check_location(self, cloud: str, path: tuple[object, ...], region: str | None, zone: str | None) -> None:
        """A region and zone the cloud has (the catalogue's lists, with their source), consistent with each other."""
        rules = cloud_rules(cloud)
        for sub_key, message in rules.location_problems(region, zone):
            self.report((*path, *sub_key), message)
        known = self.catalogue.clouds[cloud].locations  # type: ignore[index]
        if known is None:
            return
        title = self.catalogue.clouds[cloud].title  # type: ignore[index]
        regions = known.all_regions
        region_ok = region is None or region in regions
        if not region_ok:
            example = rules.region_example or regions[0]
            elsewhere = self._elsewhere(region, cloud)
            near = "" if elsewhere else did_you_mean(region, regions)
            self.report(
                (*path, "region"),
                f"{region!r} is not a region of {title}{elsewhere}; expected one such as {example}{near} (the "
                f"catalogue's list: {known.cited_as}; a newer region goes into fleet/model/core/catalogue.yaml)",
            )
        if rules.zonal and zone and not known.has_zone(zone):
            elsewhere = self._elsewhere(zone, cloud)
            near = "" if elsewhere else did_you_mean(zone, known.all_zones)
            self.report(
                (*path, "zone"),
                f"{zone!r} is not a zone of {title}{elsewhere}; expected a region and a zone letter such as "
                f"us-central1-a{near} (the catalogue's list: {known.cited_as}; a newer zone goes into "
                "fleet/model/core/catalogue.yaml)",
            )
        elif rules.zonal and region_ok and region and zone and not zone.startswith(region + "-"):
            self.report((*path, "zone"), f"zone {zone!r} is not in region {region!r}")

    def _elsewhere(self, name: str, cloud: str) -> str:
        """`` ('eastus' is an Azure region)`` when ``name`` is a location of another cloud, else empty."""
        for other, facts in self.catalogue.clouds.items():
            known = facts.locations
            if other == cloud or known is None:
                continue
            if name in known.all_regions:
                return f" ({name!r} is a region of {facts.title})"
            if name in known.all_zones:
                return f" ({name!r} is a zone of {facts.title})"
        return ""

    def check_kubernetes_versions(self) -> tuple[str, ...]:
        """Each managed cluster's Kubernetes version against the versions its cloud supports (the catalogue's
        calendar, as of its date): one no longer supported is a problem, with the supported range; one newer than the
        catalogue knows is a warning (the cloud may have it already). Returns the warnings."""
        warnings: list[str] = []
        default = self.spec.defaults.kubernetes_version
        # by (cloud, where the version is written) -> the clusters that take it from there
        users: dict[tuple[str, tuple[object, ...]], list[str]] = {}
        for cloud, clusters in self.spec.clusters.items():
            for name, settings in clusters.items():
                own = settings.kubernetes_version is not None
                where = ("clusters", cloud, name, "kubernetes_version") if own else ("defaults", "kubernetes_version")
                users.setdefault((cloud, where), []).append(name)
        for (cloud, where), names in users.items():
            facts = self.catalogue.clouds[cloud]  # type: ignore[index]
            calendar = facts.kubernetes_versions
            ignored = cloud_rules(cloud).kubernetes_version_refusal()
            if ignored is not None and where[0] == "clusters":
                warnings.append(str(self.doc.problem(where, ignored)))
            if calendar is None or not calendar.supported:
                continue
            version = default if where[0] == "defaults" else self.spec.clusters[cloud][names[0]].kubernetes_version  # type: ignore[index]
            assert version is not None
            supported = calendar.supported
            oldest, newest = supported[0], supported[-1]
            taken = f" (taken by {', '.join(names)})" if where[0] == "defaults" else ""
            if version_key(version) < version_key(oldest):
                self.report(
                    where,
                    f"Kubernetes {version}{taken} is no longer supported by {facts.title}: it supports {oldest} to "
                    f"{newest} (as of {calendar.as_of}; {calendar.cited_as}); use one of them, such as "
                    f'kubernetes_version: "{newest}"',
                )
            elif version_key(version) > version_key(newest):
                warnings.append(
                    str(
                        self.doc.problem(
                            where,
                            f"Kubernetes {version}{taken} is newer than the newest {facts.title} version the catalogue "
                            f"knows ({newest}, as of {calendar.as_of}): check that {facts.title} offers it, then add "
                            "it to fleet/model/core/catalogue.yaml",
                        )
                    )
                )
        return tuple(warnings)

    def check_card(
        self, cloud: str, path: tuple[object, ...], card: str, pool: PoolSettings, zone: str | None = None
    ) -> None:
        where = self.card_path(path, card)
        acc = self.catalogue.accelerators.get(card)
        if acc is None:
            known = list(self.catalogue.accelerators)
            self.report(
                where, f"unknown card {card!r}{did_you_mean(card, known)}; the catalogue knows: {', '.join(known)}"
            )
            return
        defaults = self.spec.defaults.gpu_pool
        lo = pool.min_nodes if pool.min_nodes is not None else defaults.min_nodes
        hi = pool.max_nodes if pool.max_nodes is not None else defaults.max_nodes
        if lo > hi:
            self.report(where, f"min_nodes {lo} is above max_nodes {hi}")
        rules = cloud_rules(cloud)
        if not rules.builds_pools:
            refusal = rules.sharing_refusal()
            if pool.sharing is not None and refusal is not None:
                self.report((*where, "sharing"), refusal)
            return
        offer = acc.offers.get(cloud)  # type: ignore[call-overload]
        if offer is None:
            have = ", ".join(self.catalogue.available_on(cloud))
            self.report(where, f"{cloud} has no {card} ({acc.model}); cards on {cloud}: {have}")
        elif offer.status == "retired":
            self.report(
                where,
                f"{card} ({acc.model}) was retired on {cloud} on {offer.retired_on} ({offer.note}); "
                f"use one of: {', '.join(offer.alternatives)}",
            )
        elif pool.sharing is not None:
            self.check_sharing(cloud, where, card, acc, offer, pool)
        if offer is not None and zone is not None and (found := offer.zone_warning(card, cloud, zone)):
            self.warn(where, found)  # a warning: the catalogue lists only the zones read upstream

    def check_sharing(
        self, cloud: str, where: tuple[object, ...], card: str, acc: Accelerator, offer: Offer, pool: PoolSettings
    ) -> None:
        """A shared pool (fleet/model/sharing/checks.py), its problem located at its ``sharing`` key."""
        assert pool.sharing is not None
        message = sharing_problem(pool.sharing, card, cloud, acc, offer, self.catalogue.clouds[cloud])  # type: ignore[index]
        if message is not None:
            self.report((*where, "sharing") if not isinstance(where[-1], int) else where, message)

    def check_workloads(self) -> None:
        known_cards = self.catalogue.accelerators
        kinds_known = sorted({acc.resource for acc in known_cards.values()})
        for wl in self.workloads.values():
            unknown_kinds = sorted(set(wl.spec.accelerator_kinds) - set(kinds_known))
            if unknown_kinds:
                self.problems.append(
                    read_yaml(wl.folder / "workload.yaml").problem(
                        ("accelerator_kinds",),
                        f"unknown kind(s) {', '.join(unknown_kinds)}; the catalogue's: {', '.join(kinds_known)}",
                    )
                )
        for name, placement in self.spec.workloads.items():
            path = ("workloads", name)
            wl = self.workloads.get(name)
            if wl is None:
                have = ", ".join(self.workloads) or "none"
                self.report(
                    path, f"no workload definition {name!r} (expected workloads/{name}/workload.yaml; defined: {have})"
                )
            raw = self.doc.data["workloads"][name]
            if placement.scale is not None and wl is not None and wl.spec.distributed is None:
                self.report(
                    (*path, "scale"),
                    f"{name} cannot run as one job over many accelerators: a sweep needs `distributed` in "
                    f"{name}/workload.yaml (see workloads/3dgan-jax)",
                )
            elif placement.scale is not None and wl is not None and wl.spec.needs_root:
                self.report(
                    (*path, "scale"),
                    f"{name} needs root (needs_root in its workload.yaml), but sweep jobs run under Pod Security "
                    "`restricted` in the benchmarks namespace: build its image to run as a user first",
                )
            for i, card in enumerate(placement.gpus):
                where = (*path, *((i,) if isinstance(raw, list) else ("gpus", i)))
                if card == "all":
                    continue
                acc = known_cards.get(card)
                if acc is None:
                    self.report(
                        where,
                        f"unknown card {card!r}{did_you_mean(card, list(known_cards))}; the catalogue knows: "
                        f"{', '.join(known_cards)}",
                    )
                elif wl and acc.resource not in wl.spec.accelerator_kinds:
                    self.report(
                        where,
                        f"{name} runs on {', '.join(wl.spec.accelerator_kinds)} (accelerator_kinds in its "
                        f"workload.yaml), but {card} is a {acc.resource} card",
                    )
                elif wl and placement.scale is None:
                    self.check_accelerators_fit(where, wl, card)

    def check_accelerators_fit(self, where: tuple[object, ...], wl: Workload, card: str) -> None:
        """A pod asks for ``accelerators`` cards: every machine of ``card`` in the fleet must hold that many, and no
        pool of the card may be time-sliced if it asks for more than one (a pod gets one slice at most)."""
        sliced = []
        for clusters in self.spec.clusters.values():
            for name, cluster in clusters.items():
                sharing = cluster.gpus[card].sharing if card in cluster.gpus else None
                if sharing is not None and sharing.time_slicing is not None:
                    sliced.append(name)
        if more_than_a_slice(wl.spec.accelerators, bool(sliced)):
            self.report(
                where,
                f"{wl.name} asks for {wl.spec.accelerators} {card} per pod, but {card} is time-sliced on "
                f"{', '.join(sliced)}: a pod gets one slice at most",
            )
        for cloud, clusters in self.spec.clusters.items():
            offer = self.catalogue.accelerators[card].offers.get(cloud)  # type: ignore[call-overload]
            if offer is None or not cloud_rules(cloud).builds_pools:
                continue
            offering = [n for n, c in clusters.items() if card in c.gpus]
            if offering and more_than_a_machine(wl.spec.accelerators, offer.count):
                self.report(
                    where,
                    f"{wl.name} asks for {wl.spec.accelerators} {card} per pod, but {offer.machine_type} on {cloud} "
                    f"(clusters {', '.join(offering)}) has {offer.count}",
                )

    def warnings(self, fleet: Fleet) -> tuple[str, ...]:
        """Placements no cluster can run, runners whose jobs cannot all run at once: allowed, but most likely a
        mistake."""
        offered = {card for clusters in self.spec.clusters.values() for c in clusters.values() for card in c.gpus}
        found = [*self.early_warnings] + [
            str(self.doc.problem(("workloads", name), f"no cluster offers any of its cards ({', '.join(cards)})"))
            for name, cards in fleet.placements.items()
            if not set(cards) & offered
        ]
        for cluster, sweeps in fleet.sweeps.items():
            for workload, card, n, why in sweeps.left_out:
                found.append(
                    str(
                        self.doc.problem(
                            ("workloads", workload, "scale"),
                            f"{cluster} leaves out the point {n} on {card}: {why}",
                        )
                    )
                )
            where = fleet.clusters[cluster]
            if sweeps.points and where.checkpoint_claim is None:
                found.append(
                    str(
                        self.doc.problem(
                            ("clusters", where.cloud, cluster),
                            f"{cluster} runs sweep jobs without checkpoint_claim: a job restarted after a preemption "
                            "starts again from its first epoch",
                        )
                    )
                )
        for worker, workload, card, n in fleet.queued_sweeps.passed_over:
            point = next(
                p for p in fleet.queued_points() if (p.workload.name, p.card, p.accelerators) == (workload, card, n)
            )
            room = [p for p in fleet.clusters[worker].pools if p.card == card and pool_capacity(p) >= n]
            trap = (
                f"; but its {card} pool's quota holds {n} cards, so Kueue there may admit the point on that pool's "
                "flavor (it matches the card's label only) and its pods wait the scale-up allowance before it goes "
                "back to the manager: lower that pool's max_nodes, or take the worker out of the queue"
                if room
                else ""
            )
            found.append(
                str(
                    self.doc.problem(
                        ("workloads", workload, "scale"),
                        f"{worker} cannot hold the point {n} on {card} ({point.nodes} node(s) of {point.per_node} "
                        f"cards, the shape queue {point.queue.name} gives it): Kueue there never admits it, and with "
                        f"spill: ordered it waits a round (5 minutes) before the next cluster is tried{trap}",
                    )
                )
            )
        for cluster, runners in fleet.runners.items():
            for r in runners:
                if not r.own_pool:
                    found.append(
                        str(
                            self.doc.problem(
                                ("runners", "clusters", cluster, r.pool.card, "own_pool"),
                                f"the {r.pool.card} runner's CI jobs run on the {r.pool.name} pool beside the "
                                "benchmarks (own_pool: false): a CI job may share a node with a benchmark that holds "
                                "credentials",
                            )
                        )
                    )
                room = r.pool.max_nodes * r.pool.units_per_node
                if r.concurrency * r.accelerators > room:
                    found.append(
                        str(
                            self.doc.problem(
                                ("runners", "clusters", cluster),
                                f"the {r.pool.card} runner takes {r.concurrency} jobs of {r.accelerators} card(s) at "
                                f"once, but its pool holds {room} at most (max_nodes {r.pool.max_nodes}): the others "
                                "wait, then fail after the runner's poll timeout; lower concurrency or raise max_nodes",
                            )
                        )
                    )
        return tuple(found)
