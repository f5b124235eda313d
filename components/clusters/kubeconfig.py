"""Kubeconfigs built from stable cluster fields, always as Pulumi secrets."""

from __future__ import annotations

import json

import pulumi


def exec_kubeconfig(
    name: str,
    endpoint: pulumi.Input[str],
    ca_data: pulumi.Input[str],
    command: str,
    args: list[pulumi.Input[str]],
    env: dict[str, str] | None = None,
) -> pulumi.Output[str]:
    """A kubeconfig whose user runs ``command args`` for a token (gke-gcloud-auth-plugin, aws eks get-token).

    Only the endpoint, the CA and the exec command go in, so the provider is not replaced when unrelated
    cluster attributes change (pulumi-kubernetes #2294).
    """

    def render(values: list[str]) -> str:
        server, ca, *cmd_args = values
        user: dict[str, object] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": command,
                "args": cmd_args,
                "interactiveMode": "Never",
                "provideClusterInfo": command == "gke-gcloud-auth-plugin",
            }
        }
        if env:
            user["exec"]["env"] = [{"name": k, "value": v} for k, v in env.items()]  # type: ignore[index]
        server = server if str(server).startswith("https://") else f"https://{server}"
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                "current-context": name,
                "users": [{"name": name, "user": user}],
            }
        )

    return pulumi.Output.secret(pulumi.Output.all(endpoint, ca_data, *args).apply(render))
