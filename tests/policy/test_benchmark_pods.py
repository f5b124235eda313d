"""policy/gpufleet_policies/benchmark_pods.py: benchmark Jobs and CronJobs, each policy failing and passing."""

from __future__ import annotations

from tests.policy.support import CRONJOB, JOB, assert_violation, check, mandatory, only, pod, reg


def test_compliant_job_and_cronjob(plans, session, job):
    assert mandatory(check(session, job)) == []
    assert mandatory(check(session, reg(plans, "fix-aks", CRONJOB, "-t4"))) == []


def test_job_on_a_card_the_policy_does_not_allow(session, job):
    job.inputs["spec"]["template"]["metadata"]["labels"]["gpu"] = "p100"
    assert_violation(check(session, job), "benchmark-allowed-card", "'p100'", "does not give cluster 'fix-eks'")


def test_job_image_latest_and_untagged(session, job):
    pod(job)["containers"][0]["image"] = "ghcr.io/example/bench:latest"
    assert_violation(check(session, job), "benchmark-pinned-images", "bench:latest", "pin a version tag")
    pod(job)["containers"][0]["image"] = "ghcr.io/example/bench"
    assert_violation(check(session, job), "benchmark-pinned-images", "untagged")
    pod(job)["containers"][0]["image"] = "registry:5000/bench@sha256:" + "0" * 64
    assert not only(check(session, job), "benchmark-pinned-images")


def test_job_without_tolerations_or_selector(session, job):
    pod(job)["tolerations"] = []
    assert_violation(check(session, job), "benchmark-placement", "does not tolerate", "gpu")
    del pod(job)["nodeSelector"]
    assert_violation(check(session, job), "benchmark-placement", "no nodeSelector")


def test_aks_spot_toleration_required(plans, session):
    r = reg(plans, "fix-aks", JOB, "-a10")
    pod(r)["tolerations"] = [t for t in pod(r)["tolerations"] if t["value"] != "spot"]
    assert_violation(check(session, r), "benchmark-placement", "spot")


def test_job_without_limits_or_deadline(session, job):
    del pod(job)["containers"][0]["resources"]["limits"]["cpu"]
    del job.inputs["spec"]["activeDeadlineSeconds"]
    assert_violation(check(session, job), "benchmark-limits", "no cpu limit", "activeDeadlineSeconds")


def test_job_deleted_by_ttl(plans, session, job):
    """A Pulumi-managed Job with a TTL would be deleted by Kubernetes and rerun by `pulumi up --refresh`."""
    job.inputs["spec"]["ttlSecondsAfterFinished"] = 86400
    assert_violation(check(session, job), "job-not-deleted-by-ttl", "pulumi up --refresh", urn=job.urn)
    for cron in [r for p in plans.values() for r in p.registrations if r.type == CRONJOB][:1]:
        assert cron.inputs["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] > 0  # Kubernetes' own Jobs
        assert not only(check(session, cron), "job-not-deleted-by-ttl")


def test_job_without_mtail_sidecar(session, job):
    for c in pod(job)["initContainers"]:
        if c["name"] == "mtail":
            del c["restartPolicy"]
    assert_violation(check(session, job), "benchmark-mtail-sidecar", "restartPolicy: Always")


def test_job_without_metric_labels(session, job):
    del job.inputs["spec"]["template"]["metadata"]["labels"]["cloud"]
    assert_violation(check(session, job), "benchmark-metric-labels", "cloud")


def test_job_without_accelerator_is_not_a_benchmark(session, job):
    for c in pod(job)["containers"]:
        c["resources"]["limits"] = {k: v for k, v in c["resources"]["limits"].items() if "/" not in k}
    pod(job)["containers"][0]["image"] = "busybox"
    # no benchmark policy applies; the policies of every pod still do (only the advisory digest one fires)
    assert {f.policy for f in check(session, job)} == {"images-by-digest"}
