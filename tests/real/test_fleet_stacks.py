"""Every stack of the shipped fleet under the real Pulumi CLI and Kubernetes provider, on hollow control planes
(tests/real/fleet_tier.py): a preview with the policy pack, run by the CLI's own analyzer host."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml
from pulumi import automation as auto

from components.kubernetes.multikueue import ROUND_SECONDS, TOKEN_MAX_DAYS, TOKEN_SETTING
from fleet.model.access import can_i
from fleet.model.core.pod_contract import BENCHMARK_NAMESPACE, KUEUE_NAMESPACE, QUEUE_NAME_LABEL
from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.model.policy_file.schema import GpuPoolDefaults
from fleet.model.queues.dispatch import kind_of
from fleet.model.queues.settings import WORKER_ACCOUNT
from fleet.report.formatting import MISSING
from fleet.report.tables import QUEUES_TITLE
from tests.conftest import ROOT, require_tool
from tests.e2e.processes import patience, wait_for
from tests.e2e.support import markdown_tables
from tests.real import dispatch
from tests.real.agreement import disagreements
from tests.real.conftest import require_receivers
from tests.real.fleet_tier import (
    KUBECONFIG_SETTING,
    PREVIEW_PRINCIPAL,
    FleetTier,
    has_preview_identity,
    provide_site_claim,
    stack_order,
)

FLEET = load_fleet()
ORDER = stack_order(FLEET)


@pytest.fixture(scope="module")
def tier(tmp_path_factory):
    """The shipped fleet's stacks on their hollow clusters; every process stopped at the end."""
    require_receivers()
    fleet_tier = FleetTier(FLEET, tmp_path_factory.mktemp("tier"))
    try:
        yield fleet_tier
    finally:
        fleet_tier.stop()


def mandatory_violations(events: list) -> list[str]:
    """The mandatory policy violations among the engine's events, in words."""
    return [
        f"{e.policy_event.policy_name} on {e.policy_event.resource_urn}: {e.policy_event.message}"
        for e in events
        if e.policy_event is not None and e.policy_event.enforcement_level == "mandatory"
    ]


def cannot_run(events: list) -> list[str]:
    """The policies the pack could not run (a value the preview cannot know read), in words."""
    return [
        f"{e.policy_event.policy_name}: {e.policy_event.message}"
        for e in events
        if e.policy_event is not None and "can't run policy" in e.policy_event.message
    ]


@pytest.mark.parametrize("name", ORDER)
def test_the_real_preview_with_the_policy_pack_passes_then_up_succeeds(tier, name):
    """In the fleet's order (a central reads its leaves' outputs, the manager its workers'): a preview with the pack,
    then ``pulumi up`` (the API server accepts every object), and for a queue worker the token the manager needs,
    as docs/queues.md has the operator make it after the first deploy, then another ``up``; the site's checkpoint
    claim where the cluster names one (docs/sweeps.md); then the central scrapes the cluster's Kueue where it has a
    part in the queues."""
    on = tier.on_hollow(name)
    preview(on)
    up(on)
    provide_site_claim(on)
    if FLEET.dispatch and FLEET.dispatch.role(name) == "worker":
        token = on.hollow.kubectl(
            "create", "token", WORKER_ACCOUNT, "-n", KUEUE_NAMESPACE, "--duration", f"{TOKEN_MAX_DAYS * 24}h"
        ).stdout.strip()
        on.stack.set_config(TOKEN_SETTING, auto.ConfigValue(token, secret=True))
        up(on)
    tier.after_up(on)


def preview(on) -> None:
    """A preview with the policy pack: no mandatory violation, every policy able to run."""
    output: list[str] = []
    events: list = []
    result = on.stack.preview(
        policy_packs=[str(on.engine.policy_pack)], on_output=output.append, on_event=events.append, color="never"
    )
    assert mandatory_violations(events) == [], "".join(output)[-20000:]
    assert cannot_run(events) == []
    assert result.change_summary.get("create", 0) > 0, "".join(output)[-20000:]


