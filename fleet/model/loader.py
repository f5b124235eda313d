"""The loader: ``policy/fleet.yaml`` checked against the catalogue and the workload folders, then resolved.

``load_fleet`` is the only way in: it reports every problem at once as ``FILE:LINE: key.path: message``
(an ``InputError``) and otherwise returns an immutable ``Fleet`` (fleet/model/core/fleet.py) in which every default is
applied.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fleet.model.billing.accounts import workload_accounts
from fleet.model.core.catalogue import CLOUDS, Catalogue, load_catalogue
from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.fleet import Fleet
from fleet.model.core.pools import GpuPool, SystemPoolSpec
from fleet.model.core.registry import workload_image_problems, workload_in_registry
from fleet.model.core.validation import validate_document
from fleet.model.core.workloads import WORKLOADS_DIR, Workload, load_probe_workload, load_workloads
from fleet.model.core.yaml_source import YamlDocument, read_yaml
from fleet.model.placement.pods import placement_problems
from fleet.model.policy_file.checks import Checker
from fleet.model.policy_file.schema import FleetFile
from fleet.model.probes.resolve import resolve_probe
from fleet.model.queues.dispatch import resolve
from fleet.model.queues.queued_sweeps import with_queued_sweeps
from fleet.model.runners.resolve import resolve_runner
from fleet.model.sharing.resolve import resolve_sharing
from fleet.model.sweeps.plan import plan_cluster

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "policy" / "fleet.yaml"


def _resolve(
    spec: FleetFile, catalogue: Catalogue, workloads: dict[str, Workload], probe: Workload, file: str
) -> Fleet:
    defaults = spec.defaults
    clusters: dict[str, Cluster] = {}
    for cloud in CLOUDS:
        facts = catalogue.clouds[cloud]  # type: ignore[index]
        for name, settings in spec.clusters.get(cloud, {}).items():  # type: ignore[call-overload]
            pools = []
            for card, pool in settings.gpus.items():
                acc = catalogue.accelerators[card]
                offer = acc.offers.get(cloud)  # type: ignore[call-overload]
                # A cloud whose autoscaler cannot scale a GPU pool up from zero gets min 1 unless the
                # policy sets min_nodes explicitly (an opt-in the plan warns about).
                floor = (
                    defaults.gpu_pool.min_nodes if facts.gpu_scale_from_zero else max(1, defaults.gpu_pool.min_nodes)
                )
                min_nodes = pool.min_nodes if pool.min_nodes is not None else floor
                pools.append(
                    GpuPool(
                        sharing=resolve_sharing(pool.sharing, offer),
                        card=card,
                        accelerator=acc,
                        offer=offer,
                        machine_type=pool.machine_type or (offer.machine_type if offer else ""),
                        min_nodes=min_nodes,
                        max_nodes=pool.max_nodes if pool.max_nodes is not None else defaults.gpu_pool.max_nodes,
                        spot=pool.spot if pool.spot is not None else defaults.gpu_pool.spot,
                        cloud_facts=facts,
                        probe=resolve_probe(pool.probe, defaults.probe, min_nodes, probe),
                    )
                )
            system = settings.system_pool or defaults.system_pool
            clusters[name] = Cluster(
                name=name,
                cloud=cloud,
                region=settings.region,
                zone=settings.zone,
                central=settings.central,
                kubernetes_version=settings.kubernetes_version or defaults.kubernetes_version,
                system_pool=SystemPoolSpec(
                    system.machine_type or facts.system_machine_type, system.min_nodes, system.max_nodes
                ),
                pools=tuple(pools),
                facts=facts,
                description=settings.description,
                scale_down_after=defaults.gpu_pool.scale_down_after,
                checkpoint_claim=settings.checkpoint_claim,
                billing_account=settings.billing_account,
                registry=spec.registry,
                site_provides=frozenset(settings.site_provides),
            )

    def every_card_of(workload: str) -> tuple[str, ...]:
        kinds = workloads[workload].spec.accelerator_kinds
        return tuple(card for card, acc in catalogue.accelerators.items() if acc.resource in kinds)

    placements = {
        name: (every_card_of(name) if p.gpus == ["all"] else tuple(p.gpus))
        for name, p in spec.workloads.items()
        if p.enabled
    }
    schedules = {name: p.schedule for name, p in spec.workloads.items()}
    runners = {
        name: tuple(resolve_runner(clusters[name].pool(card), spec.runners.gitlab_url, r) for card, r in cards.items())
        for name, cards in spec.runners.clusters.items()
    }
    for name, own in runners.items():
        clusters[name] = dataclasses.replace(clusters[name], ci_pools=tuple(r.pool for r in own if r.own_pool))
    sweep_counts = {name: tuple(p.scale) for name, p in spec.workloads.items() if p.enabled and p.scale is not None}
    own_sweeps = {n: scale for n, scale in sweep_counts.items() if not spec.workloads[n].queue}  # queued_sweeps.py
    sweeps = {name: plan_cluster(c.pools, own_sweeps, placements, workloads) for name, c in clusters.items()}
    sweeps = {name: s for name, s in sweeps.items() if s.points or s.left_out}
    for name, planned in sweeps.items():
        clusters[name] = dataclasses.replace(clusters[name], sweep_pools=planned.pools)
    # the sweep points hold the pools of the clusters before the sweep pools were added: same pools, same values
    return Fleet(
        file, clusters, placements, schedules, spec.monitoring, workloads, probe_workload=probe, runners=runners,
        sweep_counts=sweep_counts, sweeps=sweeps,
        billing_accounts=workload_accounts(spec.workloads),
        registry=spec.registry,
        queued={n: p.queue for n, p in spec.workloads.items() if p.enabled and p.queue},
    )  # fmt: skip


def raw_card_problems(doc: YamlDocument, catalogue: Catalogue, found: list[Problem]) -> list[Problem]:
    """The unknown card names of the workloads' and clusters' card lists when the file failed its schema (the
    checker, which needs a whole spec, cannot run), so one run reports them with the schema's problems; those at a
    place a problem already names are left out."""
    known = list(catalogue.accelerators)
    taken = {(p.line, p.path) for p in found}
    lists: list[tuple[tuple[object, ...], object]] = []
    data = doc.data if isinstance(doc.data, dict) else {}
    for name, placement in (data.get("workloads") or {}).items() if isinstance(data.get("workloads"), dict) else ():
        if isinstance(placement, list):
            lists.append((("workloads", name), placement))
        elif isinstance(placement, dict) and isinstance(placement.get("gpus"), list):
            lists.append((("workloads", name, "gpus"), placement["gpus"]))
    out = []
    for path, cards in lists:
        assert isinstance(cards, list)
        for i, card in enumerate(cards):
            if isinstance(card, str) and card != "all" and card not in catalogue.accelerators:
                problem = doc.problem(
                    (*path, i),
                    f"unknown card {card!r}{did_you_mean(card, known)}; the catalogue knows: {', '.join(known)}",
                )
                if (problem.line, problem.path) not in taken:
                    out.append(problem)
    return out


def load_fleet(path: Path | str = POLICY_FILE, workloads_dir: Path = WORKLOADS_DIR) -> Fleet:
    """Read, check and resolve a policy file; raises ``InputError`` listing every problem.

    The policy file's shape, the workload folders and the cross-key rules are all checked before
    anything is reported, so one run shows every problem that can be found.
    """
    doc = read_yaml(path)
    problems: list[Problem] = []
    spec: FleetFile | None = None
    workloads: dict[str, Workload] | None = None
    try:
        spec = validate_document(FleetFile, doc)
    except InputError as exc:
        problems.extend(exc.problems)
    try:
        workloads = load_workloads(workloads_dir)
    except InputError as exc:
        problems.extend(exc.problems)
    probe = load_probe_workload()
    if workloads and probe.name in workloads:
        problems.append(
            Problem(
                str(workloads[probe.name].folder / "workload.yaml"),
                1,
                "name",
                f"{probe.name!r} is the fleet's own pool probe (fleet/model/probes/probe): give the workload another "
                "name",
            )
        )
    catalogue = load_catalogue()
    if spec is None:  # the cross-key rules need a whole spec; the card names are checked anyway, all at once
        problems.extend(raw_card_problems(doc, catalogue, problems))
    if spec is not None:
        checker = Checker(doc, spec, catalogue, workloads or {})
        checker.check_clusters()
        version_warnings = checker.check_kubernetes_versions()
        checker.check_monitoring()
        checker.check_runners()
        checker.check_queues()
        if workloads is not None:
            checker.check_workloads()
            checker.check_queued_workloads()
        problems.extend(checker.problems)
        problems.extend(workload_image_problems(doc, spec.registry, [*(workloads or {}).values(), probe]))
    if problems or spec is None or workloads is None:
        raise InputError(problems)
    workloads = {name: workload_in_registry(wl, spec.registry) for name, wl in workloads.items()}
    fleet = _resolve(spec, catalogue, workloads, workload_in_registry(probe, spec.registry), doc.file)
    if spec.queues is not None:
        fleet = dataclasses.replace(fleet, dispatch=resolve(spec.queues, checker.offered(), catalogue))
        fleet = with_queued_sweeps(fleet, doc)  # a point no worker of its queue holds: InputError
    # every pod the fleet runs must land on its own pool and fit a node of it (fleet/model/placement/pods.py)
    misplaced = placement_problems(fleet, doc)
    if misplaced:
        raise InputError(misplaced)
    return dataclasses.replace(fleet, warnings=version_warnings + checker.warnings(fleet))


#: The fleets loaded by :func:`load_fleet_cached`, by (resolved policy file, its mtime, resolved workloads folder).
_FLEETS: dict[tuple[str, int, str], Fleet] = {}
_CACHED_FLEETS = 8


def load_fleet_cached(
    path: Path | str = POLICY_FILE, workloads_dir: Path = WORKLOADS_DIR, *, reload: bool = False
) -> Fleet:
    """``load_fleet`` once per file version: a plan of many stacks in one process reads the policy once.

    The file and the workloads folder are known by their resolved paths, so the command line's
    ``policy/fleet.yaml`` and the program's absolute path are one entry. ``reload`` reads the files again and
    replaces the entry (a command reads them afresh, and the programs it runs in the same process then use its
    fleet); the workload folders are not part of the version, so only a reload sees a changed workload.
    """
    try:
        resolved = Path(path).resolve()
        key = (str(resolved), resolved.stat().st_mtime_ns, str(Path(workloads_dir).resolve()))
    except OSError:
        return load_fleet(path, workloads_dir)  # reports the unreadable file
    if reload or key not in _FLEETS:
        fleet = load_fleet(path, workloads_dir)
        _FLEETS.pop(key, None)
        while len(_FLEETS) >= _CACHED_FLEETS:
            del _FLEETS[next(iter(_FLEETS))]  # the oldest entry
        _FLEETS[key] = fleet
    return _FLEETS[key]


def clear_fleet_cache() -> None:
    """Forget every fleet :func:`load_fleet_cached` holds (the next load reads the files)."""
    _FLEETS.clear()
