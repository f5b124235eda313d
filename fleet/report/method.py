"""The report's fixed texts: the note under the summary and "How the numbers are made"."""

from __future__ import annotations

from fleet.model.probes.probe_phases import PHASE_RUN_RECORD, RECORDED_AFTER_COMPLETION, SETTLED_AFTER
from fleet.report.probes import SETTLED_FROM

SUMMARY_NOTE = (
    "Best card: the best result by the workload's headline metric (its table below); cost / result: there, at the "
    "price table's price for its machine; cheapest per result: the card whose results cost least."
)

METHOD = [
    "Every number is taken over the whole window and evaluated at its end, so finished Jobs still count "
    "(`last_over_time`/`max_over_time`, never instant values).",
    "result: per pod, the last headline value in the window, averaged over the card's pods (one pod per run "
    "of the Job); best: the best single sample.",
    "mean GPU util. and GPU energy: the `gpufleet:*` GPU recording rules of the benchmark's own pods (joined "
    "on cluster, namespace, pod), over the pods' whole life including start-up and the linger after the run.",
    "GPU time / result: the time between the first and last sample of the run counter in each pod, divided "
    "by the runs; est. billed time / result: an estimate, that time plus, for each pod, the pool's median wait for a "
    "node as its probes measured it in the window (scheduled run to running pod: the controller's and autoscaler's "
    "decisions, which are not billed, with the node's boot and image pull, which are), divided by the runs; "
    "cost / result: the estimated billed time x the machine's hourly price x the share of the machine the pod "
    "requests. Idle time after a run, before the autoscaler removes the node (10 minutes by default), is not "
    "counted.",
    "Shared cards: a pool whose cards are time-sliced or split into MIG instances shows it beside its machine "
    "(`time-slicing-2`, `mig-1g.5gb`), and a pod there pays for its slice or instance of the card; the same card "
    "whole on another cluster is the row to compare it with (the sharing penalty).",
    "Time to first accelerator: each probe run's wait from its CronJob's scheduled time to its pod running "
    "(`gpufleet_probe_scaleup_seconds`), the runs told apart by `gpufleet_probe_last_run_timestamp_seconds`; "
    "succeeded: runs whose accelerator answered (`gpufleet_probe_success`).",
    "Time to first accelerator by phase: each probe run's last value of each phase (`gpufleet:probe_phase_seconds`), "
    f"the median and the worst over the pool's runs; over a window of {SETTLED_FROM // 86400} days or more, from the "
    f"central's record of finished runs (`{PHASE_RUN_RECORD}`, one sample per run) when it covers the window from "
    f"its start, which holds a run {SETTLED_AFTER // 60} minutes after its phases were last recorded (they are "
    f"recorded until {RECORDED_AFTER_COMPLETION // 60} minutes after it completed): the runs that completed in the "
    f"window's last {(SETTLED_AFTER + RECORDED_AFTER_COMPLETION) // 60} minutes, or still ran at its end, are not "
    "counted yet.",
    "CI jobs per card: `increase()` over the window of each GitLab runner's `gitlab_runner_jobs_total` and "
    "`gitlab_runner_failed_jobs_total`, and its job duration histogram's sum over its count (increase() "
    "extrapolates to the window's edges: the counts are rounded to whole jobs).",
    "Sweeps: for each sweep job (one per accelerator count), each worker's timed epoch seconds and epochs "
    "(the workload's `distributed` counters, their highest value in the window, summed over restart attempts); time "
    "/ epoch is the slowest worker's seconds per epoch; speed-up is the smallest point's time over this one's and "
    "efficiency the speed-up over the ratio of accelerator counts; restarts is the highest JobSet restart attempt; "
    "cost / epoch is the time x the machine's hourly price x the job's nodes (the sweep point of the policy file).",
    "GPU accounting: each leaf's `gpufleet:billed_cards`, `used_cards` and `idle_cards` (cards at each evaluation: "
    "nodes up x their cards; running pods' requests, a time slice or MIG instance counting its part of a card; the "
    "difference) integrated over the window at the federation interval, `sum_over_time(x[window:interval]) x "
    "interval`, in card-hours; lost to preemption: the card-hours of pods whose node disappeared while they ran, "
    "already in used; cost: the account's used card-hours plus, for the pool's owner, its idle ones, at "
    "the machine's price per card-hour, so the accounts add up to what the cloud bills.",
    "Prices are approximate, dated observations (fleet/model/prices.yaml); the date and source of each are below.",
]
