"""The plan benchmark's tables, from its ``--json`` figures: per size, central and other stacks, growth, ratio,
per cloud and per stack."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.synthetic_fleet import stack_cloud
from fleet.model.core.catalogue import load_catalogue


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def render(report: dict[str, Any], stack_rows: int | None = None) -> str:
    """The human-readable tables."""
    p = report["parameters"]
    env = report["environment"]
    clouds = p.get("clouds", ["gcp"])
    if len(clouds) == 1:
        title = load_catalogue().clouds[clouds[0]].title
        fleet_line = f"{p['clusters']} clusters ({title}) x {p['cards']} cards ({', '.join(p['card_names'])})"
    else:
        by_cloud = "; ".join(f"{cloud}: {', '.join(cards)}" for cloud, cards in p["card_names_by_cloud"].items())
        fleet_line = (
            f"{p['clusters']} clusters cycling over {', '.join(clouds)} x up to {p['cards']} cards ({by_cloud})"
        )
    sdks = ", ".join(f"{k} {v}" for k, v in env.items() if k.startswith("pulumi_"))
    lines = [
        f"gpu-fleet plan benchmark: {fleet_line} x {p['workloads']} workloads ({p['workload_source']})",
        f"python {env['python']}, pulumi {env['pulumi']}, {sdks}, {env['platform']}",
        f"times: {p['timing']}; warm-up (imports) {report['warm_up_seconds']:.2f} s, not counted",
        "",
        "Per size (plan = plan_fleet wall time; floor = the same resources registered bare under the stock mocks;",
        " ratio = best plan over best floor; paired = the median of each run's plan over the floor right after it;",
        " inter = the median of each run's stacks planned and replayed bare in turn, stack by stack;",
        " floor tuned = that floor under the plan's own process settings: GC threshold and SDK stand-ins)",
        f"{'clusters':>8} {'stacks':>6} {'resources':>9} {'plan s':>8} {'floor s':>8} {'ratio':>6} {'paired':>6} "
        f"{'inter':>6} "
        f"{'floor tuned s':>13} {'ratio tuned':>11} "
        f"{'ms/stack':>9} {'us/res':>7} {'floor us/res':>12} {'outside s':>9} {'load s':>7} "
        f"{'py peak MiB':>11} {'maxrss MiB':>10}",
    ]
    for s in report["sizes"]:
        mem = s["memory"]
        lines.append(
            f"{s['clusters']:>8} {s['stacks']:>6} {s['resources']:>9} {s['plan_seconds']:>8.3f} "
            f"{s['floor_seconds']:>8.3f} {s['ratio']:>6.2f} {s.get('paired_ratio', float('nan')):>6.2f} "
            f"{s.get('interleaved_ratio', float('nan')):>6.2f} "
            f"{s['floor_tuned_seconds']:>13.3f} "
            f"{s['ratio_tuned']:>11.2f} {s['plan_ms_per_stack']:>9.2f} "
            f"{s['plan_us_per_resource']:>7.0f} {s['floor_us_per_resource']:>12.0f} "
            f"{s['plan_outside_stacks_seconds']:>9.3f} {s['policy_load_seconds']:>7.3f} "
            f"{_mib(mem.get('tracemalloc_peak_bytes')):>11} "
            f"{_mib(mem['maxrss_kib'] * 1024) if 'maxrss_kib' in mem else '-':>10}"
        )
    lines += [
        "",
        "Central stack vs the others (StackPlan.seconds; the central one has a StackReference + Secret per leaf)",
        f"{'clusters':>8} {'central res':>11} {'plan ms':>8} {'floor ms':>8} {'ratio':>6} "
        f"{'leaf median plan ms':>19} {'floor ms':>8} {'ratio':>6}",
    ]
    for s in report["sizes"]:
        leaf_plan, leaf_floor = s["leaf_plan_ms_median"], s["leaf_floor_ms_median"]
        leaf = (
            f"{leaf_plan:>19.1f} {leaf_floor:>8.1f} {leaf_plan / leaf_floor:>6.2f}"
            if leaf_plan is not None and leaf_floor
            else f"{'-':>19} {'-':>8} {'-':>6}"
        )
        lines.append(
            f"{s['clusters']:>8} {s['central_resources']:>11} {1e3 * s['central_plan_seconds']:>8.1f} "
            f"{1e3 * s['central_floor_seconds']:>8.1f} {s['central_plan_seconds'] / s['central_floor_seconds']:>6.2f} "
            + leaf
        )
    lines.append("")
    lines.append("Growth with fleet size (least squares over the sizes; exponent 1.0 = linear, 2.0 = quadratic)")
    for name, fit in report["linearity"].items():
        if "exponent" not in fit:
            lines.append(f"  {name:<17} {fit['note']}")
            continue
        lines.append(
            f"  {name:<17} t = {fit['intercept_seconds']:.3f} s"
            f" + {1e6 * fit['seconds_per_resource']:.0f} us x resources"
            f" (R^2 {fit['r_squared']:.4f}), exponent {fit['exponent']:.3f}, "
            f"time/resource largest/smallest {fit['per_resource_growth']:.2f}"
        )
    ratio = report["ratio"]
    lines += [
        "",
        f"Ratio plan/floor at full size: {ratio['full_size']:.2f}   over all sizes: {ratio['all_sizes']:.2f}   "
        f"(target <= {ratio['target']}: {'met' if ratio['within_target'] else 'NOT met'})",
        f"Ratio plan/floor tuned (the floor given the plan's GC threshold and SDK stand-ins too): "
        f"{ratio['full_size_tuned']:.2f} at full size, {ratio['all_sizes_tuned']:.2f} over all sizes "
        f"(target <= {ratio['target']}: {'met' if ratio['within_target_tuned'] else 'NOT met'})",
    ]
    lines += shipped_lines(report)
    full = next(s for s in report["sizes"] if s["clusters"] == p["clusters"])
    rows = full["per_stack"]
    if len(clouds) > 1:
        lines += ["", *_per_cloud_lines(rows)]
    shown = rows if stack_rows is None else rows[:stack_rows]
    lines += [
        "",
        f"Per stack at full size ({len(rows)} stacks; plan = StackPlan.seconds, min over repeats; "
        "py peak = tracemalloc peak above the stack's start; maxrss = process high-water mark after it)",
        f"{'stack':<20} {'res':>4} {'plan ms':>8} {'floor ms':>8} {'ratio':>6} {'py peak MiB':>11} "
        f"{'retained KiB':>12} {'maxrss MiB':>10}",
    ]
    for r in shown:
        retained = "-" if r["py_retained_bytes"] is None else f"{r['py_retained_bytes'] / 1024:.0f}"
        maxrss = "-" if r["maxrss_kib"] is None else f"{r['maxrss_kib'] / 1024:.1f}"
        lines.append(
            f"{r['stack']:<20} {r['resources']:>4} {1e3 * r['plan_seconds']:>8.2f} {1e3 * r['floor_seconds']:>8.2f} "
            f"{r['ratio']:>6.2f} {_mib(r['py_peak_bytes']):>11} {retained:>12} {maxrss:>10}"
        )
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more stack(s) in --json")
    return "\n".join(lines)


def shipped_lines(report: dict[str, Any]) -> list[str]:
    """The shipped fleet's line (``--shipped``), after a blank one; none without it."""
    shipped = report.get("shipped")
    if not shipped:
        return []
    return [
        "",
        f"Shipped fleet (policy/fleet.yaml): {shipped['stacks']} stacks, {shipped['resources']} resources, plan "
        f"{shipped['plan_seconds']:.3f} s, floor {shipped['floor_seconds']:.3f} s, ratio {shipped['ratio']:.2f} "
        f"(tuned floor {shipped['floor_tuned_seconds']:.3f} s, ratio {shipped['ratio_tuned']:.2f})",
    ]