def up(on) -> None:
    """``pulumi up`` with the pack; a failure shows the CLI's output and the ends of the control plane's logs."""
    output: list[str] = []
    try:
        result = on.stack.up(policy_packs=[str(on.engine.policy_pack)], on_output=output.append, color="never")
    except Exception as exc:  # the CLI's own account of what failed, and the control plane's logs
        logs = on.hollow.logs()[-8000:]
        pytest.fail(f"pulumi up of {on.cluster.name} failed: {exc}\n{''.join(output)[-20000:]}\n{logs}")
    assert result.summary.result == "succeeded"
    assert on.controllers.problems == []


@pytest.mark.parametrize("name", ORDER)
def test_the_scheduler_and_the_model_agree_on_every_pod(tier, name):
    """Every pod of the stack (one run of each CronJob started, as its schedule would) where both the scheduler and
    the model's placement put it, or neither can (tests/real/agreement.py)."""
    on = tier.on_hollow(name)
    for cron in on.hollow.get("cronjobs", "--all-namespaces")["items"]:
        meta = cron["metadata"]
        run = f"{meta['name'][:50]}-tier-run"
        on.hollow.kubectl("-n", meta["namespace"], "create", "job", run, f"--from=cronjob/{meta['name']}")

    def settled() -> list[dict]:
        """Every pod once each was bound or tried by the scheduler (None before)."""
        pods = on.hollow.get("pods", "--all-namespaces")["items"]
        tried = all(p["spec"].get("nodeName") or p.get("status", {}).get("conditions") for p in pods)
        return pods if tried else None

    pods = wait_for(f"the scheduler to try every pod of {name}", settled, patience(), on.hollow.processes)
    found = disagreements(on.cluster, pods, on.hollow.get("nodes")["items"])
    assert found == [], "\n".join(found)


POLICY_SETTING = "gpu-fleet:policyFile"
WORKERS = [n for n in ORDER if FLEET.dispatch and FLEET.dispatch.role(n) == "worker"]
WORKER_USER = f"system:serviceaccount:{KUEUE_NAMESPACE}:{WORKER_ACCOUNT}"


def wrong_answers(on, user: str, as_user: str | None = None) -> list[str]:
    """The rows of fleet/model/can_i.yaml for ``user`` that the stack's real API server answers otherwise, asked with
    ``kubectl auth can-i --as`` (as ``as_user``, the name this cluster gives the identity, when it differs)."""
    wrong = []
    for question in (q for q in can_i.load() if q.user == user):
        command = question.kubectl()
        command[command.index("--as") + 1] = as_user or user
        asked = on.hollow.kubectl(*command[1:], check=False)
        answer = asked.stdout.strip()
        if answer not in ("yes", "no") or (answer == "yes") != question.allowed:
            wrong.append(f"{' '.join(command)}: {answer or asked.stderr.strip()}, not {question.allowed}")
    return wrong


@pytest.mark.parametrize("name", WORKERS)
def test_the_queue_managers_identity_on_a_worker_has_exactly_what_the_table_says(tier, name):
    """fleet/model/access/can_i.yaml asked of the worker's real API server with `kubectl auth can-i --as`, as
    docs/security.md promises: Jobs and Workloads in the benchmarks namespace, list and watch elsewhere, no Secret,
    no pod."""
    wrong = wrong_answers(tier.on_hollow(name), WORKER_USER)
    assert wrong == [], "\n".join(wrong)


PREVIEWED = [n for n in ORDER if has_preview_identity(FLEET.cluster(n))]


@pytest.mark.parametrize("name", PREVIEWED)
def test_the_preview_identity_has_exactly_what_the_table_says(tier, name):
    """The pull-request preview identity (``PREVIEW_PRINCIPAL`` on every stack whose cloud takes one), under the user
    name the stack exports as ``preview_user``: dry runs of the fleet's own kinds in its namespaces, no Secret, no
    exec, no token, nothing in kube-system."""
    on = tier.on_hollow(name)
    wrong = wrong_answers(on, PREVIEW_PRINCIPAL, on.stack.outputs()["preview_user"].value)
    assert wrong == [], "\n".join(wrong)


