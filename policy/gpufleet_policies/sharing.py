"""GPU sharing: every component agrees with the policy file's ``sharing`` of a pool (time-slicing or MIG), so the
cards a scheduler counts are the cards the nodes advertise.

- GKE node pools carry the guest accelerator's time-sharing clients or MIG partition size;
- AKS agent pools carry the MIG profile (``gpuInstanceProfile``);
- the NVIDIA device plugin we run has a configuration for each shared pool, with its time slices or MIG strategy
  (the pool's nodes select it by label: gpu-pool-card-label checks the label);
- an EKS node group's autoscaler node template counts its cards times the time slices, so a shared pool scales up
  from zero for as many pods as its node will take;
- the device plugin's pods ask CPU and memory in every container: the plugin's requests in its values, and the
  post-renderer that gives them to the config manager a configuration adds (the chart has no value for it).
"""

from __future__ import annotations

import yaml
from pulumi_policy import ReportViolation, ResourceValidationArgs

from fleet.model.core.clouds.eks import NODE_TEMPLATE, NODE_TEMPLATE_TAG_TYPE
from fleet.model.core.clusters import pool_resource_name
from fleet.model.core.pod_contract import DEVICE_PLUGIN_POSTRENDER

from .gpu_pools import policy_pool
from .registry import resource_policy
from .resources import HELM_RELEASE, cluster_of, plain, release_chart

RESOURCES_TAG = f"{NODE_TEMPLATE}/resources/"


@resource_policy(
    "gpu-pool-sharing",
    "GKE and AKS GPU pools declare the time-sharing or MIG partitioning the policy file gives them, and no other.",
)
def _validate_pool_sharing(args: ResourceValidationArgs, report: ReportViolation) -> None:
    found = policy_pool(args, report)
    if not found:
        return
    _, pool, rules = found
    have = rules.declared_sharing(plain(args.props))
    if have is None:
        return  # the cloud's pools declare no sharing: our device plugin's configuration does (device-plugin-sharing)
    wanted = rules.pool_sharing(pool)
    if have != wanted:
        report(
            f"pool {args.name!r} shares its cards as {have or 'whole cards'}, the policy file says "
            f"{wanted or 'whole cards'}: pods would be counted against cards the nodes do not advertise; build the "
            "pool from GpuPool.sharing (components/clusters/gke.py gpu_sharing, aks.py mig_profile)"
        )


@resource_policy(
    "device-plugin-sharing",
    "The NVIDIA device plugin we run holds a configuration for each shared pool, with its time slices or MIG strategy.",
)
def _validate_plugin_sharing(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = plain(args.props)
    if args.resource_type != HELM_RELEASE or release_chart(props) != "nvidia-device-plugin":
        return
    cluster = cluster_of(args.urn)
    if cluster is None:
        return
    configs = ((props.get("values") or {}).get("config") or {}).get("map") or {}
    for pool in (p for p in cluster.all_pools if p.sharing and p.needs_device_plugin):
        assert pool.sharing is not None
        text = configs.get(pool.sharing.name)
        try:
            config = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError:
            config = None
        if not isinstance(config, dict):
            report(
                f"the device plugin has no configuration {pool.sharing.name!r} for the {pool.card} pool, whose nodes "
                "select it: they would advertise whole cards; build the values with device_plugin_sharing "
                "(components/kubernetes/gpu_agents.py)"
            )
            continue
        strategy = (config.get("flags") or {}).get("migStrategy", "none")
        slicing = ((config.get("sharing") or {}).get("timeSlicing") or {}).get("resources") or []
        replicas = next((r.get("replicas") for r in slicing if r.get("name") == pool.resource), None)
        if pool.sharing.kind == "mig" and strategy != "single":
            report(f"configuration {pool.sharing.name!r} has migStrategy {strategy}, not single: MIG instances of the "
                   f"{pool.card} pool would not be advertised as {pool.resource}")  # fmt: skip
        if pool.sharing.kind == "time-slicing" and replicas != pool.sharing.units:
            report(f"configuration {pool.sharing.name!r} slices {pool.resource} into {replicas} replicas, the "
                   f"policy file says {pool.sharing.units} for the {pool.card} pool")  # fmt: skip


@resource_policy(
    "device-plugin-requests",
    "The NVIDIA device plugin we run asks CPU and memory in every container: its values request both, and the release "
    "names the post-renderer that gives them to the containers the chart gives none (its config manager's).",
)
def _validate_plugin_requests(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = plain(args.props)
    if args.resource_type != HELM_RELEASE or release_chart(props) != "nvidia-device-plugin":
        return
    requests = (((props.get("values") or {}).get("resources") or {}).get("requests")) or {}
    missing = [r for r in ("cpu", "memory") if r not in requests]
    if missing:
        report(f"the device plugin's values request no {' or '.join(missing)} (resources.requests {requests}): its "
               "pods would be evicted first from a busy GPU node; give it DEVICE_PLUGIN_RESOURCES "
               "(fleet/model/placement/node_agents.py)")  # fmt: skip
    if props.get("postrender") != DEVICE_PLUGIN_POSTRENDER:
        report(f"the device plugin's release has post-renderer {props.get('postrender')!r}, not "
               f"{DEVICE_PLUGIN_POSTRENDER!r}: the containers its chart renders without resources (its config "
               "manager's init and sidecar, the MPS daemon's) would ask nothing "
               "(components/kubernetes/gpu_agents.py)")  # fmt: skip


@resource_policy(
    "autoscaler-template-units",
    "An EKS GPU node group's autoscaler node template counts what its node advertises: cards times time slices.",
)
def _validate_template_units(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != NODE_TEMPLATE_TAG_TYPE:
        return
    tag = plain(args.props).get("tag") or {}
    key = str(tag.get("key", ""))
    cluster = cluster_of(args.urn)
    if not key.startswith(RESOURCES_TAG) or cluster is None:
        return
    pool = next((p for p in cluster.all_pools if args.name.startswith(f"{pool_resource_name(cluster, p)}-asg-")), None)
    if pool is None or key.removeprefix(RESOURCES_TAG) != pool.resource:
        return
    if str(tag.get("value")) != str(pool.units_per_node):
        report(
            f"the node template of pool {pool.name} says {tag.get('value')} {pool.resource}, but its node advertises "
            f"{pool.units_per_node} ({pool.accelerators_per_node} card(s)"
            f"{f' x {pool.sharing.units} time slices' if pool.sharing else ''}): the autoscaler would start too many "
            "or too few nodes from zero; take it from GpuPool.units_per_node"
        )
