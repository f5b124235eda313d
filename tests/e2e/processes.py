"""Real prometheus and mtail processes on 127.0.0.1 for end-to-end tests: start, wait until ready, stop.

Each process gets a free loopback port and its own files under a temp dir; its output goes to a log file
that failures print. Every wait is bounded and fails fast when the process has exited.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from fleet.model.core.pod_contract import mtail_args

#: How long an end-to-end test waits for a process it started (to be ready, to answer, to finish) before calling it
#: hung. An upper bound for a loaded machine, never a measure of speed: a working run goes on as soon as what it waits
#: for is there, so only a hang waits this long.
PATIENCE_S = 300.0


def patience() -> float:
    """The deadline (a ``time.monotonic()`` instant) of a wait that starts now: ``PATIENCE_S`` from now."""
    return time.monotonic() + PATIENCE_S


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """Status and body of a GET (an HTTP error status is returned, not raised)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class Process:
    """A child process whose stdout and stderr go to ``log``."""

    def __init__(self, args: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None):
        self.args = args
        self.log = log
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen(args, stdout=self._log_file, stderr=subprocess.STDOUT, cwd=cwd, env=env)

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def logs(self, tail: int = 3000) -> str:
        """The end of the process' output, headed by its name and exit status."""
        text = self.log.read_text(errors="replace")[-tail:]
        return f"--- {self.log.name} (exit {self.proc.poll()}) ---\n{text}"

    def stop(self) -> None:
        """Terminate (then kill) the process and close its log."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log_file.close()


def tree_rss_kib(pid: int) -> int:
    """The resident memory (VmRSS, KiB) of process ``pid`` and all its descendants, summed (Linux /proc): what a
    container's memory limit sees of them, counting shared pages once per process (so never less)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for member in tree:
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total


def wait_for(what: str, probe: Callable[[], Any], deadline: float, processes: list[Process]) -> Any:
    """Call ``probe`` until it returns something truthy or ``deadline`` (monotonic) passes; fail if a process died."""
    last: Any = None
    while time.monotonic() < deadline:
        dead = [p for p in processes if not p.alive()]
        if dead:
            raise AssertionError(f"a process exited while waiting for {what}\n" + "\n".join(p.logs() for p in dead))
        try:
            last = probe()
            if last:
                return last
        except (OSError, ValueError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(
        f"timed out waiting for {what} (last: {last!r})\n" + "\n".join(p.logs(tail=600) for p in processes)
    )


class Prometheus(Process):
    """``prometheus`` with ``config`` (a dict) and its own storage, listening on 127.0.0.1:``port`` (HTTPS with
    client certificates when a ``web_config`` file is given)."""

    def __init__(
        self,
        exe: str,
        directory: Path,
        config: dict[str, Any],
        port: int | None = None,
        web_config: Path | None = None,
        name: str = "prometheus",
    ):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        directory.mkdir(parents=True, exist_ok=True)
        config_file = directory / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        super().__init__(
            [
                exe,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
                *([f"--web.config.file={web_config}"] if web_config is not None else []),
            ],
            directory / f"{name}.log",
            cwd=directory,
        )

    def ready(self) -> bool:
        """Whether ``/-/ready`` answers 200."""
        try:
            return http_get(f"{self.url}/-/ready", timeout=2)[0] == 200
        except (urllib.error.URLError, OSError):
            return False

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query now (or at Unix time ``at``): the result vector."""
        params = {"query": promql, **({"time": str(at)} if at is not None else {})}
        return self._api("query", params)

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query: the result matrix."""
        return self._api("query_range", {"query": promql, "start": str(start), "end": str(end), "step": str(step)})

    def _api(self, endpoint: str, params: dict[str, str]) -> list[dict[str, Any]]:
        status, body = http_get(f"{self.url}/api/v1/{endpoint}?" + urllib.parse.urlencode(params))
        document = json.loads(body)
        if status != 200 or document.get("status") != "success":
            raise AssertionError(f"{endpoint} {params['query']!r} failed: {status} {body[:300]!r}")
        return list(document["data"]["result"])


class Mtail(Process):
    """``mtail`` with the sidecar's flags (fleet.pod_contract.mtail_args) on one log file, on 127.0.0.1."""

    def __init__(self, exe: str, programs: Path, log_file: Path, output: Path):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        args = mtail_args(programs_dir=str(programs), logs=str(log_file), port=self.port)
        super().__init__([exe, *args, "--address", "127.0.0.1"], output)

    def serving(self) -> bool:
        """Whether ``/metrics`` answers 200."""
        try:
            return http_get(f"http://{self.address}/metrics", timeout=2)[0] == 200
        except (urllib.error.URLError, OSError):
            return False


class TextExporter:
    """An exporter on 127.0.0.1 (a thread, not a process): ``GET /metrics`` answers ``body()`` in the Prometheus
    text format, any other path 404."""

    def __init__(self, body: Callable[[], str]):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                data = body().encode()
                self.send_response(200 if self.path.startswith("/metrics") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_port)
        self.address = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class RecordingUpstream:
    """An HTTP server on 127.0.0.1 (a thread) that answers every GET 200 ``ok`` and records what it received:
    ``(method, path with query, body)`` per request."""

    def __init__(self) -> None:
        received: list[tuple[str, str, bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(("GET", self.path, self.rfile.read(length) if length else b""))
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