# -- the fleet's queues, run by the real Kueue on the manager and its workers (docs/queues.md) ----------------------
QUEUES = FLEET.dispatch.queues if FLEET.dispatch else ()
MANAGER = FLEET.dispatch.manager if FLEET.dispatch else ""
GPU_QUEUES = [q for q in QUEUES if kind_of(q.resource) == "gpu"]
TPU_QUEUES = [q for q in QUEUES if kind_of(q.resource) == "tpu"]
# Kueue's Incremental dispatcher adds the next worker after a round without admission (components/kubernetes/
# multikueue.py ROUND_SECONDS): a spill waits at least that long, on top of the tier's usual patience.
SPILL_PATIENCE_S = ROUND_SECONDS


def wait_explained(what: str, probe, deadline: float, *clusters):
    """``wait_for`` on ``clusters[0]``'s processes; on a timeout, what Kueue on each of ``clusters`` says."""
    try:
        return wait_for(what, probe, deadline, clusters[0].hollow.processes)
    except AssertionError as exc:
        said = [dispatch.explain(on.hollow) for on in clusters]
        raise AssertionError("\n".join([str(exc)[:3000], *said])) from None


def dispatched_to(on, job: str) -> str | None:
    """The worker MultiKueue gave Job ``job`` (the manager's Workload's ``status.clusterName``) once one admitted it."""
    workload = dispatch.workload_of(on.hollow, job)
    return (workload or {}).get("status", {}).get("clusterName") if dispatch.holds(workload, "Admitted") else None


def first_offering(queue, cards) -> str:
    """The first worker of ``queue``, in its order, with a pool of one of ``cards``."""
    return next(n for n in queue.clusters if any(p.card in cards for p in queue.pools(FLEET.cluster(n))))


@pytest.mark.skipif(not QUEUES, reason="the fleet has no queues")
def test_the_manager_reaches_every_worker(tier):
    """Every worker's MultiKueueCluster on the manager is Active: the manager's Kueue connected with the worker's
    token and watches what it dispatches there."""
    on = tier.on_hollow(MANAGER)

    def inactive() -> list[str] | None:
        clusters = on.hollow.get("multikueueclusters.kueue.x-k8s.io")["items"]
        names = sorted(c["metadata"]["name"] for c in clusters if not dispatch.holds(c, "Active"))
        return None if names or len(clusters) < len(FLEET.dispatch.workers) else []

    assert wait_for("every worker active on the manager", lambda: inactive() == [], patience(), on.hollow.processes)
    # and `fleet doctor` on the manager says so, a row per worker
    said = dispatch.doctor(on.hollow, MANAGER)
    for worker in FLEET.dispatch.workers:
        (row,) = [line for line in said.splitlines() if f"queue worker {worker} " in line]
        assert "Active" in row and "not Active" not in row, said


@pytest.mark.skipif(not QUEUES, reason="the fleet has no queues")
def test_the_policys_queued_jobs_run_on_the_first_worker_with_their_card(tier):
    """The Jobs the policy declares on the manager (a workload with ``queue``) each run on the first worker of the
    queue with a pool of its card, and complete there; the manager's Job follows."""
    on = tier.on_hollow(MANAGER)
    expected = {}
    for job in FLEET.queued_jobs():
        selector = f"workload={job.workload.name},gpu={job.card}"
        (name,) = on.hollow.kubectl(
            "-n", BENCHMARK_NAMESPACE, "get", "jobs", "-l", selector, "-o", "name"
        ).stdout.split()
        expected[name.split("/", 1)[1]] = first_offering(job.queue, [job.card])

    def ran() -> dict[str, str] | None:
        where = {job: dispatched_to(on, job) for job in expected}
        return where if all(where.values()) and all(dispatch.finished(on.hollow, j) for j in expected) else None

    workers = sorted(set(expected.values()))
    where = wait_explained("the queued Jobs to run", ran, patience(), on, *map(tier.on_hollow, workers))
    assert where == expected
    assert {j: dispatch.finished(on.hollow, j) for j in expected} == dict.fromkeys(expected, "Complete")


