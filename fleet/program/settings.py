"""Stack configuration keys of the ``gpu-fleet`` namespace, read in one place with their defaults and checks.

A wrong value is an ``InputError`` located in the stack file (``stacks/Pulumi.<stack>.yaml``), so ``plan`` and
``pulumi up`` both refuse it with ``FILE:LINE: key: what is wrong`` before anything is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.config import is_config_secret

from components.settings import ComponentSettings
from fleet.model.errors import InputError, Problem, format_path
from fleet.model.stack_settings import (
    CONFIG_NAMESPACE,
    PLAIN_KINDS,
    SECRET_MAP_VALUES,
    STACK_SETTINGS,
    StackSetting,
    decode_config_text,
    parse_value,
    plain_secret_message,
    unset_value,
)
from fleet.model.yaml_source import read_yaml
from fleet.program.stack_config import SECRET_PLACEHOLDER, plain_leaves

ROOT = Path(__file__).resolve().parents[2]
# Set by the offline plan (fleet/tools/engine/plan.py): the stack file it read, so problems point into it.
STACK_FILE_KEY = "stackFile"
# Set by the offline plan: bad input goes up as an ``InputError`` instead of a Pulumi run error.
OFFLINE_PLAN_KEY = "offlinePlan"


def stack_file_path() -> Path:
    """The current stack's config file: the one the offline plan read, else ``stacks/Pulumi.<stack>.yaml``."""
    given = pulumi.Config(CONFIG_NAMESPACE).get(STACK_FILE_KEY)
    return Path(given) if given else ROOT / "stacks" / f"Pulumi.{pulumi.get_stack()}.yaml"


def config_problem(key: str, message: str, *subpath: object) -> Problem:
    """A problem with config ``key`` (``ns:name``, optionally a path inside its value), located in the stack file."""
    path = stack_file_path()
    keys: tuple[object, ...] = ("config", key, *subpath)
    if path.is_file():
        try:
            return read_yaml(path).problem(keys, message)
        except InputError:
            pass  # the file itself is broken: the location below still names it
    return Problem(str(path), 1, format_path(keys), message)


def config_value(cfg: pulumi.Config, name: str) -> Any:
    """A config value as the stack file wrote it: objects and lists decoded, anything else the plain string.

    Unlike ``Config.get_object`` this never fails (nor echoes the value, which may be a secret, in an error): the
    caller checks the type and reports a located problem.
    """
    raw = cfg.get(name)
    return None if raw is None else decode_config_text(raw)


def plain_in_stack_file(key: str) -> list[tuple[object, ...]]:
    """Paths inside config ``key`` that the stack file holds in plain text. One encrypted part makes the CLI treat
    the whole key as secret, so only the file tells which parts a user left plain."""
    path = stack_file_path()
    try:
        data = read_yaml(path).data if path.is_file() else None
    except InputError:
        return []  # a broken file is reported where it is read
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) or key not in config:
        return []
    return plain_leaves(config[key])


