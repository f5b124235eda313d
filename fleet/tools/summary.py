"""Human-readable plan output: one screen per stack."""

from __future__ import annotations

from collections import Counter

from fleet.model.pool_view import pool_views
from fleet.model.spec import Fleet
from fleet.tools.plan import Finding, StackPlan


def _table(rows: list[list[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_stack(plan: StackPlan, fleet: Fleet) -> str:
    """The plan of one stack as text: pools, resources by type, Kubernetes objects by kind, findings."""
    cluster = fleet.cluster(plan.stack)
    role = ", central Prometheus" if cluster.central else ""
    lines = [
        f"== {plan.stack} ({cluster.facts.title}, {cluster.location or 'no location'}{role}): "
        f"{len(plan.registrations)} resources, planned in {plan.seconds:.2f} s"
    ]
    pools = pool_views(plan.registrations)
    if pools:
        rows = [["pool", "card", "machine type", "min", "max", "spot", "taints"]]
        for p in pools:
            rows.append(
                [
                    p.name,
                    p.card or "-",
                    p.machine_type,
                    str(p.min_nodes),
                    str(p.max_nodes),
                    "yes" if p.spot else "no",
                    ", ".join(p.taints) or "-",
                ]
            )
        lines += ["  Node pools", *_table(rows)]
    by_type = Counter(r.type for r in plan.registrations if not r.type.startswith("kubernetes:"))
    if by_type:
        lines += ["  Cloud and Pulumi resources", *_table([[t, str(n)] for t, n in sorted(by_type.items())])]
    kinds = Counter(r.type.split(":")[-1] for r in plan.registrations if r.type.startswith("kubernetes:"))
    if kinds:
        lines += ["  Kubernetes objects by kind", *_table([[k, str(n)] for k, n in sorted(kinds.items())])]
    if plan.findings:
        lines.append("  Findings")
        # Mandatory findings and warnings in full; an advisory policy (which may flag every container) as one line
        # with its count and first case: --json keeps every finding.
        advisory: dict[str, list[Finding]] = {}
        for f in plan.findings:
            if f.level == "advisory" and f.policy:
                advisory.setdefault(f.policy, []).append(f)
            else:
                lines.append(f"    [{f.level}] {f.policy + ': ' if f.policy else ''}{f.message}")
        for policy, found in advisory.items():
            first = found[0].message.splitlines()[-1].strip()
            lines.append(f"    [advisory] {policy}: {len(found)} finding(s), such as: {first}")
    return "\n".join(lines)
