"""The fleet's queues under the mock engine (components/kubernetes/multikueue.py), on a fleet of the tests' own: a
control cluster as manager, GPUs at a Magnum site first and on two clouds, TPUs on one. The order of dispatch, the
spill-over, the TPU routing, the workers' queues and flavors, the manager's identity on each worker and its
kubeconfig carried as a secret stack output, and every MultiKueue object against Kueue's upstream CRD schemas."""

from __future__ import annotations

import base64
import json
import textwrap

import pytest
import yaml
from pulumi.runtime import rpc

from components.kubernetes.federation import federated_selectors
from components.kubernetes.kueue_metrics import KUEUE_METRICS_PORT, KUEUE_METRICS_READER
from components.kubernetes.multikueue import (
    DISPATCHED,
    DISPATCHER_ALL_AT_ONCE,
    DISPATCHER_INCREMENTAL,
    KUBECONFIG_KEY,
    KUBECONFIG_OUTPUT,
    MULTIKUEUE_CONTROLLER,
    ROLE_NAME,
    TOKEN_MAX_DAYS,
    TOKEN_SETTING,
    WATCH_ROLE_NAME,
    WORKER_IDENTITY,
    check_token,
    cluster_queue_name,
    multikueue_settings,
    token_kubeconfig,
    worker_flavor_name,
    worker_rules,
    worker_watch_rules,
)
from components.kubernetes.network_policy import CREDENTIAL_ADDRESSES
from fleet.model.access import can_i
from fleet.model.access.rbac import Rbac
from fleet.model.core import pod_contract
from fleet.model.loader import load_fleet
from fleet.model.monitoring.prometheus import SERVICE_ACCOUNT_SCRAPE_CLASS
from fleet.model.queues.dispatch import pool_capacity, quota
from fleet.model.queues.settings import START_WAIT_SERIES
from fleet.tools.checks.schemas import CRDS_ENV, load_crds, schema_errors
from fleet.tools.engine.plan import plan_fleet
from fleet.tools.engine.render import kubernetes_manifest
from tests.conftest import shared_data
from tests.helpers import FIXTURE_WORKLOADS, MAGNUM_SITE, QUEUED, QUEUED_STACKS, by_type, write_policy

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
STACKS = QUEUED_STACKS


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The queued fleet of tests/model/test_queues.py, every stack planned (the manager last)."""
    tmp = tmp_path_factory.mktemp("queued")
    policy, stacks = write_policy(tmp, QUEUED, STACKS)
    workloads = tmp / "workloads"
    workloads.mkdir()
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    return fleet, plans


def _objects(plan, kind: str) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plan, KUEUE + kind)}


def _kueue_config(plan) -> dict:
    (release,) = [r.inputs for r in by_type(plan, RELEASE) if r.inputs["name"] == "kueue"]
    return yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_the_manager_dispatches_each_queue_to_its_clusters_in_the_policys_order(planned):
    fleet, plans = planned
    dispatch = fleet.dispatch
    manager = plans[dispatch.manager]
    configs = _objects(manager, "MultiKueueConfig")
    checks = _objects(manager, "AdmissionCheck")
    queues = _objects(manager, "ClusterQueue")
    local = _objects(manager, "LocalQueue")
    for queue in dispatch.queues:
        name = cluster_queue_name(queue)
        assert configs[name]["spec"]["clusters"] == list(queue.clusters)
        assert checks[name]["spec"] == {
            "controllerName": MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name},
        }
        assert queues[name]["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": name}]}
        assert local[queue.name]["spec"] == {"clusterQueue": name}
        assert local[queue.name]["metadata"]["namespace"] == pod_contract.BENCHMARK_NAMESPACE
    # TPU work goes only where the tpu queue says, GPU work first to the first cluster of the gpu queue
    tpu = next(q for q in dispatch.queues if q.resource == "google.com/tpu")
    assert configs[cluster_queue_name(tpu)]["spec"]["clusters"] == list(tpu.clusters)
    assert all(fleet.clusters[c].cloud == "gcp" for c in tpu.clusters)
    # one MultiKueueCluster per worker, each reading its own kubeconfig Secret
    clusters = _objects(manager, "MultiKueueCluster")
    assert sorted(clusters) == sorted(dispatch.workers)
    secrets = {r.inputs["metadata"]["name"]: r for r in by_type(manager, "kubernetes:core/v1:Secret")}
    for worker, spec in clusters.items():
        location = spec["spec"]["clusterSource"]["kubeConfig"]
        assert location["locationType"] == "Secret" and worker in location["location"]
        assert secrets[location["location"]].inputs["metadata"]["namespace"] == pod_contract.KUEUE_NAMESPACE
    # the workers run nothing of the manager's: no MultiKueue object anywhere else
    for stack, plan in plans.items():
        if stack != dispatch.manager:
            assert not _objects(plan, "MultiKueueConfig") and not _objects(plan, "AdmissionCheck")


def test_spill_over_sets_the_dispatcher_explicitly(planned):
    fleet, plans = planned
    config = _kueue_config(plans[fleet.dispatch.manager])
    assert config["multiKueue"]["dispatcherName"] == DISPATCHER_INCREMENTAL
    assert config["multiKueue"]["incrementalDispatcherConfig"] == {"stepSize": 1}  # one more cluster a round
    assert config["multiKueue"]["origin"] == fleet.dispatch.manager
    # the manager integrates only the kinds it dispatches: it watches each of them on every worker
    assert config["integrations"]["frameworks"] == list(DISPATCHED)
    assert "waitForPodsReady" not in config  # nothing runs on the manager
    everywhere = multikueue_settings(
        type(fleet.dispatch)(fleet.dispatch.manager, "all", fleet.dispatch.queues)  # spill: all
    )
    assert everywhere["dispatcherName"] == DISPATCHER_ALL_AT_ONCE and "incrementalDispatcherConfig" not in everywhere


def test_each_worker_has_its_queues_flavors_of_its_own_pools_and_gives_stuck_jobs_back(planned):
    fleet, plans = planned
    dispatch = fleet.dispatch
    for worker in dispatch.workers:
        plan, cluster = plans[worker], fleet.clusters[worker]
        mine = dispatch.queues_of(worker)
        queues = _objects(plan, "ClusterQueue")
        local = _objects(plan, "LocalQueue")
        flavors = _objects(plan, "ResourceFlavor")
        assert sorted(q for q in queues if q.startswith("queue-")) == sorted(cluster_queue_name(q) for q in mine)
        # besides the benchmarks' own queue (tests/components/kubernetes/test_benchmark_queue.py)
        assert sorted(n for n in local if n != pod_contract.BENCHMARK_QUEUE) == sorted(q.name for q in mine)
        for queue in mine:
            (group,) = queues[cluster_queue_name(queue)]["spec"]["resourceGroups"]
            pools = queue.pools(cluster)
            assert [f["name"] for f in group["flavors"]] == [worker_flavor_name(p) for p in pools]
            for pool, flavor in zip(pools, group["flavors"], strict=True):
                quotas = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
                assert quotas[queue.resource] == str(pool_capacity(pool))
                spec = flavors[worker_flavor_name(pool)]["spec"]
                # the pool's own selector (Magnum's role label at the site), and its taints tolerated
                assert spec["nodeLabels"] == pool.node_selector
                assert {t["key"] for t in spec["tolerations"]} == {t.key for t in pool.pod_tolerations}
        config = _kueue_config(plan)
        assert "batch/job" in config["integrations"]["frameworks"]
        assert config["waitForPodsReady"]["timeout"] == f"{pod_contract.SCALE_UP_ALLOWANCE_SECONDS // 60}m"
        # never blockAdmission: it would stop every ClusterQueue of the worker while one job waits for a node
        # (kueue v0.19.2 pkg/cache/scheduler/cache.go podsReadyForAllAdmittedWorkloads)
        assert config["waitForPodsReady"]["blockAdmission"] is False
        assert "multiKueue" not in config
    # a cluster that is no worker gets none of it
    others = set(fleet.clusters) - set(dispatch.workers) - {dispatch.manager}
    for stack in others:
        assert set(_objects(plans[stack], "LocalQueue")) <= {pod_contract.BENCHMARK_QUEUE}


def test_the_managers_quota_is_what_its_workers_hold(planned):
    fleet, plans = planned
    dispatch = fleet.dispatch
    for queue in dispatch.queues:
        (group,) = _objects(plans[dispatch.manager], "ClusterQueue")[cluster_queue_name(queue)]["spec"][
            "resourceGroups"
        ]
        (flavor,) = group["flavors"]
        manager_quota = next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == queue.resource)
        workers_quota = 0
        for worker in queue.clusters:
            (wgroup,) = _objects(plans[worker], "ClusterQueue")[cluster_queue_name(queue)]["spec"]["resourceGroups"]
            workers_quota += sum(
                int(r["nominalQuota"]) for f in wgroup["flavors"] for r in f["resources"] if r["name"] == queue.resource
            )
        assert int(manager_quota) == workers_quota == quota(queue, fleet.clusters) > 0


def test_the_managers_identity_on_a_worker_and_its_kubeconfig_a_secret_output(planned):
    fleet, plans = planned
    manager = plans[fleet.dispatch.manager]
    for worker in fleet.dispatch.workers:
        plan = plans[worker]
        # what it dispatches, in the benchmarks namespace only
        (role,) = [r.inputs for r in by_type(plan, ROLE) if r.inputs["metadata"]["name"] == ROLE_NAME]
        assert role["rules"] == worker_rules() and role["metadata"]["namespace"] == pod_contract.BENCHMARK_NAMESPACE
        (binding,) = [r.inputs for r in by_type(plan, ROLE + "Binding") if r.inputs["roleRef"]["name"] == ROLE_NAME]
        assert binding["metadata"]["namespace"] == pod_contract.BENCHMARK_NAMESPACE
        # its watches cluster-wide, nothing more
        (watch,) = [r.inputs for r in by_type(plan, CLUSTER_ROLE) if r.inputs["metadata"]["name"] == WATCH_ROLE_NAME]
        assert watch["rules"] == worker_watch_rules()
        assert {v for rule in watch["rules"] for v in rule["verbs"]} == {"list", "watch"}
        granted = {(g, res) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
        assert set(DISPATCHED.values()) <= granted  # every kind the manager dispatches there
        (subject,) = binding["subjects"]
        (account,) = [
            r
            for r in by_type(plan, "kubernetes:core/v1:ServiceAccount")
            if r.inputs["metadata"]["name"] == subject["name"]
        ]
        assert account.inputs["automountServiceAccountToken"] is False
        # no legacy token Secret: the token is the operator's, from gpu-fleet:multikueueToken
        assert not [
            r
            for r in by_type(plan, "kubernetes:core/v1:Secret")
            if r.inputs.get("type") == "kubernetes.io/service-account-token"
        ]
        exported = plan.exports[KUBECONFIG_OUTPUT]
        assert rpc.is_rpc_secret(exported)  # a secret stack output, never plain
        config = yaml.safe_load(rpc.unwrap_rpc_secret(exported))
        (user,) = config["users"]
        assert set(user["user"]) == {"token"}  # no exec plugin, no token file: MultiKueue refuses them
        assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    # the manager reads each worker's kubeconfig through a StackReference of the worker's stack
    refs = [r for r in manager.registrations if r.type == "pulumi:pulumi:StackReference"]
    referenced = {str(r.inputs["name"]).rsplit("/", 1)[-1] for r in refs}
    assert set(fleet.dispatch.workers) <= referenced
    assert KUBECONFIG_OUTPUT not in manager.exports


@pytest.mark.parametrize(
    "question",
    [q for q in can_i.load() if q.user.endswith(f":{WORKER_IDENTITY}")],
    ids=lambda q: q.request.describe(),
)
def test_the_worker_identity_answers_the_can_i_table(planned, question):
    """fleet/model/access/can_i.yaml, asked of each worker's rendered RBAC: jobs and Workloads in benchmarks only,
    watches cluster-wide, no Secret, no pod, nothing elsewhere."""
    fleet, plans = planned
    for worker in fleet.dispatch.workers:
        rbac = Rbac.of((r.type.rsplit(":", 1)[-1], r.inputs) for r in plans[worker].registrations)
        assert rbac.allows(question.who(), question.request) is question.allowed, (worker, question.request.describe())


def test_a_worker_without_a_token_warns_and_exports_nothing(tmp_path):
    stacks = {**STACKS, "eks-a": {}}
    policy, stack_dir = write_policy(tmp_path, QUEUED, stacks)
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    fleet = load_fleet(policy, workloads)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stack_dir, workloads_dir=workloads)}
    assert KUBECONFIG_OUTPUT not in plans["eks-a"].exports
    (warning,) = [f.message for f in plans["eks-a"].findings if TOKEN_SETTING in f.message]
    assert "kubectl create token multikueue -n kueue-system --duration" in warning
    # the manager's Secret of that worker is empty until then (Kueue marks the cluster inactive); the others are set
    secrets = {r.inputs["metadata"]["name"]: r.inputs for r in by_type(plans["control"], "kubernetes:core/v1:Secret")}
    assert rpc.unwrap_rpc_secret(secrets["multikueue-eks-a"]["stringData"]) == {}
    assert KUBECONFIG_KEY in rpc.unwrap_rpc_secret(secrets["multikueue-gke-a"]["stringData"])


def _jwt(claims: dict) -> str:
    encode = lambda part: base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")  # noqa: E731
    return f"{encode({'alg': 'RS256'})}.{encode(claims)}.c2ln"


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"exp": 1_000_000 + 7 * 86400}, None),
        ({"exp": 1_000_000 + TOKEN_MAX_DAYS * 86400}, None),
        ({"exp": 1_000_000 + (TOKEN_MAX_DAYS + 1) * 86400}, "more than 31"),
        ({"exp": 1_000_000 - 86400}, "expired 1.0 days ago"),
        ({"sub": "system:serviceaccount:kueue-system:multikueue"}, "never expires"),
        ({"exp": True}, "never expires"),
    ],
)
def test_a_worker_token_must_expire_within_a_month(claims, problem):
    found = check_token(_jwt(claims), 1_000_000)
    if problem is None:
        assert found is None
    else:
        assert problem in found and TOKEN_SETTING in found and "kubectl create token" in found


def test_a_worker_token_that_is_no_jwt_is_refused_without_echoing_it():
    found = check_token("not-a-token-s3cret", 0)
    assert "not a ServiceAccount token" in found and "s3cret" not in found


def test_the_manager_may_reach_api_servers_only(planned):
    fleet, plans = planned
    policies = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in by_type(plans[fleet.dispatch.manager], "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    egress = policies["kueue-egress"]["spec"]["egress"]
    assert [r.get("ports") for r in egress[1:]] == [
        [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
    ]
    assert egress[1]["to"][0]["ipBlock"]["except"] == list(CREDENTIAL_ADDRESSES)  # every cloud's metadata address


def test_each_queue_clusters_prometheus_scrapes_its_kueue_and_the_central_federates_the_workers_start_wait(planned):
    """The manager's Prometheus (the central) scrapes its Kueue's dispatch and admission metrics, each worker's leaf its
    Kueue's wait from admission to running pods (observed only on the workers, where waitForPodsReady is on), which the
    central federates: the report's wait to start per worker."""
    fleet, plans = planned
    for stack, plan in plans.items():
        (monitor,) = [r.inputs for r in by_type(plan, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")]
        assert monitor["metadata"]["namespace"] == pod_contract.KUEUE_NAMESPACE, stack
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] == "https" and endpoint["scheme"] == "https", stack
        # with the Prometheus' own token, through the scrape class its Prometheus defines (not bearerTokenFile)
        assert "bearerTokenFile" not in endpoint and "authorization" not in endpoint
        assert monitor["spec"]["scrapeClass"] == SERVICE_ACCOUNT_SCRAPE_CLASS
        (release,) = [r.inputs for r in by_type(plan, RELEASE) if r.inputs["chart"] == "kube-prometheus-stack"]
        classes = {c["name"]: c for c in release["values"]["prometheus"]["prometheusSpec"]["scrapeClasses"]}
        token = classes[SERVICE_ACCOUNT_SCRAPE_CLASS]["authorization"]
        assert token == {"type": "Bearer", "credentialsFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
        # the scraper's token may read /metrics: the chart's metrics-reader ClusterRole, bound to Prometheus' account
        (binding,) = [
            r.inputs
            for r in by_type(plan, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
            if r.inputs["roleRef"]["name"] == KUEUE_METRICS_READER
        ]
        (subject,) = binding["subjects"]
        assert subject["kind"] == "ServiceAccount" and subject["namespace"] == "monitoring"
        assert subject["name"] == "kps-prometheus"
        # only the monitoring namespace's Prometheus reaches Kueue's 8443
        policies = {
            (r.inputs["metadata"]["name"], r.inputs["metadata"]["namespace"]): r.inputs
            for r in by_type(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        }
        rule = policies[("allow-prometheus", pod_contract.KUEUE_NAMESPACE)]["spec"]["ingress"][0]
        assert rule["ports"] == [{"protocol": "TCP", "port": KUEUE_METRICS_PORT}]
        assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert set(START_WAIT_SERIES) <= set(federated_selectors(fleet))
    assert {p.stack for p in plans.values()} == {fleet.dispatch.manager, *fleet.dispatch.workers}


def test_a_fleet_without_queues_neither_scrapes_nor_federates_kueue(tmp_path):
    policy, stacks = write_policy(tmp_path, QUEUED.split("queues:")[0], STACKS)  # the same clusters, no queues
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    fleet = load_fleet(policy, workloads)
    assert fleet.dispatch is None
    assert not set(START_WAIT_SERIES) & set(federated_selectors(fleet))
    for plan in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads):
        assert not by_type(plan, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"), plan.stack


def test_every_queue_object_fits_kueues_upstream_crds(planned):
    crds = load_crds(shared_data(CRDS_ENV, "k8s/crds", "the upstream CRD files"))
    fleet, plans = planned
    checked, bad = 0, []
    for stack, plan in plans.items():
        for reg in plan.registrations:
            if reg.type.startswith(KUEUE):
                manifest = kubernetes_manifest(reg)
                checked += 1
                bad += [f"{stack} {manifest['kind']} {reg.name}: {e}" for e in schema_errors(manifest, "1.33", crds)]
    assert bad == []
    assert checked >= 5 + 2 * len(fleet.dispatch.queues)
    # and the schema refuses a misspelt field of ours
    config = next(kubernetes_manifest(r) for r in by_type(plans[fleet.dispatch.manager], KUEUE + "MultiKueueConfig"))
    config["spec"]["cluster"] = config["spec"].pop("clusters")
    assert schema_errors(config, "1.33", crds)


def test_a_kueue_cluster_below_kubernetes_1_29_is_refused(tmp_path):
    from fleet.model.core.errors import InputError
    from fleet.tools.engine.plan import plan_stack

    policy, stacks = write_policy(
        tmp_path, QUEUED, {**STACKS, "cern-gpu": {**STACKS["cern-gpu"], "gpu-fleet:magnum": MAGNUM_SITE}}
    )
    (tmp_path / "workloads").mkdir()
    with pytest.raises(
        InputError, match=r"Pulumi.cern-gpu.yaml:\d+: config.gpu-fleet:magnum.kubeTag: cern-gpu runs Kueue"
    ):
        plan_stack("cern-gpu", policy, stacks, {}, tmp_path / "workloads")


def test_a_token_kubeconfig_keeps_only_server_ca_and_token():
    source = textwrap.dedent(
        """\
        apiVersion: v1
        clusters: [{name: a, cluster: {server: 'https://a.example:443', certificate-authority-data: Q0E=}}]
        contexts: [{name: a, context: {cluster: a, user: a}}]
        current-context: a
        users: [{name: a, user: {exec: {command: gke-gcloud-auth-plugin}}}]
        """
    )
    config = yaml.safe_load(token_kubeconfig(source, "t0ken", "worker"))
    assert config["clusters"][0]["cluster"] == {"server": "https://a.example:443", "certificate-authority-data": "Q0E="}
    assert config["users"][0]["user"] == {"token": "t0ken"}
    with pytest.raises(ValueError, match="certificate-authority-data"):
        token_kubeconfig(source.replace("certificate-authority-data: Q0E=", "insecure-skip-tls-verify: true"), "t", "w")
    assert base64.b64decode("Q0E=") == b"CA"


def test_a_manager_that_sweeps_its_own_cards_watches_trainjobs_and_no_jobset_on_every_worker(tmp_path):
    """Kueue on a manager watches, on every worker, each job kind it integrates with a MultiKueue adapter, and a
    watch it may not open keeps the worker inactive (kueue 0.19.2 multikueuecluster.go; found by the real tier on the
    lab fleet, whose manager sweeps a card of its own). Such a manager integrates TrainJobs and no JobSets; every
    worker lets it watch TrainJobs (it dispatches none: no write on them) and runs Trainer for their kinds."""
    from components.kubernetes.multikueue import TRAINJOBS
    from fleet.model.queues.queued_sweeps import manager_watches_trainjobs, runs_trainer

    policy_text = QUEUED.replace("      region: cern\n      central: true\n",
                                 "      region: cern\n      central: true\n      gpus: [t4]\n")  # fmt: skip
    policy_text = policy_text.replace("workloads: {}", "workloads:\n  sweeper: {gpus: [t4], scale: [1, 2]}")
    policy, stacks = write_policy(tmp_path, policy_text, STACKS)
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    (workloads / "sweeper").symlink_to(FIXTURE_WORKLOADS / "sweeper", target_is_directory=True)
    fleet = load_fleet(policy, workloads)
    assert fleet.sweep_points(fleet.cluster(fleet.dispatch.manager)) and not fleet.queued_points()
    assert manager_watches_trainjobs(fleet)
    plans = {p.stack: p for p in plan_fleet(fleet, policy, stacks_dir=stacks, workloads_dir=workloads)}
    frameworks = _kueue_config(plans[fleet.dispatch.manager])["integrations"]["frameworks"]
    assert "trainer.kubeflow.org/trainjob" in frameworks and "jobset.x-k8s.io/jobset" not in frameworks
    for worker in fleet.dispatch.workers:
        plan = plans[worker]
        assert runs_trainer(fleet, fleet.cluster(worker)), worker
        (watch,) = [r.inputs for r in by_type(plan, CLUSTER_ROLE) if r.inputs["metadata"]["name"] == WATCH_ROLE_NAME]
        watched = {(g, res) for rule in watch["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
        assert set(TRAINJOBS.values()) <= watched, worker
        assert ("jobset.x-k8s.io", "jobsets") not in watched, worker
        (role,) = [r.inputs for r in by_type(plan, ROLE) if r.inputs["metadata"]["name"] == ROLE_NAME]
        assert role["rules"] == worker_rules(), worker  # what it dispatches: batch Jobs only