@dataclass(frozen=True)
class StackSettings:
    """What a stack's config file says beyond the policy file (site-specific, per stack): one field per setting
    declared in ``fleet.model.stack_settings.STACK_SETTINGS``, named as its ``attribute``."""

    policy_file: str | None
    workloads_dir: str | None
    protect: bool
    stack_reference_prefix: str
    federation_source_ranges: list[str]
    # StorageClass of the central Prometheus volume; None: the cluster's default class
    storage_class: str | None = None
    # workload -> {environment variable: credential}; read from secret config only, never printed
    workload_secrets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    # card -> the GitLab runner authentication token (glrt-...) of that card's runner; secret config only
    runner_tokens: dict[str, str] = field(default_factory=dict, repr=False)
    # Who may reach the cluster's API endpoint (empty: any address, with a warning), and whether it has a
    # private endpoint only.
    api_allowed_cidrs: list[str] = field(default_factory=list)
    private_api_endpoint: bool = False
    # Opt-outs of safe defaults a site may need (each named in its stack file): GKE nodes with public addresses;
    # AKS without the audit log or without auto-upgrade.
    public_nodes: bool = False
    audit_logs: bool = True
    auto_upgrade: bool = True
    # The pull-request preview identity as this cluster knows it (GKE: its service account's email; AKS: its object
    # id; EKS: its IAM role ARN; existing: its Kubernetes user name): it may dry-run, nothing more.
    preview_principal: str | None = None
    # Cloud-specific keys, read here with the others and checked by their cluster component: EKS subnets or zones,
    # the Magnum site settings (a mapping), the existing cluster's kubeconfig (a secret; None when not set as one).
    subnet_ids: Any = None
    availability_zones: Any = None
    magnum: Any = None
    kubeconfig: pulumi.Output[str] | None = field(default=None, repr=False)
    # The central's Grafana admin password (secret; None: a generated one) and Alertmanager receiver (secret
    # JSON text of one Alertmanager `receivers` entry; None: alerts reach no one, with a warning).
    grafana_admin_password: pulumi.Output[str] | None = field(default=None, repr=False)
    alert_receiver: pulumi.Output[str] | None = field(default=None, repr=False)

    @staticmethod
    def read() -> StackSettings:
        """Read every declared ``gpu-fleet:*`` setting (``fleet.model.stack_settings.STACK_SETTINGS``) of the current
        stack into its field; every problem at once as an ``InputError``."""
        cfg = pulumi.Config(CONFIG_NAMESPACE)
        problems: list[Problem] = []
        values: dict[str, Any] = {}
        for setting in STACK_SETTINGS.values():
            values[setting.attribute], found = _read_setting(cfg, setting)
            problems += [config_problem(setting.key, message, *where) for where, message in found]
        if problems:
            raise InputError(problems)
        return StackSettings(**values)

    def for_components(self) -> ComponentSettings:
        """The settings the components take, with the placeholder of offline secrets and the stack file locator."""
        return ComponentSettings(
            config_namespace=CONFIG_NAMESPACE,
            protect=self.protect,
            stack_reference_prefix=self.stack_reference_prefix,
            federation_source_ranges=self.federation_source_ranges,
            storage_class=self.storage_class,
            api_allowed_cidrs=self.api_allowed_cidrs,
            private_api_endpoint=self.private_api_endpoint,
            public_nodes=self.public_nodes,
            audit_logs=self.audit_logs,
            auto_upgrade=self.auto_upgrade,
            preview_principal=self.preview_principal,
            subnet_ids=self.subnet_ids,
            availability_zones=self.availability_zones,
            magnum=self.magnum,
            kubeconfig=self.kubeconfig,
            grafana_admin_password=self.grafana_admin_password,
            alert_receiver=self.alert_receiver,
            secret_placeholder=SECRET_PLACEHOLDER,
            config_problem=config_problem,
        )


def _read_setting(cfg: pulumi.Config, setting: StackSetting) -> tuple[Any, list[tuple[tuple[object, ...], str]]]:
    """One setting's value as the program uses it (``unset_value`` when the stack does not set it), and its problems
    as (path inside the value, message)."""
    if setting.kind == "magnum":
        return config_value(cfg, setting.name), []  # checked by MagnumSettings, where the component reads it
    if setting.kind in PLAIN_KINDS:
        raw = cfg.get(setting.name)
        return (unset_value(setting), []) if raw is None else parse_value(setting, raw)
    plain = [(leaf, plain_secret_message(setting.key, leaf)) for leaf in plain_in_stack_file(setting.key)]
    if setting.kind == "secret":
        return (cfg.get_secret(setting.name) if is_config_secret(setting.key) else None), plain
    value = config_value(cfg, setting.name)
    if value is None:
        return unset_value(setting), []
    try:
        _require_secret(setting)
        return SECRET_MAP_VALUES[setting.name](value), plain
    except ValueError as exc:
        return unset_value(setting), [((), str(exc))]


def _require_secret(setting: StackSetting) -> None:
    """``ValueError`` with the command to set it when ``setting`` (a mapping of secrets) is not secret config."""
    if not is_config_secret(setting.key):
        raise ValueError(
            f"holds credentials in plain text in the stack file: remove it and set each value with "
            f"pulumi config set --secret --path '{setting.key}.{setting.each}' <value>"
        )
