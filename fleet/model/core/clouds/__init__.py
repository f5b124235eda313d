"""One module per cloud with everything the fleet knows about it besides the SDK calls; ``cloud_rules(name)``."""

from __future__ import annotations

from fleet.model.core.clouds import aks, eks, existing, gke, magnum
from fleet.model.core.clouds.rules import CloudRules

# by the cloud's key in the policy file (catalogue.CLOUDS)
RULES: dict[str, CloudRules] = {r.name: r for r in (magnum.RULES, gke.RULES, eks.RULES, aks.RULES, existing.RULES)}


def cloud_rules(name: str) -> CloudRules:
    """The rules of the cloud called ``name`` in the policy file."""
    return RULES[name]


def sweep_pool_clouds() -> tuple[str, ...]:
    """The clouds whose components build sweep pools of other machine sizes."""
    return tuple(name for name, rules in RULES.items() if rules.sweep_pools)


def cluster_types() -> frozenset[str]:
    """The engine types of the clusters the fleet builds, one per cloud."""
    return frozenset(rules.cluster_type for rules in RULES.values() if rules.cluster_type)


def api_endpoint_readers() -> dict[str, CloudRules]:
    """Each cloud's rules by the engine type of the resource that says who reaches its API endpoint."""
    return {rules.api_endpoint_type: rules for rules in RULES.values() if rules.api_endpoint_type}


def pool_readers() -> dict[str, CloudRules]:
    """Each cloud's rules by the engine type of its node pools."""
    return {rules.pool_type: rules for rules in RULES.values() if rules.pool_type}