@pytest.mark.parametrize("queue", GPU_QUEUES[:1], ids=lambda q: q.name)
def test_a_job_submitted_as_the_docs_show_runs_on_the_first_cluster_of_its_queue(tier, queue):
    """The Job the README has a user submit on the manager runs on the queue's first cluster while it has room
    ("fill up CERN before the clouds"), and completes; its pod on a node of one of the queue's cards."""
    on = tier.on_hollow(MANAGER)
    shown, page = dispatch.documented_job()
    job = dispatch.for_queue(shown, queue, "submitted-as-shown")
    dispatch.submit(on.hollow, job)
    first = queue.clusters[0]
    worker = tier.on_hollow(first)
    try:
        where = wait_explained(f"the Job of {page.name} dispatched", lambda: dispatched_to(on, job["metadata"]["name"]),
                               patience(), on, worker)  # fmt: skip
        assert where == first
        done = wait_for("it to finish on the worker", lambda: dispatch.finished(worker.hollow, "submitted-as-shown"),
                        patience(), worker.hollow.processes)  # fmt: skip
        assert done == "Complete"
        (pod,) = worker.hollow.get("pods", "-n", BENCHMARK_NAMESPACE, "-l", "job-name=submitted-as-shown")["items"]
        node = worker.hollow.get("node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"].get("gpu") in queue.cards or any(
            all(node["metadata"]["labels"].get(k) == v for k, v in p.node_selector.items())
            for p in queue.pools(FLEET.cluster(first))
        )
        assert wait_for("the manager's Job to follow", lambda: dispatch.finished(on.hollow, "submitted-as-shown"),
                        patience(), on.hollow.processes) == "Complete"  # fmt: skip
    finally:
        dispatch.delete(on.hollow, "submitted-as-shown")


@pytest.mark.parametrize("queue", [q for q in GPU_QUEUES[:1] if len(q.clusters) > 1], ids=lambda q: q.name)
def test_a_job_spills_to_the_next_cluster_when_the_first_is_full(tier, queue):
    """With every card of the queue's first cluster taken (Jobs there holding its whole quota), the documented Job
    goes to the next cluster in the policy's order after one round of the Incremental dispatcher, as docs/queues.md
    says, and not before the first cluster was offered it."""
    on = tier.on_hollow(MANAGER)
    first, second = queue.clusters[0], queue.clusters[1]
    worker = tier.on_hollow(first)
    cluster = FLEET.cluster(first)
    holders = [f"hold-{card}" for card in queue.cards if any(p.card == card for p in queue.pools(cluster))]
    for card, name in zip([h.removeprefix("hold-") for h in holders], holders, strict=True):
        dispatch.submit(worker.hollow, dispatch.holding_job(cluster, queue, card, name))
    shown, _ = dispatch.documented_job()
    job = dispatch.for_queue(shown, queue, "submitted-when-full")
    try:
        for name in holders:
            wait_for(f"{name} admitted on {first}",
                     lambda n=name: dispatch.holds(dispatch.workload_of(worker.hollow, n), "Admitted"),
                     patience(), worker.hollow.processes)  # fmt: skip
        dispatch.submit(on.hollow, job)
        # offered to the first cluster, whose copy (the manager's Workload's name, no owner yet) waits without quota
        ours = wait_explained(
            "the Workload on the manager",
            lambda: dispatch.workload_of(on.hollow, "submitted-when-full"),
            patience(),
            on,
            worker,
        )
        name = ours["metadata"]["name"]
        offered = wait_explained(f"a copy on {first}", lambda: dispatch.named(worker.hollow, name), patience(),
                                 worker, on)  # fmt: skip
        assert not dispatch.holds(offered, "QuotaReserved")
        said = dispatch.doctor(on.hollow, MANAGER)  # why it waits, in the doctor's words
        assert any("submitted-when-full" in line and "not dispatched yet" in line for line in said.splitlines()), said
        where = wait_explained(f"the Job dispatched past {first}", lambda: dispatched_to(on, "submitted-when-full"),
                               patience() + SPILL_PATIENCE_S, on, worker)  # fmt: skip
        assert where == second
        gone = wait_for(f"the copy on {first} removed", lambda: dispatch.named(worker.hollow, name) is None,
                        patience(), worker.hollow.processes)  # fmt: skip
        assert gone
    finally:
        dispatch.delete(on.hollow, "submitted-when-full")
        for name in holders:
            dispatch.delete(worker.hollow, name)


