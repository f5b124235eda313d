"""Stack configuration keys of the ``gpu-fleet`` namespace, read in one place with their defaults and checks.

A wrong value is an ``InputError`` located in the stack file (``stacks/Pulumi.<stack>.yaml``), so ``plan`` and
``pulumi up`` both refuse it with ``FILE:LINE: key: what is wrong`` before anything is deployed.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.runtime.config import is_config_secret

from fleet.model.errors import InputError, Problem, format_path
from fleet.model.yaml_source import read_yaml
from fleet.program.stack_config import plain_leaves

if TYPE_CHECKING:
    from fleet.model.spec import Cluster

NAMESPACE = "gpu-fleet"
ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_SECRETS = "workloadSecrets"
RUNNER_TOKENS = "runnerTokens"
# Set by the offline plan (fleet/tools/plan.py): the stack file it read, so problems point into it.
STACK_FILE_KEY = "stackFile"
# Set by the offline plan: bad input goes up as an ``InputError`` instead of a Pulumi run error.
OFFLINE_PLAN_KEY = "offlinePlan"
API_RANGES = "the ranges of the people and CI runners that run kubectl and pulumi"

# Address ranges that never carry real traffic (RFC 5737, RFC 3849): a sample value left in a stack file.
DOCUMENTATION_RANGES = tuple(
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


def stack_file_path() -> Path:
    """The current stack's config file: the one the offline plan read, else ``stacks/Pulumi.<stack>.yaml``."""
    given = pulumi.Config(NAMESPACE).get(STACK_FILE_KEY)
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


def decode_config_text(value: Any) -> Any:
    """A list or object held as JSON text (how the CLI hands non-string config to a program, and what `pulumi config
    set` without --path writes into the stack file) decoded; any other value as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def plain_secret_message(key: str, leaf: tuple[object, ...]) -> str:
    """What to say of a plain-text value inside secret config ``key`` (never the value itself)."""
    dotted = ".".join(str(p) for p in (key, *leaf))
    return (
        "plain text where a credential belongs (the value is not shown): remove it and set it with "
        f"pulumi config set --secret --path '{dotted}' <value>"
    )


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


def check_source_ranges(
    value: Any, wanted: str = "the central cluster's egress ranges"
) -> tuple[list[str], list[tuple[tuple[object, ...], str]]]:
    """A list of source ranges (``gpu-fleet:federationSourceRanges``, ``gpu-fleet:apiAllowedCidrs``) as CIDR
    strings, and its problems as (path inside the value, message); ``wanted`` says what the ranges should be.

    A range must parse as a network address; ``0.0.0.0/0`` (or ``::/0``) and documentation ranges are refused:
    the first admits every address, the second none that exists, so the endpoint would be open or blocked.
    """
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [((), 'must be a list of CIDR ranges, such as ["188.184.0.0/15"]')]
    ranges: list[str] = []
    problems: list[tuple[tuple[object, ...], str]] = []
    for i, item in enumerate(value):
        try:
            net = ipaddress.ip_network(str(item), strict=True)
        except ValueError as exc:
            problems.append(((i,), f"{item!r} is not a CIDR range ({exc})"))
            continue
        if net.prefixlen == 0:
            problems.append(((i,), f"{net} admits every address: give {wanted}"))
        elif any(net.version == doc.version and net.subnet_of(doc) for doc in DOCUMENTATION_RANGES):  # type: ignore[arg-type]
            problems.append(
                (
                    (i,),
                    f"{net} is a documentation range (RFC 5737/3849) that no real address is in: replace the "
                    f"sample value with {wanted}",
                )
            )
        else:
            ranges.append(str(net))
    return ranges, problems


def storage_class_missing(cluster: Cluster, storage_class: object, has_default: bool) -> str | None:
    """Why the stack must name ``gpu-fleet:storageClass``, or None: the central Prometheus keeps its data on a
    volume, and where the cluster has no default StorageClass (Magnum, existing clusters) the volume and Prometheus
    would stay Pending."""
    if not cluster.central or storage_class or has_default:
        return None
    key = f"{NAMESPACE}:storageClass"
    return (
        f"required on {cluster.name}: the central Prometheus needs a volume and {cluster.facts.title} makes no "
        f"default StorageClass; set one: pulumi config set --stack {cluster.name} {key} <class>"
    )


@dataclass(frozen=True)
class StackSettings:
    """What a stack's config file says beyond the policy file (site-specific, per stack)."""

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
    # The central's Grafana admin password (secret; None: a generated one) and Alertmanager receiver (secret
    # JSON text of one Alertmanager `receivers` entry; None: alerts reach no one, with a warning).
    # The pull-request preview identity as this cluster knows it (GKE: its service account's email; AKS: its object
    # id; EKS: its IAM role ARN; existing: its Kubernetes user name): it may dry-run, nothing more.
    preview_principal: str | None = None
    # Cloud-specific keys, read here with the others and checked by their cluster component: EKS subnets or zones,
    # the Magnum site settings (a mapping), the existing cluster's kubeconfig (a secret; None when not set as one).
    subnet_ids: Any = None
    availability_zones: Any = None
    magnum: Any = None
    kubeconfig: pulumi.Output[str] | None = field(default=None, repr=False)
    grafana_admin_password: pulumi.Output[str] | None = field(default=None, repr=False)
    alert_receiver: pulumi.Output[str] | None = field(default=None, repr=False)

    @staticmethod
    def read() -> StackSettings:
        """Read the ``gpu-fleet:*`` keys of the current stack; every problem at once as an ``InputError``."""
        cfg = pulumi.Config(NAMESPACE)
        problems: list[Problem] = []
        ranges_key = f"{NAMESPACE}:federationSourceRanges"
        ranges, range_problems = check_source_ranges(config_value(cfg, "federationSourceRanges"))
        problems += [config_problem(ranges_key, msg, *where) for where, msg in range_problems]
        api_key = f"{NAMESPACE}:apiAllowedCidrs"
        api_cidrs, api_problems = check_source_ranges(config_value(cfg, "apiAllowedCidrs"), API_RANGES)
        problems += [config_problem(api_key, msg, *where) for where, msg in api_problems]
        private = config_value(cfg, "privateApiEndpoint")
        flags: dict[str, bool] = {}
        for flag, default in (("privateApiEndpoint", False), ("publicNodes", False), ("auditLogs", True),
                              ("autoUpgrade", True)):  # fmt: skip
            value = config_value(cfg, flag)
            if value is not None and str(value).lower() not in ("true", "false"):
                problems.append(config_problem(f"{NAMESPACE}:{flag}", "must be true or false"))
            flags[flag] = default if value is None else str(value).lower() == "true"
        for secret_key in ("grafanaAdminPassword", "alertReceiver"):
            key = f"{NAMESPACE}:{secret_key}"
            problems += [
                config_problem(key, plain_secret_message(key, leaf), *leaf) for leaf in plain_in_stack_file(key)
            ]
        storage_class = cfg.get("storageClass")
        if storage_class is not None and not storage_class.strip():
            problems.append(config_problem(f"{NAMESPACE}:storageClass", "must name a StorageClass"))
        secrets: dict[str, dict[str, str]] = {}
        tokens: dict[str, str] = {}
        for name, read in ((WORKLOAD_SECRETS, _workload_secrets), (RUNNER_TOKENS, _runner_tokens)):
            secrets_key = f"{NAMESPACE}:{name}"
            try:
                value = read(config_value(cfg, name))
            except ValueError as exc:
                problems.append(config_problem(secrets_key, str(exc)))
                continue
            problems += [
                config_problem(secrets_key, plain_secret_message(secrets_key, leaf), *leaf)
                for leaf in plain_in_stack_file(secrets_key)
            ]
            if name == WORKLOAD_SECRETS:
                secrets = value
            else:
                tokens = value
        if problems:
            raise InputError(problems)
        return StackSettings(
            policy_file=cfg.get("policyFile"),
            workloads_dir=cfg.get("workloadsDir"),
            protect=cfg.get_bool("protect") is not False,
            stack_reference_prefix=cfg.get("stackReferencePrefix") or "organization/gpu-fleet",
            federation_source_ranges=ranges,
            storage_class=storage_class,
            workload_secrets=secrets,
            runner_tokens=tokens,
            api_allowed_cidrs=api_cidrs,
            private_api_endpoint=str(private).lower() == "true",
            public_nodes=flags["publicNodes"],
            audit_logs=flags["auditLogs"],
            auto_upgrade=flags["autoUpgrade"],
            preview_principal=(cfg.get("previewPrincipal") or "").strip() or None,
            subnet_ids=config_value(cfg, "subnetIds"),
            availability_zones=config_value(cfg, "availabilityZones"),
            magnum=config_value(cfg, "magnum"),
            kubeconfig=cfg.get_secret("kubeconfig") if is_config_secret(f"{NAMESPACE}:kubeconfig") else None,
            grafana_admin_password=cfg.get_secret("grafanaAdminPassword"),
            alert_receiver=cfg.get_secret("alertReceiver"),
        )


