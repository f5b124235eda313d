"""The fleet's queues (Kueue's MultiKueue): the manager dispatches each queue to exactly the policy's workers, in the
policy's order, with a quota equal to what they hold; every worker has the queue, on flavors of its own pools of the
queue's cards only; no other cluster takes part. Checked against policy/fleet.yaml's ``queues``."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from fleet.model.access import can_i
from fleet.model.access.rbac import RBAC_GROUP, Rbac, User
from fleet.model.core import pod_contract
from fleet.model.core.pod_contract import is_cluster_own_queue
from fleet.model.queues.dispatch import pool_capacity
from fleet.model.queues.queued_sweeps import queue_quota
from fleet.model.queues.settings import WORKER_ACCOUNT

from .registry import stack_policy
from .resources import fleet, plain, stack_cluster

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
RBAC_TYPE = f"kubernetes:{RBAC_GROUP}/v1:"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


def _by_kind(resources: list[Any], kind: str) -> dict[str, dict[str, Any]]:
    out = {}
    for r in resources:
        if r.resource_type == KUEUE + kind:
            props = plain(r.props) or {}
            out[str((props.get("metadata") or {}).get("name", ""))] = props
    return out


def _quota(spec: dict[str, Any], resource: str) -> dict[str, int]:
    """Flavor -> its nominal quota of ``resource`` in a ClusterQueue spec."""
    out = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                if r.get("name") == resource:
                    out[str(flavor.get("name"))] = int(str(r.get("nominalQuota", "0")))
    return out


@stack_policy(
    "queues-match-policy",
    "The manager's MultiKueueConfig of each queue lists exactly the policy's workers in order and its quota is what "
    "they hold; every worker has the queue on flavors of its own pools of the queue's cards; no other cluster takes "
    "part in a queue.",
)
def _validate_queues(args: StackValidationArgs, report: ReportViolation) -> None:
    found = stack_cluster(args, report)
    if found is None:
        return
    resources, stack, cluster = found
    dispatch = fleet().dispatch
    role = dispatch.role(stack) if dispatch else None
    configs = _by_kind(resources, "MultiKueueConfig")
    queues = _by_kind(resources, "ClusterQueue")
    local = _by_kind(resources, "LocalQueue")
    if role != "manager" and (configs or _by_kind(resources, "MultiKueueCluster")):
        report(
            f"{stack} is not the queues' manager in policy/fleet.yaml but declares MultiKueue objects: a second "
            "manager would dispatch the same jobs again; remove them"
        )
    if dispatch is None or role is None:
        stray = sorted(n for n in queues if n.startswith("queue-"))
        if stray:
            report(f"{stack} takes part in no queue of policy/fleet.yaml but has the queue(s) {', '.join(stray)}")
        return
    if role == "manager":
        checks = _by_kind(resources, "AdmissionCheck")
        for queue in dispatch.queues:
            name = f"queue-{queue.name}"
            listed = (configs.get(name, {}).get("spec") or {}).get("clusters")
            if listed != list(queue.clusters):
                report(
                    f"the MultiKueueConfig {name} lists {listed}, but policy/fleet.yaml's queue {queue.name} has the "
                    f"workers {list(queue.clusters)} in that order: Kueue dispatches in the config's order"
                )
            check = (checks.get(name, {}).get("spec") or {}).get("controllerName")
            if check != MULTIKUEUE_CONTROLLER:
                report(f"the queue {queue.name} has no AdmissionCheck {name} of {MULTIKUEUE_CONTROLLER}")
            spec = queues.get(name, {}).get("spec") or {}
            held = sum(_quota(spec, queue.resource).values())
            want = queue_quota(fleet(), queue)
            if held != want:
                report(
                    f"the manager's ClusterQueue {name} holds {held} {queue.resource}, but the workers' pools of "
                    f"{', '.join(queue.cards)} hold {want}: jobs would wait on the manager for room "
                    "the workers have, or be dispatched to none that can take them"
                )
            if queue.name not in local:
                report(f"the manager has no LocalQueue {queue.name}: nobody can submit to the queue")
        extra = sorted(set(configs) - {f"queue-{q.name}" for q in dispatch.queues})
        if extra:
            report(f"MultiKueueConfig(s) {', '.join(extra)} are no queue of policy/fleet.yaml")
        return
    mine = dispatch.queues_of(stack)
    flavors = _by_kind(resources, "ResourceFlavor")
    for queue in mine:
        name = f"queue-{queue.name}"
        if name not in queues or queue.name not in local:
            report(
                f"{stack} works for the queue {queue.name} but has no ClusterQueue {name} and LocalQueue {queue.name}"
            )
            continue
        # the queue's card pools, and the sweep pools the worker builds for the queue's sweep points
        pools = {
            f"queue-{p.name}": p
            for p in (*fleet().queued_sweeps.sweep_pools_of(queue.name, stack), *queue.pools(cluster))
        }
        held = _quota(queues[name].get("spec") or {}, queue.resource)
        for flavor, amount in held.items():
            pool = pools.get(flavor)
            labels = (flavors.get(flavor, {}).get("spec") or {}).get("nodeLabels")
            if pool is None or labels != pool.node_selector:
                report(
                    f"the ClusterQueue {name} on {stack} admits on the flavor {flavor}, which is no pool of the "
                    f"queue's cards ({', '.join(queue.cards)}) on {stack}: its jobs would land outside the queue"
                )
            elif amount != pool_capacity(pool):
                report(f"the flavor {flavor} of {name} holds {amount}, but its pool holds {pool_capacity(pool)}")
    # the sweeps' and the benchmarks' own queues are the cluster's (sweeps.py, benchmark_queue.py check them)
    own = {f"queue-{q.name}" for q in mine}
    extra = sorted(n for n in set(queues) - own if not is_cluster_own_queue(n))
    if extra:
        report(f"{stack} has the queue(s) {', '.join(extra)}, for which policy/fleet.yaml does not name it a worker")


# the verbs the manager's identity may hold cluster-wide (its watches), and where it may hold the others
WORKER_WATCH_VERBS = frozenset({"list", "watch"})


def worker_identity_problems(objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the queue manager's identity on a worker may do beyond dispatching, over ``(kind, object)`` pairs: a
    right outside the benchmarks namespace other than ``list``/``watch``, a wildcard, or any refused row of
    fleet/model/access/can_i.yaml."""
    rbac = Rbac.of(objects)
    user = User.service_account(pod_contract.KUEUE_NAMESPACE, WORKER_ACCOUNT)
    problems = []
    for binding, namespace, rule in rbac.grants(user):
        if any("*" in (rule.get(k) or []) for k in ("apiGroups", "resources", "verbs")) or rule.get("nonResourceURLs"):
            problems.append(f"{binding} gives the queue manager's identity {user.name!r} a wildcard or a URL rule")
        elif not namespace and not set(rule.get("verbs") or []) <= WORKER_WATCH_VERBS:
            extra = sorted(set(rule.get("verbs") or []) - WORKER_WATCH_VERBS)
            problems.append(
                f"{binding} gives the queue manager's identity {user.name!r} {extra} on {rule.get('resources')} in "
                f"every namespace: only list and watch may be cluster-wide; bind the rest with a RoleBinding in "
                f"{pod_contract.BENCHMARK_NAMESPACE!r} (components/kubernetes/multikueue.py)"
            )
        elif namespace and namespace != pod_contract.BENCHMARK_NAMESPACE:
            problems.append(
                f"{binding} gives the queue manager's identity {user.name!r} rights in {namespace!r}: Kueue manages "
                f"only {pod_contract.BENCHMARK_NAMESPACE!r} on a worker"
            )
    for question in can_i.load():
        if question.user == user.name and not question.allowed:
            granted_by = rbac.why_allowed(user, question.request)
            if granted_by:
                problems.append(
                    f"the queue manager's identity may `{question.request.describe()}` (through {granted_by}); "
                    "fleet/model/access/can_i.yaml says it must not"
                )
    return problems


@stack_policy(
    "queue-worker-least-privilege",
    "The queue manager's identity on a worker creates and deletes jobs and Workloads in the benchmarks namespace only, "
    "only lists and watches cluster-wide, and reads no Secret, creates no pod and holds no wildcard.",
)
def _validate_worker_identity(args: StackValidationArgs, report: ReportViolation) -> None:
    objects = [
        (r.resource_type.rsplit(":", 1)[-1], plain(r.props) or {})
        for r in args.resources
        if r.resource_type.startswith(RBAC_TYPE)
    ]
    for problem in worker_identity_problems(objects):
        report(problem)