@pytest.mark.parametrize("queue", TPU_QUEUES, ids=lambda q: q.name)
def test_tpu_work_runs_only_where_its_queue_sends_it(tier, queue):
    """The documented Job asking for TPU chips, submitted to the TPU queue, runs on that queue's cluster; submitted
    to a GPU queue, it is never admitted there (the manager has no quota of chips for it)."""
    on = tier.on_hollow(MANAGER)
    shown, _ = dispatch.documented_job()
    job = dispatch.for_queue(shown, queue, "tpu-work")
    astray = dispatch.for_queue(shown, queue, "tpu-work-astray")
    for gpu_queue in GPU_QUEUES[:1]:
        astray["metadata"]["labels"][QUEUE_NAME_LABEL] = gpu_queue.name
    dispatch.submit(on.hollow, job)
    if GPU_QUEUES:
        dispatch.submit(on.hollow, astray)
    try:
        where = wait_explained("the TPU Job dispatched", lambda: dispatched_to(on, "tpu-work"), patience(), on,
                               tier.on_hollow(queue.clusters[0]))  # fmt: skip
        assert where == queue.clusters[0] and FLEET.cluster(where).cloud == "gcp"
        if GPU_QUEUES:

            def refused() -> str | None:
                reserved = dispatch.condition(dispatch.workload_of(on.hollow, "tpu-work-astray"), "QuotaReserved")
                return reserved["message"] if reserved and reserved["status"] == "False" else None

            message = wait_for("the astray TPU Job refused", refused, patience(), on.hollow.processes)
            assert queue.resource in message
            assert dispatched_to(on, "tpu-work-astray") is None
    finally:
        dispatch.delete(on.hollow, "tpu-work")
        dispatch.delete(on.hollow, "tpu-work-astray")


QUEUED_POINTS = FLEET.queued_sweeps.points


def first_holder(point):
    """The first worker of ``point``'s queue, in its order, that holds the point, and the pool it holds it on."""
    held = {n: pool for n in point.queue.clusters for pt, pool in FLEET.queued_sweeps.held.get(n, ()) if pt == point}
    name = next(n for n in point.queue.clusters if n in held)
    return name, held[name]


@pytest.mark.parametrize("point", QUEUED_POINTS, ids=lambda p: p.name)
def test_a_queued_sweep_point_runs_as_one_jobset_on_its_pool(tier, point):
    """A sweep point of a workload that names a queue (one TrainJob the stack declares on the manager, dispatched as
    soon as the manager is up) goes to the first worker of its queue that holds it and completes there, which the
    manager's TrainJob shows; Trainer there made its JobSet, whose pods (one per node of the point, named after the
    JobSet) the worker's scheduler put on nodes of the pool the model gives the point. MultiKueue deletes the
    worker's copies once the job finished, so the pods are read from the scheduler's events there."""
    on = tier.on_hollow(MANAGER)
    prefix = f"sweep-{point.workload.name}-{point.card}-n{point.accelerators}-"
    train_jobs = on.hollow.get("trainjobs.trainer.kubeflow.org", "-n", BENCHMARK_NAMESPACE)["items"]
    (name,) = [t["metadata"]["name"] for t in train_jobs if t["metadata"]["name"].startswith(prefix)]
    expected, pool = first_holder(point)
    worker = tier.on_hollow(expected)

    def completed() -> bool:
        return dispatch.holds(dispatch.one(on.hollow, "trainjobs.trainer.kubeflow.org", name), "Complete")

    assert wait_explained(f"{name} complete on the manager", completed, patience(), on, worker)
    assert dispatch.workload_of(on.hollow, name)["status"]["clusterName"] == expected
    placed = dispatch.scheduled_pods(worker.hollow, f"{name}-")
    assert len(placed) >= point.nodes, f"{name}: the scheduler of {expected} placed {sorted(placed)}"
    nodes = {node: worker.hollow.get("node", node)["metadata"]["labels"] for node in set(placed.values())}
    off_pool = {n for n, labels in nodes.items() if any(labels.get(k) != v for k, v in pool.node_selector.items())}
    assert off_pool == set(), f"pods of {name} on {sorted(off_pool)}, outside pool {pool.name} ({pool.node_selector})"


