"""GPU node pools: only the cluster's cards, labelled and tainted for them, sized and priced as the policy file says."""

from __future__ import annotations

from types import SimpleNamespace

from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core import pod_contract
from fleet.model.core.clouds.pool_view import read_pool
from fleet.model.core.clouds.rules import CloudRules, PoolView
from fleet.model.core.pools import CARDS_PER_NODE_LABEL, GpuPool
from fleet.model.core.taints import CI_TAINT

from .registry import resource_policy
from .resources import cluster_of, fleet, no_cluster, plain, stack_of


def _pool(args: ResourceValidationArgs) -> tuple[PoolView, str, CloudRules] | None:
    """The pool view, card and cloud rules of a GPU pool (the cloud's by the resource type of its node pools; the card
    from its labels/role, else from its ``-gpu-<card>`` name)."""
    registration = SimpleNamespace(type=args.resource_type, name=args.name, inputs=plain(args.props))
    found = read_pool(registration)  # type: ignore[arg-type]
    if found is None:
        return None
    view, rules = found
    card = view.card or pod_contract.card_of_pool(args.name) or ""
    return (view, card, rules) if card else None


def policy_pool(args: ResourceValidationArgs, report: ReportViolation) -> tuple[PoolView, GpuPool, CloudRules] | None:
    """The pool, what the policy file says about it and its cloud's rules; None (nothing to check) for system pools or
    unknown cards."""
    found = _pool(args)
    if not found:
        return None
    view, card, rules = found
    cluster = cluster_of(args.urn)
    if cluster is None:
        return None  # reported by gpu-pool-allowed-card
    # a sweep pool's machine size (None on a card's own pool), or the card's CI pool
    pool = cluster.pool_sized(card, view.labels.get(CARDS_PER_NODE_LABEL), ci=view.ci)
    return (
        (view, pool, rules) if pool else None
    )  # else reported by gpu-pool-allowed-card (an unknown card or sweep size)


@resource_policy(
    "gpu-pool-allowed-card",
    "GPU node pools exist only for cards the policy file gives the stack's cluster (sweep pools: only the machine "
    "sizes its sweep points need; CI pools: only for the cards whose runner has a pool of its own).",
)
def _validate_allowed_card(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = _pool(args)
    if not found:
        return
    view, card, _ = found
    stack = stack_of(args.urn)
    cluster = cluster_of(args.urn)
    if cluster is None:
        report(no_cluster(stack))
        return
    cards = [p.card for p in cluster.pools]
    if card not in cards:
        report(
            f"pool {args.name!r} is for card {card!r}, which {fleet().file} does not give cluster {stack!r} "
            f"(its cards: {', '.join(cards) or 'none'}); add {card} to the cluster's gpus in the policy file "
            "or remove the pool"
        )
        return
    size = view.labels.get(CARDS_PER_NODE_LABEL)
    sizes = sorted(p.labels[CARDS_PER_NODE_LABEL] for p in cluster.sweep_pools if p.card == card)
    if size is not None and size not in sizes:
        report(
            f"pool {args.name!r} is a {card} sweep pool of {size} cards per node, which no sweep point of "
            f"{fleet().file} needs on {stack!r} (sweep pools of {card} there: {', '.join(sizes) or 'none'}); "
            "build sweep pools from Cluster.sweep_pools"
        )
    ci_cards = sorted(p.card for p in cluster.ci_pools)
    if view.ci and card not in ci_cards:
        report(
            f"pool {args.name!r} is a CI pool of {card}, which no runner of {fleet().file} on {stack!r} needs (CI "
            f"pools there: {', '.join(ci_cards) or 'none'}); build CI pools from Cluster.ci_pools"
        )


@resource_policy(
    "gpu-pool-card-label",
    "GPU node pools carry the gpu=<card> node label (and the card's other node labels) pods select them by.",
)
def _validate_card_label(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = policy_pool(args, report)
    if not found:
        return
    view, pool, rules = found
    if not rules.pool_labels:  # the cloud's node pools carry no Kubernetes labels of ours (Magnum's node groups)
        return
    missing = {k: v for k, v in pool.labels.items() if view.labels.get(k) != v}
    if missing:
        want = ", ".join(f"{k}={v}" for k, v in missing.items())
        report(
            f"pool {args.name!r} lacks the node label(s) {want}; benchmark pods select their card by these labels. "
            "Create the pool with GpuPool.labels (components/*.py) instead of hand-written labels"
        )


@resource_policy(
    "gpu-pool-accelerator-taint",
    "GPU node pools carry the accelerator taint, so only pods that ask for the card land on them; CI pools the CI "
    "taint too (on Magnum, whose node groups cannot declare the accelerator taint, the CI taint only).",
)
def _validate_taint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = policy_pool(args, report)
    if not found:
        return
    view, pool, rules = found
    # A cloud whose node pools carry no taints of ours (Magnum's node groups) still registers a CI pool's nodes with
    # the CI taint (a Magnum group's kubelet_options label): that one is checked there
    wanted = pool.taints if rules.pool_taints else ((CI_TAINT,) if pool.ci else ())
    missing = [t.as_string() for t in wanted if t.as_string() not in view.taints]
    if missing:
        report(
            f"pool {args.name!r} lacks the accelerator taint {', '.join(missing)}, so ordinary pods (on a CI pool: "
            "benchmarks) could land on (and keep alive) expensive GPU nodes; declare GpuPool.taints on the pool "
            "(components/clusters/taints.py spells them per cloud; a Magnum CI group's kubelet_options label)"
        )


@resource_policy(
    "gpu-pool-size",
    "GPU node pools have the policy file's minimum (0, so idle pools cost nothing; Magnum 1 unless "
    "opted into 0) and maximum size.",
)
def _validate_size(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = policy_pool(args, report)
    if not found:
        return
    view, pool, _ = found
    if view.min_nodes != pool.min_nodes:
        facts = pool.cloud_facts
        why = (
            "idle GPU pools must scale to zero so they cost nothing"
            if facts.gpu_scale_from_zero
            else f"{facts.title} cannot scale a GPU pool up from zero, so it keeps 1 node unless the policy file sets "
            "min_nodes: 0 explicitly"
        )
        report(
            f"pool {args.name!r} has minimum size {view.min_nodes}, the policy file says {pool.min_nodes} ({why}); "
            "take the size from GpuPool.min_nodes, or change min_nodes in the policy file"
        )
    if view.max_nodes != pool.max_nodes:
        report(
            f"pool {args.name!r} has maximum size {view.max_nodes}, the policy file says {pool.max_nodes}; "
            "take the size from GpuPool.max_nodes, or change max_nodes in the policy file"
        )


@resource_policy(
    "gpu-pool-spot",
    "GPU node pools use spot capacity unless the policy file says otherwise.",
)
def _validate_spot(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = policy_pool(args, report)
    if not found:
        return
    view, pool, rules = found
    if not rules.spot_pools:  # the cloud's node pools have no spot capacity (Magnum's node groups)
        return
    if view.spot != pool.spot:
        want = "spot" if pool.spot else "on-demand"
        have = "spot" if view.spot else "on-demand"
        report(
            f"pool {args.name!r} uses {have} capacity but the policy file asks for {want}; take it from GpuPool.spot, "
            "or set spot for this card in the policy file"
        )


# --- (b) benchmark pods ---------------------------------------------------------------------------------------
