"""``python -m fleet doctor --stack NAME``: inspect one live cluster of the fleet, read-only, and print one table.

What it reads (list calls of the official ``kubernetes`` client, nothing else; Prometheus through ``/api/v1/query``):

* each GPU pool's nodes (by the pool's node selector): Ready, and the accelerators they advertise as allocatable
  (``pools``);
* the NVIDIA device plugin (``kube-system``, where the platform brings none) and dcgm-exporter (``node-agents``):
  their DaemonSets ready and covering every node of the pools they serve (``agents``);
* on a leaf, the federation gateway: its Deployment ready and its LoadBalancer given an address (``gateway``);
* every benchmark the policy places here (a Job, or a CronJob and its last Job) and every pool probe (a CronJob of the
  probe workload, fleet/model/probes/probe): the state of its newest Job (``benchmarks``, ``jobs``) and, for a pod stuck
  Pending, why (``pods``, ``scheduling``, ``autoscaler``; the cloud's own wording from ``hints``);
* on the manager of the fleet's queues, Kueue's workers and waiting workloads (``queues``);
* with ``--prometheus URL``: ``up`` of the PodMonitor's targets (``pod_monitors``) and the pools' last probe phases
  (``probe_phases``); on the central stack every leaf's federation job ``federate-<leaf>``; on a leaf, with
  ``--central-prometheus URL``, the central's job for this leaf (``federation``). Without a URL those rows are skipped
  and say which ``kubectl port-forward`` opens it (the Prometheus of a cluster is not reachable from outside it but
  through the mTLS gateway).

Every row is (what, state, problem, likely fix) (``table``). Exit 0 when no row has a problem (skipped rows are not
problems), 1 otherwise (the API server unreachable too), 2 on bad input: flags, an unknown stack, an unusable
kubeconfig, no ``pulumi`` to fetch one (``command``, ``kubeconfig``).

The messages matched come from upstream sources, named beside each one (``messages``); the names the stack deploys
under are in ``names``, everything read is in one ``cluster_read.Snapshot``.
"""

from __future__ import annotations

from fleet.tools.doctor.command import run

__all__ = ["run"]