def table_count(cell: str) -> int:
    """A count of the report's tables (``4``, ``1,024``) as a number."""
    return int(float(cell.replace(",", "")))


@pytest.mark.skipif(not QUEUES, reason="the fleet has no queues")
def test_the_reports_queues_table_counts_what_the_manager_admitted(tier, tmp_path):
    """``fleet report`` on the central's Prometheus (a real one scraping the real Kueues as the fleet's ServiceMonitors
    say, tests/real/central.py), over the tier's run so far: per queue and worker, the admissions the manager made
    (its Workloads' MultiKueue checks turning Ready, watched all along: tests/real/admissions.py), the spills past
    the first cluster, a measured wait to admission per queue, and from admission to running wherever the tier let a
    job complete."""
    require_tool("prometheus")
    assert tier.central is not None and tier.admissions is not None
    central, truth = tier.central, tier.admissions

    # a test above may leave an admission in flight (the spill's job is admitted as the test deletes it): read the
    # admissions, wait for a scrape of every Kueue after that reading, and take them if none turned in between
    reading: dict = {}

    def settled():
        if not reading:
            reading.update(counts=truth.counts(), at=time.time())
        elif central.scraped_since(reading["at"]):
            if truth.counts() == reading["counts"]:
                return time.time(), reading["counts"]
            reading.clear()
        return None

    end, admitted = wait_for("the manager's admissions to settle and the central to scrape them", settled,
                             patience(), [central.prometheus])  # fmt: skip
    assert admitted, "the manager admitted nothing: the queue tests above did not run"
    out = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, "-m", "fleet", "report", "--prometheus", central.url, "--start", str(central.collecting_since),
         "--end", str(end), "--out", str(out), "--policy", str(POLICY_FILE)],
        capture_output=True, text=True, timeout=patience(), cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-5000:]
    rows = markdown_tables((out / "report.md").read_text(encoding="utf-8"))[QUEUES_TITLE]
    # no row of a ClusterQueue the policy does not have (a cluster's own, its sweeps' or benchmarks')
    assert {r["queue"] for r in rows} <= {q.name for q in QUEUES}, rows
    by_name = {q.cluster_queue: q for q in QUEUES}
    expected, spilled = {}, {}
    for (cluster_queue, worker), count in admitted.items():
        queue = by_name[cluster_queue]
        expected[(queue.name, worker)] = count
        spilled[queue.name] = spilled.get(queue.name, 0) + (count if worker != queue.clusters[0] else 0)
    reported = {(r["queue"], r["worker"]): table_count(r["admitted"]) for r in rows if r["worker"] != "all workers"}
    assert {k: v for k, v in reported.items() if v} == expected, f"the manager admitted {admitted}"
    totals = {r["queue"]: r for r in rows if r["worker"] == "all workers"}
    for queue, row in totals.items():
        assert table_count(row["spilled past the first"]) == spilled[queue], row
        assert row["to admission, mean (s)"] != MISSING, row
    # a job reaches running where the tier let it complete: the policy's queued Jobs, the queued sweep points (the
    # spill's and the TPU's jobs are deleted once dispatched, and may never start)
    completed = {(job.queue.name, first_offering(job.queue, [job.card])) for job in FLEET.queued_jobs()}
    completed |= {(point.queue.name, first_holder(point)[0]) for point in QUEUED_POINTS}
    started = {(r["queue"], r["worker"]) for r in rows if r["admission to running, mean (s)"] != MISSING}
    assert completed <= started, rows


@pytest.mark.parametrize("name", ORDER)
def test_a_second_preview_shows_no_change(tier, name):
    on = tier.on_hollow(name)
    output: list[str] = []
    result = on.stack.preview(on_output=output.append, color="never", diff=True)
    changes = {op: n for op, n in result.change_summary.items() if op != "same" and n}
    assert changes == {}, "".join(output)[-20000:]


