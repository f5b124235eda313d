"""The dispatch-rate benchmark's clusters: the shipped fleet's queues' manager and the first worker of its first GPU
queue, deployed by the real engine on hollow control planes with the real Kueue (tests/real/fleet_tier.py), and the
Kueue client rate the benchmark varies.

Two stacks, not the whole fleet: the manager is the central cluster, which reads every leaf's outputs, so the fleet
is cut to those two clusters in a copy of the policy (``two_cluster_policy``: the other clusters, their runners and
their places in the queues left out), which the stacks read through ``gpu-fleet:policyFile``. Everything else is
the shipped fleet's, rendered by the real program: the stack files, Kueue's configuration, the MultiKueue objects,
the worker's ClusterQueue and its manager identity with the token the operator makes (docs/queues.md).

The rate varied is Kueue's ``clientConnection`` (qps, burst): the fleet renders it into every Kueue's configuration
(components/kubernetes/training.py). Its ConfigMap on the hollow cluster is rewritten and Kueue's pod deleted, so its
Deployment makes a new one that the tier starts with the new file (tests/real/controllers.py), as a rollout would;
the shipped default is not touched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from components.kubernetes.multikueue import TOKEN_MAX_DAYS, TOKEN_SETTING
from fleet.model.core.fleet import Fleet
from fleet.model.core.jobs import Queue
from fleet.model.core.pod_contract import KUEUE_NAMESPACE
from fleet.model.loader import load_fleet
from fleet.model.queues.dispatch import kind_of
from fleet.model.queues.settings import WORKER_ACCOUNT
from tests.e2e.processes import wait_for
from tests.real.fleet_tier import FleetTier, StackOnHollow, stack_order

POLICY_SETTING = "gpu-fleet:policyFile"
KUEUE_POD = "app.kubernetes.io/name=kueue"
CONFIG_KEY = "controller_manager_config.yaml"  # kueue 0.19.2 chart templates/manager/manager-config.yaml
#: How long the benchmark waits for the clusters to settle after a change (they share 2 cores with other work).
SETTLE_S = 900.0


def two_cluster_policy(source: Path, folder: Path) -> tuple[Path, Fleet, Queue]:
    """A copy of the policy at ``source`` (under ``folder``) with only the queues' manager and the first worker of its
    first GPU queue: the other clusters, their runners, their places in the queues and the workloads of queues left
    with no cluster left out. The copy, the fleet it loads as, and that queue (its one worker the cut fleet's)."""
    whole = load_fleet(source)
    if whole.dispatch is None:
        raise SystemExit(f"{source} has no queues: nothing to dispatch")
    queue = next(q for q in whole.dispatch.queues if kind_of(q.resource) == "gpu")
    keep = {whole.dispatch.manager, queue.clusters[0]}
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    for cloud in list(doc["clusters"]):
        doc["clusters"][cloud] = {n: c for n, c in (doc["clusters"][cloud] or {}).items() if n in keep}
        if not doc["clusters"][cloud]:
            del doc["clusters"][cloud]
    runners = (doc.get("runners") or {}).get("clusters") or {}
    for name in [n for n in runners if n not in keep]:
        del runners[name]
    if not runners:
        doc.pop("runners", None)
    offered = {p.card for n in keep for p in whole.cluster(n).pools}
    for name, settings in list(doc["queues"].items()):
        if isinstance(settings, dict):
            settings["clusters"] = [c for c in settings["clusters"] if c in keep]
            if "gpus" in settings:
                settings["gpus"] = [g for g in settings["gpus"] if g in offered]
            if not settings["clusters"] or settings.get("gpus") == []:
                del doc["queues"][name]
    # a queued workload keeps the cards its queue still has, and goes with a queue left out
    for name, settings in list((doc.get("workloads") or {}).items()):
        if not isinstance(settings, dict) or not settings.get("queue"):
            continue
        queue_settings = doc["queues"].get(settings["queue"])
        if isinstance(settings.get("gpus"), list) and isinstance(queue_settings, dict) and "gpus" in queue_settings:
            settings["gpus"] = [g for g in settings["gpus"] if g in queue_settings["gpus"]]
        if queue_settings is None or settings.get("gpus") == []:
            del doc["workloads"][name]
    path = folder / "two-cluster-fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    fleet = load_fleet(path)
    assert fleet.dispatch is not None
    (cut,) = [q for q in fleet.dispatch.queues if q.name == queue.name]
    return path, fleet, cut


class TwoClusters:
    """The manager and its worker on hollow control planes under the real engine, in ``folder``."""

    def __init__(self, fleet: Fleet, policy: Path, folder: Path):
        assert fleet.dispatch is not None
        self.fleet, self.policy = fleet, policy
        self.tier = FleetTier(fleet, folder)
        self.manager_name = fleet.dispatch.manager
        (self.worker_name,) = fleet.dispatch.workers

    @property
    def manager(self) -> StackOnHollow:
        return self.tier.on_hollow(self.manager_name)

    @property
    def worker(self) -> StackOnHollow:
        return self.tier.on_hollow(self.worker_name)

    def up(self, log: Callable[[str], None]) -> None:
        """Each stack up in the fleet's order (the worker's twice: with the token the manager needs, as the operator
        does after the first deploy); then wait until the manager reaches the worker."""
        for name in stack_order(self.fleet):
            log(f"{name}: hollow control plane and pulumi up...")
            on = self.tier.on_hollow(name)
            on.stack.set_config(POLICY_SETTING, auto.ConfigValue(str(self.policy)))
            _up(on)
            if name == self.worker_name:
                duration = f"{TOKEN_MAX_DAYS * 24}h"
                token = on.hollow.kubectl("create", "token", WORKER_ACCOUNT, "-n", KUEUE_NAMESPACE, "--duration",
                                          duration).stdout.strip()  # fmt: skip
                on.stack.set_config(TOKEN_SETTING, auto.ConfigValue(token, secret=True))
                _up(on)
        self.wait_active()

    def wait_active(self) -> None:
        """Until the worker's MultiKueueCluster is Active on the manager and both Kueues' ClusterQueues are."""
        hollow = self.manager.hollow

        def active() -> bool:
            clusters = hollow.get("multikueueclusters.kueue.x-k8s.io")["items"]
            return bool(clusters) and all(_holds(c, "Active") for c in clusters) and self._queues_active()

        wait_for("the worker Active on the manager, every ClusterQueue Active", active,
                 time.monotonic() + SETTLE_S, hollow.processes)  # fmt: skip

    def _queues_active(self) -> bool:
        for on in (self.manager, self.worker):
            queues = on.hollow.get("clusterqueues.kueue.x-k8s.io")["items"]
            if not queues or not all(_holds(q, "Active") for q in queues):
                return False
        return True

    def stop(self) -> None:
        self.tier.stop()

    def kueue_client(self, qps: float, burst: int, log: Callable[[str], None]) -> None:
        """Every Kueue of the two clusters with ``clientConnection`` ``qps`` and ``burst`` (the worker's first, then
        the manager's), restarted where it changed; back when the manager reaches the worker again."""
        changed = [on for on in (self.worker, self.manager) if _set_client(on, qps, burst)]
        for on in changed:
            log(f"{on.cluster.name}: Kueue restarted with qps {qps:g}, burst {burst}")
        if changed:
            self.wait_active()


def _up(on: StackOnHollow) -> None:
    output: list[str] = []
    try:
        on.stack.up(on_output=output.append, color="never")
    except auto.CommandError as exc:
        raise SystemExit(f"pulumi up of {on.cluster.name} failed: {exc}\n{''.join(output)[-8000:]}") from None


def _holds(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in obj.get("status", {}).get("conditions", []))


def _kueue_pod(on: StackOnHollow) -> dict[str, Any] | None:
    pods = on.hollow.get("pods", "-n", KUEUE_NAMESPACE, "-l", KUEUE_POD)["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if len(live) == 1 else None


def _set_client(on: StackOnHollow, qps: float, burst: int) -> bool:
    """Rewrite Kueue's configuration on ``on`` with the client rate and restart it; False when it had that rate."""
    pod = _kueue_pod(on)
    assert pod is not None, f"no Kueue pod on {on.cluster.name}"
    (volume,) = [v for v in pod["spec"]["volumes"] if v.get("configMap") and v["name"] == "manager-config"]
    configmap = on.hollow.get("configmap", volume["configMap"]["name"], "-n", KUEUE_NAMESPACE)
    config = yaml.safe_load(configmap["data"][CONFIG_KEY])
    wanted = {"qps": qps, "burst": burst}
    if config.get("clientConnection") == wanted:
        return False
    config["clientConnection"] = wanted
    configmap["data"][CONFIG_KEY] = yaml.safe_dump(config, sort_keys=False)
    on.hollow.kubectl("replace", "-f", "-", input=json.dumps(configmap))
    old = pod["metadata"]["uid"]
    on.hollow.kubectl("delete", "pod", pod["metadata"]["name"], "-n", KUEUE_NAMESPACE, "--wait=false")
    log = on.hollow.folder / "kueue.log"

    def serving() -> bool:
        """The new pod Ready at its address, the Service's endpoints on it, and the new Kueue saying its rate."""
        new = _kueue_pod(on)
        if new is None or new["metadata"]["uid"] == old or not _holds(new, "Ready"):
            return False
        ip = new["status"].get("podIP")
        slices = on.hollow.get("endpointslices", "-n", KUEUE_NAMESPACE)["items"]
        addresses = {a for s in slices for e in s.get("endpoints") or [] for a in e.get("addresses", [])}
        said = log.read_text(errors="replace") if log.is_file() else ""
        return ip in addresses and '"K8S Client"' in said and f'"qps":{qps:g}' in said.replace(" ", "")

    wait_for(f"Kueue on {on.cluster.name} back with qps {qps:g}", serving, time.monotonic() + SETTLE_S,
             on.hollow.processes)  # fmt: skip
    return True
