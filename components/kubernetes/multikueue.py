"""The fleet's queues on Kubernetes: Kueue's MultiKueue, a manager that holds the queues and workers that run the jobs.

Upstream facts, checked at kubernetes-sigs/kueue v0.19.2 (the version the fleet pins):

* **Manager** (site/content/en/docs/tasks/manage/setup_multikueue.md, site/static/examples/multikueue/): an
  ``AdmissionCheck`` with ``controllerName: kueue.x-k8s.io/multikueue`` whose ``parameters`` name a
  ``MultiKueueConfig``; the config lists ``MultiKueueCluster`` names, each with ``clusterSource.kubeConfig``
  ``{locationType: Secret, location: <secret>}``, the Secret in Kueue's namespace holding the worker's kubeconfig
  under the key ``kubeconfig`` (apis/kueue/v1beta2/multikueue_types.go). The ClusterQueue runs the check
  (``admissionChecksStrategy.admissionChecks``). The kubeconfig may hold a bearer token and CA data, never a token
  file, an exec plugin, an auth provider or ``insecure-skip-tls-verify`` (pkg/controller/admissionchecks/multikueue/
  multikueuecluster.go ``validateKubeconfig``, ``validateRestConfig``): the workers' own kubeconfigs (exec plugins on
  GKE and EKS) cannot be used, so each worker makes a token kubeconfig of its own (``token_kubeconfig``).
* **Dispatcher**: one per manager (``Configuration.multiKueue.dispatcherName``), by default
  ``kueue.x-k8s.io/multikueue-dispatcher-all-at-once`` (apis/config/v1beta2/defaults.go); the Incremental one
  nominates ``incrementalDispatcherConfig.stepSize`` more workers every round of 5 minutes
  (pkg/controller/workloaddispatcher/incrementaldispatcher.go ``incrementalDispatcherRoundTimeout``), in the
  MultiKueueConfig's order (feature gate ``MultiKueueIncrementalDispatcherRespectConfigOrder``, beta and on in 0.19;
  off, it sorts them by name) and ``stepSize`` is honoured (``MultiKueueIncrementalDispatcherConfig``, beta, on).
  ``spill: ordered`` is the Incremental dispatcher with step 1, ``spill: all`` the all-at-once one; both set here
  explicitly.
* **Manager -> worker client rate**: the manager's clients to the workers are built from the kubeconfig alone
  (``clientcmd.RESTConfigFromKubeConfig``, multikueuecluster.go lines 114-118 ``toRESTConfig``), so they run at
  client-go's default 5 QPS, burst 10 (k8s.io/client-go v0.36.3, which the built Kueue links, rest/config.go lines
  47-48 and 370-381), which the configuration cannot change at 0.19.2 (the ``clientConnection`` of
  components/kubernetes/training.py is the manager's own client; kueue issue 14973 and PR 15097 add a setting later).
  Each dispatched job costs the manager a few calls per worker (create the Workload and the Job, then status):
  measured on the real Kueue (docs/performance.md, "How fast the fleet's queues dispatch"), a burst of 100 Jobs
  reached a worker at 1.2 Jobs a second at the fleet's ``clientConnection`` (300/500) and 1.1 at 20/40, as kueue issue
  8564 reports (about 1.3); only below that, at 5/10, the manager's own client set the pace (0.4). Plenty for
  benchmark jobs, not for thousands at once (docs/queues.md).
* **Worker identity**: upstream's ``create-multikueue-kubeconfig.sh`` gives a ServiceAccount in ``kueue-system`` a
  ClusterRole with create/delete/get/list/watch on every dispatched kind in every namespace: a Job in any namespace
  (``node-agents`` included, privileged) would then run at once. The fleet grants what the manager's code calls
  (v0.19.2), in the namespace Kueue manages on the workers (``benchmarks``) only: the job adapters ``Get`` and
  ``Create`` the remote job (pkg/controller/jobs/job/job_multikueue_adapter.go ``SyncJob``; trainjob likewise) and
  ``Delete`` it (``DeleteRemoteObject``, after a ``Get`` in jobframework/utils.go ``ValidateRemoteObjectOwnership``);
  the Workload reconciler ``Create``s, ``Get``s, ``Update``s (finalizer, priority) and ``Delete``s the remote
  Workload and patches its status (admissionchecks/multikueue/workload.go: ``PatchAdmissionStatus`` on eviction on
  the manager, ``Status().Update`` for the MultiKueueOrchestratedPreemption gate). Cluster-wide it only reads:
  ``list`` and ``watch`` of Workloads and of each dispatched kind, which it watches in every namespace filtered by the
  ``kueue.x-k8s.io/multikueue-origin`` label (multikueuecluster.go ``establishWatch``, and the garbage collector's
  ``List`` of remote Workloads by that label); RBAC cannot narrow a watch by label. Left out: the remote
  ClusterQueue and LocalQueue reads (only with the alpha gate MultiKueueManagerQuotaAutomation, off), ``patch`` on
  jobs (``syncElasticJob``, only for jobs annotated elastic, which the fleet never makes) and ``get`` on jobs'
  status subresource (no adapter calls it). The manager watches every job kind its own Kueue integrates that has a
  MultiKueue adapter, and a watch it may not open fails the connection, so the manager integrates only batch Jobs
  (``DISPATCHED``) and TrainJobs where it needs them (queued sweep points, or sweeps of its own: ``watched_kinds``),
  never JobSets, and the workers' roles grant the watch of exactly those and the writes of what it dispatches.
  Its credential is a **bound ServiceAccount token** the operator makes with ``kubectl create token multikueue -n
  kueue-system --duration ...`` (TokenRequest: it expires, and is never stored in the cluster) and sets as the secret
  stack setting ``gpu-fleet:multikueueToken``; the program refuses one whose ``exp`` claim has passed or lies more than
  ``TOKEN_MAX_DAYS`` ahead (``check_token``). No legacy ``kubernetes.io/service-account-token`` Secret (which never
  expires) is made. The kubeconfig leaves the worker's stack only as a secret output.
* **Workers** run Kueue with the same namespace and LocalQueue names (setup_multikueue.md: "the worker cluster
  configuration mirrors the one of the manager ... in terms of namespaces and LocalQueues"), one ResourceFlavor per
  pool of the queue's cards, in the queue's card order, whose ``nodeLabels`` and ``tolerations`` Kueue adds to a job's
  pods when it admits them there, so a job submitted once runs on whichever cloud's pool without naming it; and
  ``waitForPodsReady``, which evicts a job whose pods are not running in time; the manager dispatches it again from
  the first cluster (``MultiKueueRedoAdmissionOnEvictionInWorker``, GA; evict.go ``resetClusterNomination``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.deployment import FLEET_PART_OF
from components.kubernetes.multikueue_kubeconfig import OFFLINE_KUBECONFIG, token_kubeconfig
from components.kubernetes.network_policy import dns_egress, internet_block, network_policy, ports
from components.kubernetes.training import KUEUE_API, UNBOUNDED, kueue_cluster_queue
from fleet.model.core import pod_contract
from fleet.model.core.clusters import Cluster
from fleet.model.core.jobs import Dispatch, Queue
from fleet.model.core.pools import GpuPool
from fleet.model.queues.dispatch import pool_capacity, quota
from fleet.model.queues.settings import SPILL_ALL, WORKER_ACCOUNT
from fleet.model.queues.token import TOKEN_MAX_DAYS, TOKEN_SETTING, check_token

# apis/kueue/v1beta2/multikueue_types.go MultiKueueControllerName
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# apis/config/v1beta2/configuration_types.go MultiKueueDispatcherModeAllAtOnce / MultiKueueDispatcherModeIncremental
DISPATCHER_ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# pkg/controller/workloaddispatcher/incrementaldispatcher.go incrementalDispatcherRoundTimeout
ROUND_SECONDS = 300
# the job kinds the manager dispatches (Kueue integrations.frameworks) and their API group and resource: batch Jobs,
# and TrainJobs when the fleet has queued sweep points (``dispatched_kinds``)
DISPATCHED = {"batch/job": ("batch", "jobs")}
TRAINJOBS = {"trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs")}
# the label a job carries to name its LocalQueue (pkg/controller/constants QueueLabel)
WORKER_IDENTITY = WORKER_ACCOUNT
ROLE_NAME = "gpu-fleet-multikueue"
WATCH_ROLE_NAME = "gpu-fleet-multikueue-watch"
KUBECONFIG_KEY = "kubeconfig"  # multikueue_types.go: "The config should be stored in the kubeconfig key"
# the stack output carrying a worker's token kubeconfig to the manager (a secret)
KUBECONFIG_OUTPUT = "multikueue_kubeconfig"
# apis/config/v1beta2 defaults: gcInterval 1m, workerLostTimeout 15m; kept, and written down
GC_INTERVAL = "1m"
WORKER_LOST_TIMEOUT = "15m"
# the manager reaches each worker's API server: 443 on GKE, EKS and AKS; 6443 on Magnum (openstack/magnum
# magnum/drivers/heat/k8s_template_def.py KUBE_SECURE_PORT)
API_SERVER_PORTS = (443, 6443)
FLEET_LABELS = {"app.kubernetes.io/part-of": FLEET_PART_OF}


def multikueue_settings(dispatch: Dispatch) -> dict[str, Any]:
    """The manager's ``multiKueue`` configuration: the dispatcher of the policy's spill-over, set explicitly."""
    settings: dict[str, Any] = {
        "gcInterval": GC_INTERVAL,
        "origin": dispatch.manager,  # the label value that marks this manager's objects on the workers
        "workerLostTimeout": WORKER_LOST_TIMEOUT,
    }
    if dispatch.spill == SPILL_ALL:
        settings["dispatcherName"] = DISPATCHER_ALL_AT_ONCE
    else:
        # one more worker each round, in the MultiKueueConfig's order: the first cluster has the job to itself for a
        # round, then the first two, and so on
        settings["dispatcherName"] = DISPATCHER_INCREMENTAL
        settings["incrementalDispatcherConfig"] = {"stepSize": 1}
    return settings


def watched_kinds(trainjobs: bool) -> dict[str, tuple[str, str]]:
    """The kinds the manager watches on every worker (the job kinds its Kueue integrates with a MultiKueue adapter):
    batch Jobs, and TrainJobs when ``trainjobs`` (``manager_watches_trainjobs``: queued sweep points, or a manager
    that sweeps its own cards). The manager's Kueue integrates no JobSet (``training.MANAGER_FRAMEWORKS``), whose
    adapter would watch JobSets on every worker too."""
    return {**DISPATCHED, **(TRAINJOBS if trainjobs else {})}


def dispatched_kinds(trainjobs: bool) -> dict[str, tuple[str, str]]:
    """The kinds the manager integrates and dispatches: batch Jobs, and TrainJobs when ``trainjobs`` (the fleet has
    queued sweep points).

    The manager watches every integrated kind with a MultiKueue adapter on **every** worker, whichever queue it serves
    (multikueuecluster.go ``establishWatch``), and a watch it cannot open fails the worker's connection: with
    TrainJobs, every worker runs Trainer (its CRDs) and grants them. Upstream's create-multikueue-kubeconfig.sh
    (v0.19.2) lists no TrainJob rule; its rights follow from the adapter (trainjob_multikueue_adapter.go: ``Get`` and
    ``Create`` in ``SyncJob``, ``Delete`` in ``DeleteRemoteObject``, ``List`` and ``Watch`` as a
    ``MultiKueueWatcher``), written as the script writes them for every other kind (and ``get`` on the status).
    The JobSets the worker's Trainer makes of a TrainJob are not the manager's: it neither integrates nor watches
    them."""
    return {**DISPATCHED, **(TRAINJOBS if trainjobs else {})}


def worker_rules(kinds: Mapping[str, tuple[str, str]] = DISPATCHED) -> list[dict[str, Any]]:
    """The manager's rights on a worker in the namespace Kueue manages there (a Role): what the adapters and the
    Workload reconciler call (see the module's docstring)."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": [resource], "verbs": ["create", "delete", "get"]}
        for group, resource in kinds.values()
    ]
    rules += [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["create", "delete", "get", "update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
    ]
    return rules


def worker_watch_rules(kinds: Mapping[str, tuple[str, str]] = DISPATCHED) -> list[dict[str, Any]]:
    """The manager's cluster-wide rights on a worker (a ClusterRole): ``list`` and ``watch`` of Workloads and of the
    kinds it watches (``watched_kinds``), in every namespace by label, and nothing else."""
    resources = [("kueue.x-k8s.io", "workloads"), *kinds.values()]
    return [
        {"apiGroups": [group], "resources": [resource], "verbs": ["list", "watch"]} for group, resource in resources
    ]


def cluster_queue_name(queue: Queue) -> str:
    """A queue's ClusterQueue (and on the manager its AdmissionCheck and MultiKueueConfig): ``queue-<name>``."""
    return queue.cluster_queue


def worker_flavor_name(pool: GpuPool) -> str:
    """The ResourceFlavor of a pool for the queues: ``queue-gpu-t4`` (the sweeps' own flavors are ``gpu-t4``)."""
    return f"queue-{pool.name}"


def kubeconfig_secret_name(worker: str) -> str:
    """The Secret in the manager's Kueue namespace holding a worker's kubeconfig."""
    return f"multikueue-{worker}"


def manager_cluster_queue_spec(
    queue: Queue, clusters: Mapping[str, Cluster], namespace: str, held: int | None = None
) -> dict[str, Any]:
    """The manager's ClusterQueue of a queue: one flavor holding what the workers' pools hold (``held``: with the
    sweep pools they build for the queue's sweep points, ``queued_sweeps.queue_quota``), and the MultiKueue check. The
    manager runs nothing itself: its quota only caps what it dispatches at once to what the workers can take."""
    name = cluster_queue_name(queue)
    resources = {queue.resource: str(quota(queue, clusters) if held is None else held), **UNBOUNDED}
    return {
        **kueue_cluster_queue(namespace, list(resources), [(name, resources)]),
        "admissionChecksStrategy": {"admissionChecks": [{"name": name}]},
    }


def worker_cluster_queue_spec(
    queue: Queue, cluster: Cluster, namespace: str, sweep_pools: Sequence[GpuPool] = ()
) -> dict[str, Any]:
    """A worker's ClusterQueue of a queue: a flavor per pool of the queue's cards, in the queue's order, each capped at
    what the pool holds; first the sweep pools the worker builds for the queue's sweep points (``sweep_pools``).

    The sweep pools come first: Kueue takes the first flavor whose own label keys the pod's affinity matches, a sweep
    pool's flavor labels the card and its size, which only its points name, and every other job of the card refuses
    it by ``DoesNotExist`` on the size label (``card_affinity``). A point whose sweep flavor is full still matches
    the card pool's flavor after it (docs/queues.md, "What Kueue does not guarantee here"): MultiKueue hands a job to
    the worker's LocalQueue of the manager's queue name, so the queue's points share this ClusterQueue; a queue of
    one pool's flavor alone, as the per-cluster sweeps have (components/kubernetes/training.py ``cluster_queue_spec``),
    would take a queue per sweep pool on the manager too."""
    flavors = []
    for pool in (*sweep_pools, *queue.pools(cluster)):
        flavors.append((worker_flavor_name(pool), {queue.resource: str(pool_capacity(pool)), **UNBOUNDED}))
    return kueue_cluster_queue(namespace, [queue.resource, *UNBOUNDED], flavors)


def worker_flavor_spec(pool: GpuPool) -> dict[str, Any]:
    """A pool's flavor: its node selector and the tolerations its pods need, which Kueue adds to an admitted job's
    pods (the job names no cloud's labels)."""
    return {"nodeLabels": dict(pool.node_selector), "tolerations": [t.toleration() for t in pool.pod_tolerations]}


class QueueWorker(pulumi.ComponentResource):
    """A worker's side of the queues: the manager's identity (ServiceAccount, a Role in the benchmarks namespace, a
    ClusterRole of watches, and a kubeconfig made from the operator's token, a secret), and each of its queues'
    flavors, ClusterQueue and LocalQueue."""

    TYPE = "gpufleet:index:QueueWorker"

    def __init__(
        self,
        cluster: Cluster,
        queues: Sequence[Queue],
        kueue_namespace: pulumi.Input[str],
        benchmark_namespace: pulumi.Input[str],
        kubeconfig: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
        sweep_pools: Mapping[str, Sequence[GpuPool]] | None = None,
        kinds: Mapping[str, tuple[str, str]] = DISPATCHED,
        watched: Mapping[str, tuple[str, str]] | None = None,
        token: pulumi.Output[str] | None = None,
        placeholder: str | None = None,
    ):
        """``sweep_pools``: per queue, the sweep pools this worker builds for its sweep points (``QueuedSweeps.
        sweep_pools_of``); ``kinds``: what the manager dispatches (``dispatched_kinds``); ``watched``: what it watches
        there (``watched_kinds``; by default ``kinds``); ``token``: the identity's token
        (``gpu-fleet:multikueueToken``; None: not made yet, no kubeconfig); ``placeholder``: what the offline plan
        reads for an encrypted value (not checked)."""
        super().__init__(self.TYPE, f"{cluster.name}-queue-worker", None, opts)
        swept = sweep_pools or {}
        child = pulumi.ResourceOptions(parent=self)
        name = cluster.name
        account = k8s.core.v1.ServiceAccount(
            f"{name}-multikueue-identity",
            metadata={"name": WORKER_IDENTITY, "namespace": kueue_namespace, "labels": FLEET_LABELS},
            automount_service_account_token=False,
            opts=child,
        )
        subjects = [{"kind": "ServiceAccount", "name": WORKER_IDENTITY, "namespace": kueue_namespace}]
        # what it dispatches, in the namespace Kueue manages here only
        role = k8s.rbac.v1.Role(
            f"{name}-multikueue-role",
            metadata={"name": ROLE_NAME, "namespace": benchmark_namespace, "labels": FLEET_LABELS},
            rules=worker_rules(kinds),
            opts=child,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-multikueue-binding",
            metadata={"name": ROLE_NAME, "namespace": benchmark_namespace, "labels": FLEET_LABELS},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata["name"]},
            subjects=subjects,
            opts=child,
        )
        # and its watches, cluster-wide
        watch = k8s.rbac.v1.ClusterRole(
            f"{name}-multikueue-watch-role",
            metadata={"name": WATCH_ROLE_NAME, "labels": FLEET_LABELS},
            rules=worker_watch_rules(kinds if watched is None else watched),
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-multikueue-watch-binding",
            metadata={"name": WATCH_ROLE_NAME, "labels": FLEET_LABELS},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": watch.metadata["name"]},
            subjects=subjects,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
        )
        self.kubeconfig: pulumi.Output[str] | None = None
        if token is None:
            pulumi.log.warn(
                f"{name}: {TOKEN_SETTING} is not set: the manager cannot dispatch to this worker. After the first "
                f"deploy: kubectl create token {WORKER_IDENTITY} -n kueue-system --duration {TOKEN_MAX_DAYS * 24}h, "
                f"then pulumi config set --secret {TOKEN_SETTING} <token>, and deploy this stack and the manager's"
            )
        else:

            def checked(values: list[str]) -> str:
                config, bearer = values
                if config == placeholder:  # an existing cluster's kubeconfig, encrypted: the offline plan's stand-in
                    config = OFFLINE_KUBECONFIG
                if bearer != placeholder:  # offline the encrypted value cannot be read
                    problem = check_token(bearer, time.time())
                    if problem:
                        raise ValueError(f"{name}: {problem}")
                return token_kubeconfig(config, bearer, name)

            self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(kubeconfig, token).apply(checked))
        pools = {p.name: p for q in queues for p in (*swept.get(q.name, ()), *q.pools(cluster))}
        flavors = [
            k8s.apiextensions.CustomResource(
                f"{name}-queue-flavor-{pool.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": worker_flavor_name(pool), "labels": FLEET_LABELS},
                spec=worker_flavor_spec(pool),
                opts=child,
            )
            for pool in pools.values()
        ]
        for queue in queues:
            after = pulumi.ResourceOptions(parent=self, depends_on=flavors)
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{queue.name}",
                api_version=KUEUE_API,
                kind="ClusterQueue",
                metadata={"name": cluster_queue_name(queue), "labels": FLEET_LABELS},
                spec=worker_cluster_queue_spec(
                    queue, cluster, pod_contract.BENCHMARK_NAMESPACE, swept.get(queue.name, ())
                ),
                opts=after,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-local-queue-{queue.name}",
                api_version=KUEUE_API,
                kind="LocalQueue",
                metadata={"name": queue.name, "namespace": benchmark_namespace, "labels": FLEET_LABELS},
                spec={"clusterQueue": cluster_queue_name(queue)},
                opts=after,
            )
        self.register_outputs({})


