"""The row of a leaf's federation gateway: its Deployment ready and its LoadBalancer given an address."""

from __future__ import annotations

from fleet.tools.doctor.context import Context
from fleet.tools.doctor.names import GATEWAY, MONITORING_NS
from fleet.tools.doctor.table import Row


def gateway_rows(ctx: Context) -> list[Row]:
    """On a leaf: the mTLS federation gateway ready, and its LoadBalancer given an address the central can reach."""
    if ctx.cluster.central:
        return []
    what = f"federation gateway ({MONITORING_NS}/{GATEWAY})"
    deploy = ctx.snapshot.gateway
    if deploy is None:
        return [Row(what, "not found", f"no Deployment {MONITORING_NS}/{GATEWAY}", f"{ctx.up} creates it")]
    ready = (deploy.status.ready_replicas if deploy.status else None) or 0
    wanted = (deploy.spec.replicas if deploy.spec else None) or 1
    state = f"{ready}/{wanted} ready"
    problems, fixes = [], []
    if ready < 1:
        problems.append("no ready replica: the central's scrapes get no answer")
        fixes.append(
            f"{ctx.kubectl} -n {MONITORING_NS} describe deploy {GATEWAY}; "
            f"{ctx.kubectl} -n {MONITORING_NS} logs deploy/{GATEWAY}"
        )
    service = ctx.snapshot.gateway_service
    ingress = (
        service.status.load_balancer.ingress if service and service.status and service.status.load_balancer else None
    ) or []
    if service is None:
        problems.append(f"no Service {MONITORING_NS}/{GATEWAY}")
        fixes.append(f"{ctx.up} creates it")
    elif not ingress:
        problems.append("its LoadBalancer has no address yet: the central has nothing to reach")
        fixes.append(f"{ctx.kubectl} -n {MONITORING_NS} describe svc {GATEWAY} (the cloud's load-balancer events)")
    else:
        address = ingress[0].ip or ingress[0].hostname
        state += f", address {address}:443"
    return [Row(what, state, "; ".join(problems), "; ".join(fixes))]
