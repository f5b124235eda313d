"""A cluster of the fleet (and the Pulumi stack of the same name): where it is, its pools and its own settings."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.model.core.catalogue import CloudFacts
from fleet.model.core.pools import CARDS_PER_NODE_LABEL, POOL_KIND_LABELS, GpuPool, SystemPoolSpec
from fleet.model.core.registry import DEFAULT_REGISTRY


@dataclass(frozen=True)
class Cluster:
    """One cluster of the fleet (and one Pulumi stack of the same name)."""

    name: str
    cloud: str
    region: str | None
    zone: str | None
    central: bool
    kubernetes_version: str
    system_pool: SystemPoolSpec
    pools: tuple[GpuPool, ...]
    facts: CloudFacts
    description: str = ""
    # how long an unneeded node (and a new one) is kept before the autoscaler removes it (policy: defaults.gpu_pool)
    scale_down_after: str = "10m"
    # pools of other machine sizes for the scaling sweeps (fleet/model/sweeps/)
    sweep_pools: tuple[GpuPool, ...] = ()
    # an existing ReadWriteMany claim for the sweep jobs' checkpoints (policy: checkpoint_claim)
    checkpoint_claim: str | None = None
    # the account its GPU time is billed to, unless a workload names its own (policy: billing_account;
    # fleet/model/billing/accounts.py)
    billing_account: str = "default"
    # where its pods pull the fleet's own images and the charts' images from (policy: registry)
    registry: str = DEFAULT_REGISTRY
    # the pools of the cards' GitLab CI jobs, one per card with a runner of its own pool
    # (fleet/model/runners/ci_pools.py)
    ci_pools: tuple[GpuPool, ...] = ()
    # what an existing cluster's site already runs, which the fleet does not install (policy: site_provides)
    site_provides: frozenset[str] = frozenset()

    @property
    def all_pools(self) -> tuple[GpuPool, ...]:
        """The card pools, then the sweep pools, then the CI pools: every GPU node pool the cluster has (the cluster
        component's ``node_pools`` and the stack's ``node_pools`` output, by ``GpuPool.key``)."""
        return self.pools + self.sweep_pools + self.ci_pools

    @property
    def pool_kind_labels(self) -> tuple[str, ...]:
        """The node labels that set a sweep or CI pool's nodes apart from its card's pool (which carries the card's
        label too), where a pool's selector names them: a node without them is a card pool's node."""
        selected = {k for p in self.all_pools for k in p.node_selector}
        return tuple(k for k in POOL_KIND_LABELS if k in selected)

    @property
    def location(self) -> str:
        """Zone if given (zonal), else region; empty for an existing cluster without either."""
        return self.zone or self.region or ""

    @property
    def system_selector(self) -> dict[str, str]:
        """The node label of the system pool, where the fleet's own services run (empty: wherever they fit)."""
        return dict(self.facts.system_selector)

    def pool_sized(self, card: str, cards_per_node: str | None, ci: bool = False) -> GpuPool | None:
        """The pool of ``card`` whose nodes carry ``cards_per_node`` in the sweep pools' size label (None: the card's
        own pool, whose nodes carry none), as a pod's selector or a pool's labels name it, or with ``ci`` the card's
        CI pool; None if there is none."""
        return next(
            (
                p
                for p in self.all_pools
                if p.card == card and p.labels.get(CARDS_PER_NODE_LABEL) == cards_per_node and p.ci == ci
            ),
            None,
        )

    def pool(self, card: str) -> GpuPool:
        """The pool of ``card`` (KeyError if the cluster does not offer it)."""
        for pool in self.pools:
            if pool.card == card:
                return pool
        raise KeyError(card)


def pool_resource_name(cluster: Cluster, pool: GpuPool) -> str:
    """The resource name of ``pool``'s node pool in ``cluster``, ``<cluster>-<pool>``: each cloud component's pool,
    the stack's ``node_pools`` output and the pack's lookups use it."""
    return f"{cluster.name}-{pool.name}"
