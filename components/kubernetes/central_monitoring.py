"""What only the central cluster's monitoring has: the Alertmanager's configuration with the fleet's alert
receiver, and Grafana's admin credentials, each a Secret the chart reads."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.settings import ComponentSettings
from fleet.model.core.clusters import Cluster
from fleet.model.monitoring import prometheus

# The central Grafana's admin credentials: a Secret the chart reads (grafana 10.1.4 values: admin.existingSecret,
# admin.userKey, admin.passwordKey).
GRAFANA_ADMIN_SECRET = "grafana-admin"
# the central Grafana's Role in monitoring (the release binds it: prometheus_stack.py rbac.useExistingRole): its
# sidecars read ConfigMaps, never a Secret
GRAFANA_ROLE = "gpu-fleet-grafana"
GRAFANA_RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
GRAFANA_ADMIN_USER = "admin"
# The central Alertmanager reads its configuration from a Secret the stack writes, so the receiver (webhook URLs,
# tokens) is that Secret's and the chart's values stay plain for review: alertmanagerSpec.useExistingSecret stops
# the chart from rendering its own, configSecret names ours (kube-prometheus-stack 79.5.0 values.yaml
# alertmanager.alertmanagerSpec, templates/alertmanager/secret.yaml and alertmanager.yaml); the key is
# alertmanager.yaml (prometheus-operator Alertmanager spec.configSecret).
ALERTMANAGER_CONFIG_SECRET = "gpu-fleet-alertmanager-config"
ALERTMANAGER_CONFIG_REF = {"useExistingSecret": True, "configSecret": ALERTMANAGER_CONFIG_SECRET}
# What the offline plan shows for an encrypted gpu-fleet:alertReceiver (it cannot decrypt it).
OFFLINE_RECEIVER = {"name": "gpu-fleet-alert-receiver", "webhook_configs": [{"url": "https://offline-plan.invalid/"}]}


def alertmanager_config(receiver: dict[str, Any] | None) -> dict[str, Any]:
    """The central Alertmanager's configuration: every alert to ``receiver`` (an Alertmanager ``receivers`` entry,
    from ``gpu-fleet:alertReceiver``), the always-firing Watchdog to nobody; with no receiver, every alert to
    nobody, as the chart's default does (kube-prometheus-stack 79.5.0 values.yaml alertmanager.config)."""
    target = receiver["name"] if receiver else "null"
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    if receiver:
        receivers.append(receiver)
    return {
        "route": {
            "group_by": ["alertname", "cluster"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "12h",
            "receiver": target,
            "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
        },
        "receivers": receivers,
    }


def parse_alert_receiver(text: str) -> dict[str, Any]:
    """``gpu-fleet:alertReceiver``: one Alertmanager receiver as JSON (``{"name": ..., "slack_configs": [...]}``),
    or ``ValueError`` saying what is wrong (never the value: it holds webhook URLs and tokens)."""
    try:
        receiver = json.loads(text)
    except ValueError:
        raise ValueError(
            "gpu-fleet:alertReceiver is not JSON: set one Alertmanager receiver, such as "
            '{"name": "team", "webhook_configs": [{"url": "https://..."}]}, with pulumi config set --secret'
        ) from None
    if not isinstance(receiver, dict) or not isinstance(receiver.get("name"), str) or not receiver["name"]:
        raise ValueError("gpu-fleet:alertReceiver must be a JSON object with a name and its *_configs")
    if receiver["name"] == "null":
        raise ValueError('gpu-fleet:alertReceiver must not be named "null": that receiver drops alerts')
    if not any(k.endswith("_configs") for k in receiver):
        raise ValueError("gpu-fleet:alertReceiver has no *_configs (webhook_configs, slack_configs, email_configs...)")
    return receiver


def alert_config(cluster: Cluster, settings: ComponentSettings) -> Any:
    """The central Alertmanager's configuration from the secret ``gpu-fleet:alertReceiver`` (kept secret), or
    the default with a warning: without a receiver, FederatedClusterDown and the benchmark alerts reach no one."""
    if settings.alert_receiver is None:
        pulumi.log.warn(
            f"{cluster.name}: gpu-fleet:alertReceiver is not set: alerts such as FederatedClusterDown reach no "
            "one. Set one Alertmanager receiver as JSON: pulumi config set --secret gpu-fleet:alertReceiver "
            '\'{"name": "team", "webhook_configs": [{"url": "https://..."}]}\''
        )
        return None

    def config(text: str) -> dict[str, Any]:
        # offline, the encrypted value cannot be read: a stand-in receiver shows where it goes
        receiver = OFFLINE_RECEIVER if text == settings.secret_placeholder else parse_alert_receiver(text)
        return alertmanager_config(receiver)

    return settings.alert_receiver.apply(config)


def alert_secret(
    cluster: Cluster, settings: ComponentSettings, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret:
    """The central Alertmanager's configuration (receiver included) as a Secret of its own."""
    config = alert_config(cluster, settings)
    text = (
        pulumi.Output.secret(config).apply(prometheus.to_yaml)
        if config is not None
        else prometheus.to_yaml(alertmanager_config(None))
    )
    return k8s.core.v1.Secret(
        f"{cluster.name}-alertmanager-config",
        metadata={"name": ALERTMANAGER_CONFIG_SECRET, "namespace": namespace},
        type="Opaque",
        string_data={"alertmanager.yaml": text},
        opts=opts,
    )


def grafana_role(cluster: Cluster, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The central Grafana's Role: ConfigMaps of the monitoring namespace, read only."""
    k8s.rbac.v1.Role(
        f"{cluster.name}-grafana-role",
        metadata={"name": GRAFANA_ROLE, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpu-fleet"}},
        rules=GRAFANA_RULES,
        opts=opts,
    )


def grafana_admin(
    cluster: Cluster, settings: ComponentSettings, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> pulumi.Output[str]:
    """The Secret with the central Grafana's admin password: ``gpu-fleet:grafanaAdminPassword``, or one
    generated and kept in the stack's state (exported as the secret ``grafana_admin_password``)."""
    password = settings.grafana_admin_password
    if password is None:
        generator = random.Provider(f"{cluster.name}-random", opts=pulumi.ResourceOptions(parent=opts.parent))
        password = random.RandomPassword(
            f"{cluster.name}-grafana-admin",
            length=32,
            special=False,
            opts=pulumi.ResourceOptions(parent=opts.parent, provider=generator),
        ).result
    k8s.core.v1.Secret(
        f"{cluster.name}-grafana-admin",
        metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": namespace},
        type="Opaque",
        string_data={"admin-user": GRAFANA_ADMIN_USER, "admin-password": pulumi.Output.secret(password)},
        opts=opts,
    )
    return pulumi.Output.secret(password)
