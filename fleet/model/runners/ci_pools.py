"""CI pools: a node pool of their own for each card's GitLab CI jobs, so a CI job never shares a node with a benchmark.

A benchmark may hold credentials (a workload's cloud keys, mounted from a Secret); a CI job runs whatever code a
merge request brings. Each (cluster, card) with a runner therefore gets a *CI pool* ``gpu-<card>-ci``: the card's
machine, spot, from zero (one node on Magnum, which cannot scale a GPU group up from zero) to as many nodes as the
runner's concurrent jobs need, labelled ``gpu=<card>`` and ``gpu-fleet.io/ci=true`` and tainted
``gpu-fleet.io/ci=true:NoSchedule``. The runner's job pods select that label and tolerate that taint; no other pod
(benchmarks, probes, sweep workers) tolerates it, so none lands there, and the job pods' selector keeps them off the
card's own pool. On Magnum, whose node groups carry neither labels nor taints of ours, the group's role
``gpu-<card>-ci`` is what the job pods select (and benchmarks select their own role, so they never land there).

An existing cluster's pools are the site's: the fleet cannot create one, so a runner there must say
``own_pool: false`` (its jobs then run on the card's pool, beside the benchmarks: docs/runners.md).
"""

from __future__ import annotations

import dataclasses

from fleet.model.core.pools import GpuPool


def ci_max_nodes(concurrency: int, accelerators: int, cards_per_node: int) -> int:
    """The nodes ``concurrency`` CI jobs of ``accelerators`` cards each need at once: a job takes cards of one node,
    so a node holds ``cards_per_node // accelerators`` jobs (at least one: the checker refuses larger jobs)."""
    per_node = max(1, cards_per_node // accelerators)
    return -(-concurrency // per_node)


def ci_pool(pool: GpuPool, concurrency: int, accelerators: int) -> GpuPool:
    """The CI pool of ``pool``'s card: the same machine, spot, whole cards (no sharing), never probed, from zero where
    the cloud scales a GPU pool up from zero (else as few nodes as the card's pool keeps, one at most), up to what
    the runner's concurrent jobs take."""
    floor = 0 if pool.cloud_facts.gpu_scale_from_zero else min(pool.min_nodes, 1)
    bare = dataclasses.replace(pool, ci=True, sharing=None, probe=None, spot=True, min_nodes=floor)
    return dataclasses.replace(bare, max_nodes=ci_max_nodes(concurrency, accelerators, bare.accelerators_per_node))
