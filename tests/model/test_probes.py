"""Pool probes in the model (fleet/model/spec.py, schedules.py): on where a pool scales to zero, per-pool settings,
located errors for bad schedules and thresholds, and how long "no result" is normal."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fleet.model.errors import InputError
from fleet.model.pod_contract import active_deadline_seconds
from fleet.model.schedules import check_cron, longest_gap_seconds
from fleet.model.spec import PROBE_DIR, load_fleet
from fleet.model.workloads import load_workload
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
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '0 3 * *'}}}"), "is not a 5-field cron schedule"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {schedule: '61 3 * * *'}}}"), "is not a valid cron schedule"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {scale_up_alert_after: 10 minutes}}}"), "should match pattern"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: {every: 1h}}}"), "unknown key"),
        (("gpus: [t4, l4]", "gpus: {t4: {probe: maybe}}"), "clusters.gcp.gke-a.gpus.t4.probe"),
        (("  gpu_pool:", "  probe: {schedule: daily}\n  gpu_pool:"), "defaults.probe.schedule"),
    ],
)
def test_bad_probe_settings_are_located(tmp_path, change, fragment):
    assert fragment in problems(tmp_path, GOOD.replace(*change))


@pytest.mark.parametrize(
    ("schedule", "hours"),
    [("17 4 * * *", 24), ("0 3 * * 1", 168), ("*/5 * * * *", 5 / 60), ("0 0 1 * *", 31 * 24), ("0 9-17 * * 1-5", 64)],
)
def test_longest_gap(schedule, hours):
    assert longest_gap_seconds(schedule) == pytest.approx(hours * 3600)


def test_check_cron():
    assert check_cron("0 3 * * 1") == "0 3 * * 1"
    with pytest.raises(ValueError, match="5-field"):
        check_cron("@daily")