class QueueManager(pulumi.ComponentResource):
    """The manager's side: each worker's kubeconfig (from its stack) and MultiKueueCluster, and per queue the
    MultiKueueConfig in the policy's order, its AdmissionCheck, flavor, ClusterQueue and LocalQueue; and the egress its
    Kueue needs to reach the workers."""

    TYPE = "gpufleet:index:QueueManager"

    def __init__(
        self,
        cluster: Cluster,
        dispatch: Dispatch,
        clusters: Mapping[str, Cluster],
        kueue_namespace: pulumi.Input[str],
        benchmark_namespace: pulumi.Input[str],
        stack_reference_prefix: str,
        opts: pulumi.ResourceOptions,
        quotas: Mapping[str, int] | None = None,
    ):
        """``quotas``: per queue, what its workers hold with the sweep pools they build for its sweep points
        (``queued_sweeps.queue_quota``; by default their card pools alone, ``queues.quota``)."""
        super().__init__(self.TYPE, f"{cluster.name}-queue-manager", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        name = cluster.name
        connected = []
        for worker in dispatch.workers:
            # a reference of its own name: the central's federation may reference the same stack
            ref = pulumi.StackReference(
                f"{name}-multikueue-{worker}", stack_name=f"{stack_reference_prefix}/{worker}", opts=child
            )
            secret = k8s.core.v1.Secret(
                f"{name}-multikueue-kubeconfig-{worker}",
                metadata={"name": kubeconfig_secret_name(worker), "namespace": kueue_namespace, "labels": FLEET_LABELS},
                type="Opaque",
                # empty until the worker's stack has a token (Kueue then marks the cluster inactive)
                string_data=ref.get_output(KUBECONFIG_OUTPUT).apply(lambda v: {KUBECONFIG_KEY: v} if v else {}),
                opts=child,
            )
            connected.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-multikueue-cluster-{worker}",
                    api_version=KUEUE_API,
                    kind="MultiKueueCluster",
                    metadata={"name": worker, "labels": FLEET_LABELS},
                    spec={
                        "clusterSource": {
                            "kubeConfig": {"locationType": "Secret", "location": kubeconfig_secret_name(worker)}
                        }
                    },
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[secret]),
                )
            )
        for queue in dispatch.queues:
            queue_name = cluster_queue_name(queue)
            config = k8s.apiextensions.CustomResource(
                f"{name}-multikueue-config-{queue.name}",
                api_version=KUEUE_API,
                kind="MultiKueueConfig",
                metadata={"name": queue_name, "labels": FLEET_LABELS},
                spec={"clusters": list(queue.clusters)},  # the order is the dispatch order
                opts=pulumi.ResourceOptions(parent=self, depends_on=connected),
            )
            check = k8s.apiextensions.CustomResource(
                f"{name}-admission-check-{queue.name}",
                api_version=KUEUE_API,
                kind="AdmissionCheck",
                metadata={"name": queue_name, "labels": FLEET_LABELS},
                spec={
                    "controllerName": MULTIKUEUE_CONTROLLER,
                    "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": queue_name},
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[config]),
            )
            flavor = k8s.apiextensions.CustomResource(
                f"{name}-queue-flavor-{queue.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": queue_name, "labels": FLEET_LABELS},
                spec={},
                opts=child,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{queue.name}",
                api_version=KUEUE_API,
                kind="ClusterQueue",
                metadata={"name": queue_name, "labels": FLEET_LABELS},
                spec=manager_cluster_queue_spec(
                    queue, clusters, pod_contract.BENCHMARK_NAMESPACE, (quotas or {}).get(queue.name)
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[check, flavor]),
            )
            k8s.apiextensions.CustomResource(
                f"{name}-local-queue-{queue.name}",
                api_version=KUEUE_API,
                kind="LocalQueue",
                metadata={"name": queue.name, "namespace": benchmark_namespace, "labels": FLEET_LABELS},
                spec={"clusterQueue": queue_name},
                opts=child,
            )
        # Kueue's controller reaches the workers' API servers (and its own) and nothing else: the cluster's DNS, then
        # 443 and 6443 anywhere but the credentials addresses; the endpoints' addresses are the clouds' to give
        network_policy(
            f"{name}-kueue-egress",
            "kueue-egress",
            kueue_namespace,
            {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    dns_egress(),  # the cluster's DNS pods, not port 53 of any address
                    {"to": [{"ipBlock": internet_block("0.0.0.0/0")}], "ports": ports(*API_SERVER_PORTS)},
                ],
            },
            child,
        )
        self.register_outputs({})