def _require_secret(name: str, each: str) -> str:
    """The key of ``gpu-fleet:<name>``; ``ValueError`` with the command to set it when it is not secret config."""
    key = f"{NAMESPACE}:{name}"
    if not is_config_secret(key):
        raise ValueError(
            f"holds credentials in plain text in the stack file: remove it and set each value with "
            f"pulumi config set --secret --path '{key}.{each}' <value>"
        )
    return key


def _runner_tokens(value: Any) -> dict[str, str]:
    """``gpu-fleet:runnerTokens``, checked: a secret mapping of card -> runner authentication token."""
    if value is None:
        return {}
    _require_secret(RUNNER_TOKENS, "<card>")
    if not isinstance(value, dict) or not all(isinstance(v, str) and v.strip() for v in value.values()):
        raise ValueError("must map each card to its runner's authentication token (a string)")
    return {str(card): token.strip() for card, token in value.items()}


def _workload_secrets(value: Any) -> dict[str, dict[str, str]]:
    """``gpu-fleet:workloadSecrets``, checked: a secret mapping of workload -> {variable: value}."""
    if value is None:
        return {}
    _require_secret(WORKLOAD_SECRETS, "<workload>.<VARIABLE>")
    if not isinstance(value, dict) or not all(
        isinstance(vars_, dict) and all(isinstance(v, str) for v in vars_.values()) for vars_ in value.values()
    ):
        raise ValueError("must map each workload to {VARIABLE: value} (strings)")
    return {str(w): {str(k): v for k, v in vars_.items()} for w, vars_ in value.items()}
