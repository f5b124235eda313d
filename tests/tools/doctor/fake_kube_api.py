"""A Kubernetes API served on 127.0.0.1 for the doctor's tests: ``list`` answers for the objects of a :class:`World`.

No API server can run here, and no recorded responses of a real cluster exist in this repository: the loopback server
answers ``list`` requests with bodies built from the official ``kubernetes`` client's own typed models (V1NodeList,
V1PodList, CoreV1EventList, V1DaemonSetList, V1DeploymentList, V1ServiceList, V1JobList, V1CronJobList), serialized
with ``ApiClient().sanitize_for_serialization``: the field names and shapes are the API's (the models refuse an object
without its required fields), and the client under test parses them as it parses a real cluster's. Kueue's custom
objects (MultiKueueClusters, Workloads) have no typed model: they are served as the API's JSON, in a ``List``.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from fleet.tools.doctor.queues import GROUP, VERSION

TOKEN = "doctor-test-token"
SERIALIZER = k8s.ApiClient()


@dataclass
class World:
    """Every object the loopback API server lists: the core ones as typed models, Kueue's as the API's JSON."""

    nodes: list[k8s.V1Node] = field(default_factory=list)
    daemonsets: list[k8s.V1DaemonSet] = field(default_factory=list)
    deployments: list[k8s.V1Deployment] = field(default_factory=list)
    services: list[k8s.V1Service] = field(default_factory=list)
    jobs: list[k8s.V1Job] = field(default_factory=list)
    cronjobs: list[k8s.V1CronJob] = field(default_factory=list)
    pods: list[k8s.V1Pod] = field(default_factory=list)
    events: list[k8s.CoreV1Event] = field(default_factory=list)
    multikueueclusters: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)

    def job_of(self, workload: str, card: str) -> k8s.V1Job:
        """The Job of ``workload`` on ``card``."""
        return next(
            j for j in self.jobs if j.metadata.labels.get("workload") == workload and j.metadata.labels["gpu"] == card
        )


# path pattern -> (World attribute, list model, list kind, API version)
ROUTES = [
    (re.compile(r"^/api/v1/nodes$"), "nodes", k8s.V1NodeList, "NodeList", "v1"),
    (
        re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/daemonsets$"),
        "daemonsets",
        k8s.V1DaemonSetList,
        "DaemonSetList",
        "apps/v1",
    ),
    (
        re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments$"),
        "deployments",
        k8s.V1DeploymentList,
        "DeploymentList",
        "apps/v1",
    ),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/services$"), "services", k8s.V1ServiceList, "ServiceList", "v1"),
    (re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs$"), "jobs", k8s.V1JobList, "JobList", "batch/v1"),
    (
        re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/cronjobs$"),
        "cronjobs",
        k8s.V1CronJobList,
        "CronJobList",
        "batch/v1",
    ),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods$"), "pods", k8s.V1PodList, "PodList", "v1"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/events$"), "events", k8s.CoreV1EventList, "EventList", "v1"),
]
# Kueue's custom objects: path pattern -> World attribute (served as JSON, a cluster-scoped and a namespaced list)
CUSTOM_ROUTES = [
    (re.compile(rf"^/apis/{GROUP}/{VERSION}/multikueueclusters$"), "multikueueclusters"),
    (re.compile(rf"^/apis/{GROUP}/{VERSION}/namespaces/([^/]+)/workloads$"), "workloads"),
]


COLLECTIONS = ("/nodes", "/daemonsets", "/deployments", "/services", "/jobs", "/cronjobs", "/pods", "/events")


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """The label selector syntax the doctor sends: ``k=v``, ``k in (a,b)``, ``k``, comma-separated."""
    for term in re.split(r",(?![^()]*\))", selector):
        term = term.strip()
        if not term:
            continue
        inside = re.match(r"^(\S+)\s+in\s+\((.*)\)$", term)
        if inside:
            if labels.get(inside.group(1)) not in [v.strip() for v in inside.group(2).split(",")]:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


class ApiServer:
    """Kubernetes API ``list`` answers on 127.0.0.1 for the objects of a :class:`World`; records every request.

    Anything but GET is refused (405) and recorded, so a test sees that the doctor only reads. Requests without the
    kubeconfig's bearer token get 401, as from a real API server; with ``refuse``, every list is forbidden (403).
    """

    def __init__(self, world: World, refuse: bool = False):
        self.world = world
        self.refuse = refuse
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
                    return
                self._send(*server.answer(self.path))

            def _refuse(self) -> None:
                server.requests.append((self.command, self.path))
                self._send(405, status_body(405, "MethodNotAllowed", "the doctor must only read"))

            def do_POST(self) -> None:
                self._refuse()

            def do_PUT(self) -> None:
                self._refuse()

            def do_PATCH(self) -> None:
                self._refuse()

            def do_DELETE(self) -> None:
                self._refuse()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def answer(self, raw: str) -> tuple[int, dict[str, Any]]:
        """The status and body of a GET of ``raw`` (a path with its query)."""
        parsed = urllib.parse.urlsplit(raw)
        if self.refuse:
            return 403, status_body(403, "Forbidden", f"{parsed.path} is forbidden")
        query = urllib.parse.parse_qs(parsed.query)
        selector = query.get("labelSelector", [""])[0]
        for pattern, attribute, list_model, kind, version in ROUTES:
            match = pattern.match(parsed.path)
            if not match:
                continue
            namespace = match.group(1) if match.groups() else None
            items = [
                o
                for o in getattr(self.world, attribute)
                if (namespace is None or o.metadata.namespace == namespace)
                and selector_matches(selector, o.metadata.labels or {})
            ]
            body = list_model(
                api_version=version, kind=kind, metadata=k8s.V1ListMeta(resource_version="4711"), items=items
            )
            return 200, SERIALIZER.sanitize_for_serialization(body)
        for pattern, attribute in CUSTOM_ROUTES:
            match = pattern.match(parsed.path)
            if not match:
                continue
            namespace = match.group(1) if match.groups() else None
            items = [
                o
                for o in getattr(self.world, attribute)
                if namespace is None or (o.get("metadata") or {}).get("namespace") == namespace
            ]
            return 200, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "List", "metadata": {}, "items": items}
        return 404, status_body(404, "NotFound", "the server could not find the requested resource")

    def __enter__(self) -> ApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """The ``Status`` an API server answers a refused or failed request with."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig at ``path`` for ``server`` with the token the loopback server accepts."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "loopback", "cluster": {"server": server}}],
                "users": [{"name": "doctor", "user": {"token": TOKEN}}],
                "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "doctor"}}],
                "current-context": "loopback",
            }
        ),
        encoding="utf-8",
    )
    return path
