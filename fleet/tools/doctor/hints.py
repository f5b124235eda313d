"""The fixes only a cloud can word (how to read its autoscaler, what puts accelerators in a node template or labels
back on a node): asked of the cloud's rules (fleet/model/core/clouds/), which own all cloud knowledge."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clouds.rules import DoctorContext
from fleet.model.core.pools import GpuPool
from fleet.tools.doctor.context import Context
from fleet.tools.doctor.kube_objects import selector_text


def autoscaler_logs(ctx: Context) -> str:
    """How to read what the cluster's autoscaler thinks (the cloud's rules, fleet/model/core/clouds/)."""
    return cloud_rules(ctx.cluster.cloud).autoscaler_logs(ctx.kubectl)


def hint_context(pool: GpuPool, ctx: Context) -> DoctorContext:
    """What the cloud's rules need to word a hint about ``pool``."""
    return DoctorContext(
        stack=ctx.stack,
        kubectl=ctx.kubectl,
        up=ctx.up,
        pool_name=pool.name,
        card=pool.card,
        resource=pool.resource,
        units_per_node=pool.units_per_node,
        machine_type=pool.machine_type,
        policy_key=ctx.policy_key(pool),
        selector=selector_text(pool.node_selector),
    )


def template_fix(pool: GpuPool, ctx: Context) -> str:
    """What makes the autoscaler's idea of a new node of ``pool`` include its accelerators, per cloud."""
    return cloud_rules(ctx.cluster.cloud).template_fix(hint_context(pool, ctx))


def label_fix(pool: GpuPool, ctx: Context, nodes: Sequence[str]) -> str:
    """What puts ``pool``'s labels back on its nodes, per cloud."""
    return cloud_rules(ctx.cluster.cloud).label_fix(hint_context(pool, ctx), tuple(nodes))
