"""The central benchmark's leaves: a synthetic fleet of N leaves and each leaf's ``/federate`` answer served from
one Python process, one port a leaf (benchmarks/README.md, ``central_scale.py``)."""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from benchmarks import synthetic_leaf
from benchmarks.synthetic_fleet import generate_fleet
from fleet.model.core.fleet import Cluster, Fleet
from fleet.model.loader import load_fleet

RUNNER_CARDS = ("t4", "l4")


@dataclass
class Leaf:
    """One synthetic leaf: its cluster and its ``/federate`` answer's lines."""

    cluster: Cluster
    lines: list[tuple[str, str]]
    port: int = 0
    served: int = 0
    bytes_served: int = 0


def synthetic_fleet(root: Path, leaves: int) -> tuple[Fleet, Path, Path]:
    """The fleet of ``leaves`` leaves (and the central), with runners on two cards of every leaf."""
    synthetic = generate_fleet(root, leaves + 1, cards=8, workloads=4)
    policy = yaml.safe_load(synthetic.policy_file.read_text(encoding="utf-8"))
    cards = {c: {"concurrency": 2} for c in RUNNER_CARDS if c in synthetic.cards}
    policy["runners"] = {
        "gitlab_url": "https://gitlab.example.org",
        "clusters": {name: dict(cards) for name in synthetic.clusters[1:]},
    }
    synthetic.policy_file.write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    fleet = load_fleet(synthetic.policy_file, synthetic.workloads_dir)
    return fleet, synthetic.policy_file, synthetic.workloads_dir


class _Handler(BaseHTTPRequestHandler):
    leaf: Leaf

    def do_GET(self) -> None:
        leaf = self.server.leaf  # type: ignore[attr-defined]
        body = synthetic_leaf.exposition(leaf.lines, 1.0 + (time.time() // 60) % 7, int(time.time() * 1000))
        data = body.encode()
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            data = compressor.compress(data) + compressor.flush()
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        leaf.served += 1
        leaf.bytes_served += len(data)

    def log_message(self, *args: Any) -> None:
        return


def serve(leaves: list[Leaf]) -> list[ThreadingHTTPServer]:
    """One HTTP server a leaf on a free loopback port, each in a daemon thread of this process."""
    servers = []
    for leaf in leaves:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.leaf = leaf  # type: ignore[attr-defined]
        leaf.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers
