"""The real controllers of a hollow cluster (Kueue, JobSet, Trainer), run in place of their KWOK pods.

A chart installs a controller's Deployment, webhooks and APIService; KWOK would mark its pod Running and Ready with
an address nothing answers on. Instead KWOK leaves these pods alone (``hollow.STAGES``, their
``app.kubernetes.io/name`` excluded) and ``RealControllers`` watches for them: for each bound pod it starts the
controller's binary (``receivers/kubernetes``) as the pod would run (its container's args and env; its service
account's token, the cluster CA and the namespace under /var/run/secrets/kubernetes.io/serviceaccount; a /tmp and
/run of its own, ``unshare --mount``), its config file rewritten to bind every server to an address of the pod's own
on the namespace's lo (``controllers.yaml``), waits until its webhook port answers there, then marks the pod Running
and Ready with that address, so that the endpoints the API server calls for webhooks and the visibility API lead to
it.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.processes import Process, patience
from tests.real import toolchain

# The first two octets of the real controllers' pod addresses (10.200.<cluster>.<controller>), put on the tier's lo.
POD_ADDRESSES = "10.200"
# How often a controller that exited is started again for the same pod before the tier gives up on it.
MAX_RESTARTS = 5
# ... and of the load balancers the tier gives Services of type LoadBalancer, as a cloud would (10.201.<cluster>.<n>).
LOAD_BALANCER_ADDRESSES = "10.201"
CONTROLLERS_FILE = Path(__file__).with_name("controllers.yaml")
NAME_LABEL = "app.kubernetes.io/name"
SERVICE_ACCOUNT_DIR = "/run/secrets/kubernetes.io/serviceaccount"  # /var/run is /run on Debian and its kin
# As the pod's own mounts would: a /tmp and /run of its own, its service account's files where client-go looks.
# (the pod's files, under the tier's temporary folder, are copied into /run before /tmp is covered)
POD_CONFIG = "/run/gpu-fleet/config.yaml"
_AS_IN_ITS_POD = (
    f"set -e; mount -t tmpfs tmpfs /run; mkdir -p {SERVICE_ACCOUNT_DIR} /run/gpu-fleet; "
    f'cp "$GPU_FLEET_POD_FILES"/sa/* {SERVICE_ACCOUNT_DIR}/; '
    f'if [ -f "$GPU_FLEET_POD_FILES/config.yaml" ]; then cp "$GPU_FLEET_POD_FILES/config.yaml" {POD_CONFIG}; fi; '
    'mount -t tmpfs tmpfs /tmp; exec "$@"'
)


@dataclass(frozen=True)
class Controller:
    """One controller the tier runs for real: its binary, its pods' ``app.kubernetes.io/name`` and the settings of
    its config file that bind its servers (``{ip}``: its pod's address)."""

    name: str
    binary: str
    pod_name: str
    config: dict[str, Any]


@cache
def controllers() -> tuple[Controller, ...]:
    """The controllers of ``controllers.yaml``."""
    data = yaml.safe_load(CONTROLLERS_FILE.read_text())
    return tuple(
        Controller(c["name"], c["binary"], c["pod_name"], dict(c.get("config") or {})) for c in data["controllers"]
    )


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        document = document.setdefault(key, {})
    document[last] = value


def rewritten_config(text: str, settings: dict[str, Any], ip: str) -> str:
    """A controller's config file with ``settings`` (dotted paths) set, ``{ip}`` in their values replaced by ``ip``."""
    document = yaml.safe_load(text) or {}
    for dotted, value in settings.items():
        _set(document, dotted, value.replace("{ip}", ip) if isinstance(value, str) else value)
    return yaml.safe_dump(document)


@dataclass
class _Running:
    uid: str
    process: Process
    pod: dict[str, Any]
    ip: str
    restarts: int = 0


@dataclass
class RealControllers:
    """Runs the real controllers of one hollow cluster (``hollow``, a ``tests.real.hollow.HollowCluster``) while
    started; ``index`` gives its pods addresses of their own (10.200.<index>.<n>, on the namespace's lo)."""

    hollow: Any
    index: int
    running: dict[str, _Running] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"controllers-{self.hollow.name}", daemon=True)
        self._addresses = 0

    def start(self) -> RealControllers:
        """Start watching for the controllers' pods."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, then every controller started here (by its PID); before the cluster itself."""
        self._stop.set()
        self._thread.join(timeout=60)
        for running in self.running.values():
            running.process.stop()

    def _watch(self) -> None:
        names = ",".join(c.pod_name for c in controllers())
        while not self._stop.wait(0.5):
            try:
                pods = self.hollow.get("pods", "--all-namespaces", "-l", f"{NAME_LABEL} in ({names})")["items"]
                for pod in pods:
                    self._run(pod)
                for running in self.running.values():
                    self._sync_secret_volumes(running)
                self._assign_load_balancers()
            except Exception as exc:  # kept, and reported by the tier's checks
                self.problems.append(f"{type(exc).__name__}: {exc}")
                if len(self.problems) > 50:
                    return

    def _run(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        controller = next(c for c in controllers() if c.pod_name == meta["labels"][NAME_LABEL])
        running = self.running.get(controller.name)
        if not spec.get("nodeName") or meta.get("deletionTimestamp"):
            return
        if running and running.uid == meta["uid"]:
            if running.process.alive() or running.restarts >= MAX_RESTARTS:
                return
            # as the kubelet restarts a container that exited (restartPolicy Always): a controller that started
            # before its certificate Secret was filled exits, and comes up once it is
            running.restarts += 1
            running.process.stop()  # its log closed
            running.process = self._start(controller, pod, running.ip)
            if self._wait_serving(running, running.ip, spec):
                self._mark_ready(pod, running.ip)
            return
        if running:  # a new pod of the controller (a rollout): the old one goes
            running.process.stop()
        self._addresses += 1
        # an address of the namespace's lo, outside KWOK's pod range and the service range: the API server reaches it
        # through the Service's endpoints, which refuse loopback (127.0.0.0/8) addresses
        ip = f"{POD_ADDRESSES}.{self.index}.{self._addresses}"
        subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", "lo"], check=True, capture_output=True)
        process = self._start(controller, pod, ip)
        self.running[controller.name] = _Running(meta["uid"], process, pod, ip)
        if self._wait_serving(self.running[controller.name], ip, spec):
            self._mark_ready(pod, ip)

    def _start(self, controller: Controller, pod: dict[str, Any], ip: str) -> Process:
        meta, spec = pod["metadata"], pod["spec"]
        namespace, account = meta["namespace"], spec.get("serviceAccountName", "default")
        container = next(c for c in spec["containers"] if any(a.startswith("--config=") for a in c.get("args", [])))
        files = self.hollow.folder / "pods" / meta["name"]
        (files / "sa").mkdir(parents=True, exist_ok=True)
        token = self.hollow.kubectl("create", "token", account, "-n", namespace, "--duration", "24h").stdout.strip()
        (files / "sa" / "token").write_text(token)
        (files / "sa" / "namespace").write_text(namespace)
        (files / "sa" / "ca.crt").write_text(self.hollow.pki().ca.read_text())
        args = []
        for arg in container.get("args", []):
            if arg.startswith("--config="):
                path = arg.split("=", 1)[1]
                text = self._mounted_file(namespace, spec, container, path)
                (files / "config.yaml").write_text(rewritten_config(text, controller.config, ip))
                arg = f"--config={POD_CONFIG}"
            args.append(arg)
        env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "GPU_FLEET_POD_FILES": str(files)}
        host, port = self.hollow.server.removeprefix("https://").rsplit(":", 1)
        env |= {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
        for variable in container.get("env", []):
            field_path = (variable.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
            value = variable.get("value")
            if field_path:
                value = {"metadata.namespace": namespace, "metadata.name": meta["name"], "status.podIP": ip}.get(
                    field_path, ""
                )
            if value is not None:
                env[variable["name"]] = value
        binary = str(toolchain.binary(controller.binary))
        command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _AS_IN_ITS_POD, "sh"]
        return Process([*command, binary, *args], self.hollow.folder / f"{controller.name}.log", env=env)

    def _mounted_file(self, namespace: str, spec: dict[str, Any], container: dict[str, Any], path: str) -> str:
        """The text of the ConfigMap key a container sees at ``path`` (a volume mounted at it or at its folder)."""
        for mount in container.get("volumeMounts", []):
            at = mount["mountPath"].rstrip("/")
            if path == at or path.startswith(at + "/"):
                volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
                key = mount.get("subPath") or path[len(at) :].lstrip("/")
                source = self.hollow.get("configmap", volume["configMap"]["name"], "-n", namespace)
                return str(source["data"][key])
        raise AssertionError(f"no volume of the pod holds {path}")

    def _assign_load_balancers(self) -> None:
        """What the cloud's load-balancer controller does for a Service of type LoadBalancer: an ingress address in
        its status (the Kubernetes provider waits for one before it calls the Service created). The address is one
        of the namespace's lo (``LOAD_BALANCER_ADDRESSES``), so nothing leaves the machine."""
        services = self.hollow.get("services", "--all-namespaces")["items"]
        for service in services:
            if service["spec"].get("type") != "LoadBalancer" or service.get("status", {}).get("loadBalancer", {}).get(
                "ingress"
            ):
                continue
            self._addresses += 1
            ip = f"{LOAD_BALANCER_ADDRESSES}.{self.index}.{self._addresses}"
            subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", "lo"], check=True, capture_output=True)
            meta = service["metadata"]
            self.hollow.kubectl(
                "patch", "service", meta["name"], "-n", meta["namespace"], "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}),
            )  # fmt: skip

    def _sync_secret_volumes(self, running: _Running) -> None:
        """What the kubelet does for a pod's Secret volumes: their keys as files at the mount path, kept current (a
        controller's certificate rotator writes its serving certificate into a Secret and waits for the files)."""
        pid, pod = running.process.proc.pid, running.pod
        if not running.process.alive():
            return
        volumes = {v["name"]: v["secret"]["secretName"] for v in pod["spec"].get("volumes", []) if "secret" in v}
        for container in pod["spec"]["containers"]:
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    continue
                found = self.hollow.kubectl(
                    "get", "secret", volumes[mount["name"]], "-n", pod["metadata"]["namespace"], "-o", "json",
                    check=False,
                )  # fmt: skip
                if found.returncode != 0:
                    continue
                target = Path(f"/proc/{pid}/root") / mount["mountPath"].lstrip("/")
                for key, value in (json.loads(found.stdout).get("data") or {}).items():
                    content = base64.b64decode(value)
                    path = target / key
                    try:
                        if not path.is_file() or path.read_bytes() != content:
                            path.parent.mkdir(parents=True, exist_ok=True)
                            path.write_bytes(content)
                    except OSError:
                        return  # the process is gone, or its /tmp not mounted yet: the next round

    def _wait_serving(self, running: _Running, ip: str, spec: dict[str, Any]) -> bool:
        """Whether the controller serves its webhook port at ``ip`` (False: it exited, to be started again)."""
        process = running.process
        ports = [p["containerPort"] for c in spec["containers"] for p in c.get("ports", []) if "webhook" in p["name"]]
        deadline = patience()
        while ports and time.monotonic() < deadline and process.alive():
            self._sync_secret_volumes(running)
            with socket.socket() as sock:
                sock.settimeout(2)
                if sock.connect_ex((ip, ports[0])) == 0:
                    return True
            time.sleep(0.5)
        if process.alive() and ports:
            raise AssertionError(f"{process.log.name} did not serve on {ip}:{ports}\n{process.logs()}")
        if not process.alive() and running.restarts >= MAX_RESTARTS:
            raise AssertionError(f"{process.log.name} exited {MAX_RESTARTS + 1} times\n{process.logs()}")
        return process.alive()

    def _mark_ready(self, pod: dict[str, Any], ip: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        statuses = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        status = {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        meta = pod["metadata"]
        self.hollow.kubectl(
            "patch", "pod", meta["name"], "-n", meta["namespace"], "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip


def kwok_exclusion() -> dict[str, Any]:
    """The KWOK stage selector that leaves the real controllers' pods to ``RealControllers``."""
    return {
        "key": f'.metadata.labels["{NAME_LABEL}"]',
        "operator": "NotIn",
        "values": [c.pod_name for c in controllers()],
    }
