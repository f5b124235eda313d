"""Pool probes in the model (fleet/model/probes/, fleet/model/core/schedules.py): on where a pool scales to zero,
per-pool settings, located errors for bad schedules and thresholds, and how long "no result" is normal."""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest

from fleet.model.core.errors import InputError
from fleet.model.core.pod_contract import active_deadline_seconds
from fleet.model.core.schedules import check_cron, longest_gap_seconds
from fleet.model.core.workloads import PROBE_DIR, load_workload
from fleet.model.loader import load_fleet
from tests.helpers import GOOD

# The longest a probe's run may take: its Job's deadline.
RUN = active_deadline_seconds(load_workload(PROBE_DIR).spec.timeout_seconds)


def fleet_of(tmp_path: Path, text: str):
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    empty = tmp_path / "workloads"
    empty.mkdir(exist_ok=True)
    return load_fleet(policy, empty)


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as caught:
        fleet_of(tmp_path, text)
    return "\n".join(str(p) for p in caught.value.problems)


def test_probes_run_where_a_pool_scales_to_zero(tmp_path):
    fleet = fleet_of(tmp_path, GOOD)
    magnum = fleet.cluster("cern-main").pool("t4")
    assert magnum.min_nodes == 1 and magnum.probe is None  # keeps a node: not probed unless asked
    for name in ("gke-a", "eks-a"):
        for pool in fleet.cluster(name).pools:
            assert pool.min_nodes == 0 and pool.probe is not None, (name, pool.card)
            assert pool.probe.schedule == "17 4 * * *" and pool.probe.scale_up_alert_seconds == 1200


def test_a_pool_that_keeps_a_node_is_probed_when_it_gives_settings_and_not_with_false(tmp_path):
    text = GOOD.replace("gpus: [t4]", "gpus: {t4: {probe: {schedule: '0 5 * * *'}}}")
    assert fleet_of(tmp_path, text).cluster("cern-main").pool("t4").probe.schedule == "0 5 * * *"
    text = GOOD.replace("gpus: [t4]", "gpus: {t4: {probe: {enabled: false, schedule: '0 5 * * *'}}}")
    assert fleet_of(tmp_path, text).cluster("cern-main").pool("t4").probe is None


def test_per_pool_settings_and_short_forms(tmp_path):
    text = GOOD.replace("gpus: [t4]", "gpus: {t4: {probe: true}}").replace(
        "gpus: [t4, l4]", "gpus: {t4: {probe: false}, l4: {probe: {schedule: '0 */6 * * *', scale_up_alert_after: 5m}}}"
    )
    text = text.replace("  gpu_pool:", "  probe: {schedule: '30 2 * * 1', scale_up_alert_after: 30m}\n  gpu_pool:")
    fleet = fleet_of(tmp_path, text)
    magnum = fleet.cluster("cern-main").pool("t4").probe
    assert magnum is not None and magnum.schedule == "30 2 * * 1" and magnum.scale_up_alert_after == "30m"
    assert fleet.cluster("gke-a").pool("t4").probe is None
    l4 = fleet.cluster("gke-a").pool("l4").probe
    assert l4 is not None and l4.schedule == "0 */6 * * *" and l4.scale_up_alert_seconds == 300
    assert l4.stale_after_seconds == 6 * 3600 + RUN
    weekly = fleet.cluster("eks-a").pool("t4").probe
    assert weekly is not None and weekly.stale_after_seconds == 7 * 86400 + RUN


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            ("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '0 3 * *'}}}"),
            "is not a cron schedule such as '0 3 * * 1'",
        ),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '61 3 * * *'}}}"), "is not a valid cron schedule"),
        (
            ("gpus: [t4, l4]", "gpus: {t4: {probe: {scale_up_alert_after: 10 minutes}}}"),
            "expected a whole number of seconds, minutes or hours above zero, such as 30s, 5m or 2h, not '10 minutes'",
        ),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {every: 1h}}}"), "unknown key"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: maybe}}"), "clusters.gcp.gke-a.gpus.t4.probe"),
        (("  gpu_pool:", "  probe: {schedule: daily}\n  gpu_pool:"), "defaults.probe.schedule"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '0 4 * * 1#1'}}}"), "no L, W, # or H"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '0 0 31 2 *'}}}"), "never runs"),
    ],
)
def test_bad_probe_settings_are_located(tmp_path, change, fragment):
    assert fragment in problems(tmp_path, GOOD.replace(*change))


@pytest.mark.parametrize(
    ("schedule", "hours"),
    [
        ("17 4 * * *", 24),
        ("0 3 * * 1", 168),
        ("*/5 * * * *", 5 / 60),
        ("0 0 1 * *", 31 * 24),
        ("0 9-17 * * 1-5", 64),  # Friday 17:00 to Monday 09:00
        ("* * * 1,7 *", 153 * 24 + 1 / 60),  # 31 July 23:59 to 1 January 00:00
        ("0 0 29 2 *", 4 * 365 * 24 + 24),  # leap days only
        ("0 4 13 * 5", 168),  # the 13th or a Friday (both restricted: either one)
        ("0 4 ? * mon-fri", 72),
        # Sundays of February: 343 days each year, as 29 Feb 2032 is a Sunday (to 6 Feb 2033); any other weekday
        # has 350 days across 2032-33, and a Sunday numbered 7 instead of 0 never runs
        ("0 0 * 2 0", 343 * 24),
    ],
)
def test_longest_gap(schedule, hours):
    assert longest_gap_seconds(schedule) == pytest.approx(hours * 3600)