def a_pull_requests_policy(folder) -> str:
    """The fleet's policy file as a pull request might change it: another scrape interval (the monitoring charts'
    values) and one more node in every pool, of the default size or of its own (the pools' quotas: Kueue's
    ClusterQueues, the benchmarks' ResourceQuota; a stack whose pools all set their size, as the lab's EKS and AKS
    do, would change Helm values only, which the provider previews without a dry run); written under ``folder``,
    its path returned."""
    policy = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    monitoring = policy.setdefault("monitoring", {})
    monitoring["scrape_interval"] = "50s" if monitoring.get("scrape_interval") == "45s" else "45s"
    pool = policy.setdefault("defaults", {}).setdefault("gpu_pool", {})
    pool["max_nodes"] = pool.get("max_nodes", GpuPoolDefaults().max_nodes) + 1
    for clusters in (policy.get("clusters") or {}).values():
        for cluster in (clusters or {}).values():
            gpus = cluster.get("gpus") if isinstance(cluster, dict) else None
            for settings in gpus.values() if isinstance(gpus, dict) else ():
                if isinstance(settings, dict) and "max_nodes" in settings:
                    settings["max_nodes"] += 1
    changed = folder / "pull-request-fleet.yaml"
    changed.write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    return str(changed)


@pytest.mark.parametrize("name", PREVIEWED)
def test_a_pull_requests_preview_runs_as_the_preview_identity(tier, name, tmp_path):
    """``pulumi preview`` of a changed policy as the pull-request preview identity (the stand-in's kubeconfig a client
    certificate of the user the stack exports, as a pull request's preview reaches the cluster): the API server
    dry-runs the changes, and refuses none of the identity's requests (its audit log). The provider falls back to a
    client-side preview on a refusal without a word (pulumi-kubernetes v4.25.0 provider.go Update and Create:
    ``IsForbidden`` in a preview), so a preview that merely succeeds proves nothing."""
    on = tier.on_hollow(name)
    user = on.stack.outputs()["preview_user"].value
    output: list[str] = []
    before = len(on.hollow.audited(user))
    on.stack.set_config(KUBECONFIG_SETTING, auto.ConfigValue(on.hollow.client_kubeconfig(user).read_text(), True))
    on.stack.set_config(POLICY_SETTING, auto.ConfigValue(a_pull_requests_policy(tmp_path)))
    try:
        on.stack.preview(on_output=output.append, color="never", diff=True)
    except auto.errors.CommandError as exc:
        pytest.fail(f"a preview as {user} failed: {''.join(output)[-20000:]}\n{exc}"[-30000:])
    finally:
        on.stack.remove_config(POLICY_SETTING)
        on.stack.set_config(KUBECONFIG_SETTING, auto.ConfigValue(on.hollow.kubeconfig.read_text(), secret=True))
    asked = on.hollow.audited(user)[before:]
    refused = [f"{e['verb']} {e['requestURI']}: {e['responseStatus'].get('code')}" for e in asked if refusal(e)]
    assert refused == [], "\n".join(refused)
    dry_runs = [e for e in asked if e["verb"] in ("create", "patch", "update") and "dryRun=All" in e["requestURI"]]
    assert dry_runs, "".join(output)[-20000:]  # the changed objects were dry-run on the server, as the identity


def refusal(event: dict) -> bool:
    """Whether the API server refused the audited request (403, or an admission policy's denial)."""
    return event.get("responseStatus", {}).get("code") in (401, 403)


@pytest.mark.parametrize("name", list(reversed(ORDER)))
def test_destroy_leaves_nothing_of_the_fleet_behind(tier, name):
    on = tier.on_hollow(name)
    output: list[str] = []
    on.stack.destroy(on_output=output.append, color="never")
    left = on.hollow.kubectl("get", "namespaces", "-l", "app.kubernetes.io/part-of=gpu-fleet", "-o", "name").stdout
    assert left.strip() == "", left
