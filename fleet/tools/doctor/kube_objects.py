"""Small readings of the official client's typed objects (nodes, pods, events, owners, labels, quantities), shared by
every check of the doctor."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Event, V1Node, V1Pod

from fleet.model.core.pools import GpuPool
from fleet.model.core.quantity import parse_quantity
from fleet.model.core.taints import Taint


def labels_of(obj: Any) -> dict[str, str]:
    """An object's labels (empty when it has none)."""
    return dict((obj.metadata.labels if obj.metadata else None) or {})


def matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Whether ``labels`` carry every key and value of ``selector``."""
    return all(labels.get(k) == v for k, v in selector.items())


def whole_quantity(value: Any) -> int:
    """A Kubernetes quantity as a whole count (accelerators are counted in units, ``"4"``, or ``"1k"``); 0 when
    absent or not a quantity."""
    try:
        return int(parse_quantity(str(value))) if value is not None else 0
    except ValueError:
        return 0


def age_of(when: datetime | None, now: datetime) -> str:
    """How long ago ``when`` was, in its largest whole unit (``3d``, ``5h``, ``2m``, ``40s``); ``?`` when unknown."""
    if when is None:
        return "?"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def event_time(event: CoreV1Event) -> datetime:
    """When an event last happened: its last timestamp, series or event time, else when it was first seen or made."""
    series = event.series.last_observed_time if event.series else None
    stamp = event.last_timestamp or series or event.event_time or event.first_timestamp
    return stamp or (event.metadata.creation_timestamp if event.metadata else None) or datetime.min.replace(tzinfo=UTC)


def events_for(events: Sequence[CoreV1Event], kind: str, namespace: str, name: str) -> list[CoreV1Event]:
    """The events about one object, oldest first."""
    found = [
        e
        for e in events
        if e.involved_object
        and e.involved_object.kind == kind
        and e.involved_object.name == name
        and (e.involved_object.namespace or namespace) == namespace
    ]
    return sorted(found, key=event_time)


def owner_of(obj: Any, kind: str) -> str | None:
    """The name of the object's owner of ``kind`` (a pod's Job, a Job's CronJob), or None."""
    for ref in (obj.metadata.owner_references if obj.metadata else None) or []:
        if ref.kind == kind:
            return str(ref.name)
    return None


def newest_of(items: Sequence[Any]) -> Any:
    """The most recently created of ``items``."""
    return max(items, key=lambda o: o.metadata.creation_timestamp or datetime.min.replace(tzinfo=UTC))


def node_ready(node: V1Node) -> bool:
    """Whether the node's condition Ready is True."""
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def allocatable(node: V1Node, resource: str) -> int:
    """How many of ``resource`` the node can give to pods."""
    return whole_quantity(((node.status.allocatable if node.status else None) or {}).get(resource))


def capacity(node: V1Node, resource: str) -> int:
    """How many of ``resource`` the node has in all."""
    return whole_quantity(((node.status.capacity if node.status else None) or {}).get(resource))


def pool_nodes(pool: GpuPool, nodes: Sequence[V1Node]) -> list[V1Node]:
    """The nodes of ``pool``: those carrying every label of its node selector; a card's own pool does not count the
    nodes of its sweep pools (fleet/model/sweeps/) or its CI pool (fleet/model/runners/ci_pools.py), which carry the
    same card label and their size or the CI label (``GpuPool.has_node``)."""
    return [n for n in nodes if pool.has_node(labels_of(n))]


def untolerated(pod: V1Pod, node: V1Node) -> list[Any]:
    """The node's scheduling taints that none of the pod's tolerations tolerates."""
    tolerations = [t.to_dict() for t in (pod.spec.tolerations if pod.spec else None) or []]
    taints = (node.spec.taints if node.spec else None) or []
    # the API server admits only the three effects a Taint holds (core/v1 validation validateTaintEffect)
    return [t for t in taints if Taint(key=t.key, value=t.value or "", effect=t.effect).keeps_off(tolerations)]


def taint_text(taint: Any) -> str:
    """A taint as ``key=value:effect``."""
    return f"{taint.key}={taint.value or ''}:{taint.effect}"


def selector_text(selector: dict[str, str]) -> str:
    """A label selector as ``k=v,...``, sorted by key."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def pod_ready(pod: V1Pod) -> bool:
    """Whether the pod's condition Ready is True."""
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def quantity_of(resource: str, value: Any) -> int:
    """A node's quantity as fleet/model/placement/pods.py counts it: millicores for cpu, units otherwise."""
    if value is None:
        return 0
    number = parse_quantity(str(value))
    return int(number * 1000) if resource == "cpu" else int(number)


def named(items: Sequence[Any], name: str) -> Any:
    """The item of ``items`` called ``name``, or None."""
    return next((i for i in items if i.metadata and i.metadata.name == name), None)