def _per_cloud_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The full size's stacks summed per cloud: where a mixed fleet's plan time over the floor comes from."""
    lines = [
        "Per cloud at full size (sums over the cloud's stacks of the per-stack best times; central stack included)",
        f"{'cloud':<10} {'stacks':>6} {'res/stack':>9} {'plan ms/stack':>13} {'floor ms/stack':>14} {'ratio':>6} "
        f"{'extra ms/stack':>14} {'share of extra':>14}",
    ]
    by_cloud: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_cloud.setdefault(stack_cloud(row["stack"]), []).append(row)
    extra_total = sum(r["plan_seconds"] - r["floor_seconds"] for r in rows)
    for cloud, group in by_cloud.items():
        n = len(group)
        plan, floor = sum(r["plan_seconds"] for r in group), sum(r["floor_seconds"] for r in group)
        share = f"{100 * (plan - floor) / extra_total:.0f}%" if extra_total > 0 else "-"
        lines.append(
            f"{cloud:<10} {n:>6} {sum(r['resources'] for r in group) / n:>9.0f} {1e3 * plan / n:>13.1f} "
            f"{1e3 * floor / n:>14.1f} {plan / floor:>6.2f} {1e3 * (plan - floor) / n:>14.1f} {share:>14}"
        )
    return lines