@pytest.mark.parametrize(
    "schedule", ["17 4 * * *", "0 9-17 * * 1-5", "0 4 13 * 5", "*/20 1,13 */3 * sun", "0 4 1 */2 *"]
)
def test_longest_gap_agrees_with_stepping_through_the_runs(schedule):
    """croniter's own iteration over two years finds the same longest gap as the day-based computation."""
    from datetime import UTC, datetime

    from croniter import croniter

    runs = croniter(schedule, datetime(2028, 1, 1, tzinfo=UTC))
    times = [runs.get_next(float) for _ in range(4000)]
    times = [t for t in times if t < datetime(2030, 1, 1, tzinfo=UTC).timestamp()] or times
    stepped = max(b - a for a, b in itertools.pairwise(times))
    assert longest_gap_seconds(schedule) == stepped


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("0 4 * * 1#1", "no L, W, # or H"),
        ("0 0 L * *", "no L, W, # or H"),
        ("H 4 * * *", "no L, W, # or H"),
        ("0 4 * * MONX", "no L, W, # or H"),
        ("0 4 1-2-3 * *", "no L, W, # or H"),
        ("0 4 */x * *", "no L, W, # or H"),
        ("61 4 * * *", "not a valid cron schedule"),
        ("0 0 31 2 *", "never runs"),
    ],
)
def test_schedules_kubernetes_would_refuse(schedule, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        check_cron(schedule)


def test_check_cron():
    assert check_cron("0 3 * * 1") == "0 3 * * 1"
    with pytest.raises(ValueError, match=re.escape("is not a cron schedule such as '0 3 * * 1'")):
        check_cron("0 3 * *")


@pytest.mark.parametrize(
    ("schedule", "gap_hours"),
    [
        ("@hourly", 1),
        ("@daily", 24),
        ("@midnight", 24),
        ("@weekly", 7 * 24),
        ("@monthly", 31 * 24),
        ("@yearly", 366 * 24),
        ("@annually", 366 * 24),
        ("@every 6h", 6),
        ("@every 1h30m", 1.5),
    ],
)
def test_descriptors_kubernetes_accepts_are_accepted(schedule, gap_hours):
    """Kubernetes validates a CronJob's schedule with robfig/cron's ParseStandard (pkg/apis/batch/validation
    validateScheduleFormat), taking these descriptors (cron/v3 parser.go parseDescriptor): `@hourly` was refused."""
    assert check_cron(schedule) == schedule
    assert longest_gap_seconds(schedule) == pytest.approx(gap_hours * 3600)


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("@houly", "is not one of Kubernetes' descriptors (did you mean '@hourly'?)"),
        ("@reboot", "is not one of Kubernetes' descriptors: @yearly, @annually"),
        ("@Hourly", "(did you mean '@hourly'?)"),  # robfig/cron matches descriptors case-sensitively
        ("@every 1d", "'1d' is not a duration such as 90m, 6h or 1h30m"),
        ("@every 0s", "at least 1s"),
    ],
)
def test_descriptors_kubernetes_refuses_are_refused(schedule, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        check_cron(schedule)


def test_a_workload_scheduled_hourly_is_a_cronjob(tmp_path):
    text = GOOD.replace("gpus: [t4]", "gpus: {t4: {probe: {schedule: '@hourly'}}}")
    fleet = fleet_of(tmp_path, text)
    (pool,) = fleet.clusters["cern-main"].pools
    assert pool.probe is not None and pool.probe.schedule == "@hourly"


def test_a_federation_interval_below_the_scrape_interval_is_refused(tmp_path):
    text = GOOD.replace("clusters:", "monitoring: {scrape_interval: 30s, federation_interval: 10s}\nclusters:", 1)
    assert "monitoring.federation_interval: 10s is below the scrape_interval 30s" in problems(tmp_path, text)
    fleet_of(tmp_path, text.replace("federation_interval: 10s", "federation_interval: 30s"))


def test_a_federation_interval_as_long_as_a_pods_linger_is_refused(tmp_path):
    text = GOOD.replace("clusters:", "monitoring: {federation_interval: 2m}\nclusters:", 1)
    assert "monitoring.federation_interval: 2m is not below the 75 s" in problems(tmp_path, text)
    fleet_of(tmp_path, GOOD.replace("clusters:", "monitoring: {federation_interval: 60s}\nclusters:", 1))


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),  # Equal is the default
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, True),  # any effect
        ({"operator": "Exists"}, True),  # everything
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "google.com/tpu", "operator": "Exists"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Lt", "value": "present"}, False),
    ],
)
def test_a_taint_is_tolerated_as_kubernetes_decides(toleration, tolerated):
    """One implementation (catalogue.Taint.tolerated_by) serves the policy pack and fleet doctor."""
    from fleet.model.core.taints import Taint

    assert Taint(key="nvidia.com/gpu", value="present").tolerated_by([toleration]) is tolerated
