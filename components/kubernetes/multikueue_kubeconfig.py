"""The kubeconfig a queue worker gives the manager's MultiKueue: its API server, its CA and the worker identity's
token (components/kubernetes/multikueue.py), and what the offline plan shows in place of one it cannot read."""

from __future__ import annotations

import yaml

from fleet.model.queues.settings import WORKER_ACCOUNT

WORKER_IDENTITY = WORKER_ACCOUNT


# What the offline plan shows for an existing cluster's encrypted kubeconfig (it cannot decrypt it).
OFFLINE_KUBECONFIG = yaml.safe_dump(
    {
        "clusters": [
            {
                "name": "offline",
                "cluster": {"server": "https://offline-plan.invalid", "certificate-authority-data": "b2ZmbGluZS1wbGFu"},
            }
        ],
        "contexts": [{"name": "offline", "context": {"cluster": "offline"}}],
        "current-context": "offline",
    }
)


def token_kubeconfig(kubeconfig: str, token: str, name: str) -> str:
    """A kubeconfig for MultiKueue: the server and CA data of ``kubeconfig``'s current cluster, and ``token``.

    MultiKueue refuses exec plugins, token files, auth providers, basic auth and CA files (multikueuecluster.go), so
    only a bearer token and CA data go in."""
    config = yaml.safe_load(kubeconfig)
    if not isinstance(config, dict) or not all(
        isinstance(config.get(k) or [], list) and all(isinstance(e, dict) for e in config.get(k) or [])
        for k in ("clusters", "contexts")
    ):
        raise ValueError(
            f"the kubeconfig of {name} is not a kubeconfig (a mapping with clusters and contexts lists): MultiKueue "
            "needs its server and certificate-authority-data"
        )
    context = next(
        (c["context"] for c in config.get("contexts", []) if c.get("name") == config.get("current-context")),
        (config.get("contexts") or [{}])[0].get("context", {}),
    )
    clusters = config.get("clusters") or []
    entry = next((c for c in clusters if c.get("name") == context.get("cluster")), clusters[0] if clusters else {})
    cluster = entry.get("cluster", {})
    if not cluster.get("certificate-authority-data") or not cluster.get("server"):
        raise ValueError(
            f"the kubeconfig of {name} has no server or certificate-authority-data: MultiKueue needs both (a CA file "
            "or insecure-skip-tls-verify is refused)"
        )
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": cluster["server"],
                        "certificate-authority-data": cluster["certificate-authority-data"],
                    },
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": WORKER_IDENTITY}}],
            "current-context": name,
            "users": [{"name": WORKER_IDENTITY, "user": {"token": token}}],
        },
        sort_keys=False,
    )
