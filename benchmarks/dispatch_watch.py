"""When each object of a kind reached each stage of its life, as the API server told a watch of it.

A ``StageWatch`` runs ``kubectl get <resource> --watch -o json`` (the built kubectl, the cluster admin's kubeconfig)
in a thread, notes the instant (``time.monotonic()``) each event arrived, and keeps, per object of the benchmark's
(``key`` names it, or None for one not of the run), the first instant it was seen in each stage
(``benchmarks.dispatch_stages``). A watch the server ends is started again (its first answer lists every object
again; the earliest instants are kept). Its process is stopped by its PID in ``stop``.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.dispatch_stages import split_objects
from tests.real import toolchain

Key = Callable[[Mapping[str, Any]], str | None]
Stages = Callable[[Mapping[str, Any]], set[str]]


class StageWatch:
    """The stages ``stages`` of the objects of ``resource`` in ``namespace`` (``selector``: a label selector) of the
    cluster of ``kubeconfig``, per object ``key`` gives."""

    def __init__(
        self, kubeconfig: str, resource: str, namespace: str, key: Key, stages: Stages, selector: str | None = None
    ):
        self.command = [str(toolchain.binary("kubectl")), "--kubeconfig", kubeconfig, "get", resource,
                        "-n", namespace, "--watch", "-o", "json"]  # fmt: skip
        if selector:
            self.command += ["-l", selector]
        self.key, self.stages = key, stages
        self.reached: dict[str, dict[str, float]] = {}
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{resource}", daemon=True)

    def start(self) -> StageWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the watch and its kubectl (by its PID)."""
        self._stop.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
        self._thread.join(timeout=30)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Object -> stage -> the instant it was first seen there, so far."""
        with self._lock:
            return {name: dict(stages) for name, stages in self.reached.items()}

    def count(self, stage: str) -> int:
        """How many objects have reached ``stage`` so far."""
        with self._lock:
            return sum(stage in s for s in self.reached.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            buffer = ""
            assert self._process.stdout is not None
            fd = self._process.stdout.fileno()
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                at = time.monotonic()
                objects, buffer = split_objects(buffer + chunk.decode(errors="replace"))
                for obj in objects:
                    self._note(obj, at)
            self._process.wait()
            if not self._stop.is_set():
                said = (self._process.stderr.read() if self._process.stderr else b"").decode(errors="replace")
                self.problems.append(f"watch ended ({self._process.returncode}): {said.strip()[:500]}")
                if len(self.problems) > 20:
                    return
                time.sleep(1)

    def _note(self, obj: Mapping[str, Any], at: float) -> None:
        if obj.get("kind", "").endswith("List"):  # a listing, should kubectl print one: each item
            for item in obj.get("items", []):
                self._note(item, at)
            return
        name = self.key(obj)
        if name is None:
            return
        with self._lock:
            known = self.reached.setdefault(name, {})
            for stage in self.stages(obj):
                known.setdefault(stage, at)
