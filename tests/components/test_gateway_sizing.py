"""The gateway's connection limits fit its memory limit (components/kubernetes/gateway.py, gateway.nginx.conf)."""

from __future__ import annotations

import re

from components.kubernetes.gateway import (
    GATEWAY_MEMORY_MIB,
    GATEWAY_WORKER_CONNECTIONS,
    GATEWAY_WORKERS,
    NGINX_TEMPLATE,
    STALLED_HANDSHAKE_KIB,
)

BASE_MIB = 21  # nginx's three processes idle, measured (tests/e2e/test_rendered_configs.py)


def test_every_slot_stalled_fits_the_memory_limit():
    text = NGINX_TEMPLATE.read_text(encoding="utf-8")
    workers = int(re.search(r"^worker_processes (\d+);", text, re.M).group(1))
    connections = int(re.search(r"^\s*worker_connections (\d+);", text, re.M).group(1))
    nofile = int(re.search(r"^worker_rlimit_nofile (\d+);", text, re.M).group(1))
    assert (workers, connections) == (GATEWAY_WORKERS, GATEWAY_WORKER_CONNECTIONS)
    assert nofile >= 2 * connections  # a proxied connection takes two descriptors
    worst = BASE_MIB + workers * connections * STALLED_HANDSHAKE_KIB / 1024
    assert worst < GATEWAY_MEMORY_MIB
    # the old limits (2 x 8192) did not fit: the finding of issue 44
    assert BASE_MIB + 2 * 8192 * STALLED_HANDSHAKE_KIB / 1024 > GATEWAY_MEMORY_MIB
