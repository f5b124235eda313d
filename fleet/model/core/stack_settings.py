"""The ``gpu-fleet:*`` stack settings, each declared once: its kind, the clouds it is for, its default, its meaning.

Everything else comes from this table: the settings the components take (``components.settings.ComponentSettings``,
a dataclass made from it, one field per setting), what the program reads into them (``fleet.program.settings``),
what ``validate`` checks in the stack files (``fleet.tools.checks.stack_checks``), Pulumi.yaml's ``config:`` block
(``project_file_text``) and the stack-settings part of the reference page (``fleet.tools.reference``). No Pulumi
here: the tools read it without a Pulumi run.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from fleet.model.core.clusters import Cluster

CONFIG_NAMESPACE = "gpu-fleet"
WORKLOAD_SECRETS = "workloadSecrets"
RUNNER_TOKENS = "runnerTokens"
FEDERATION_CERTIFICATES = "federationCertificates"
#: The PEM parts of gpu-fleet:federationCertificates: the CA that signs both, the gateway's serving certificate (its
#: name components.kubernetes.gateway.server_name) and the central Prometheus' client certificate.
FEDERATION_CERTIFICATE_PARTS = ("caCert", "serverCert", "serverKey", "clientCert", "clientKey")
STAND_IN_KUBECONFIG = "standInKubeconfig"
API_RANGES = "the ranges of the people and CI runners that run kubectl and pulumi"
EGRESS_RANGES = "the central cluster's egress ranges"

# What kind of value a setting takes: a string, true/false, a list of strings or of CIDR ranges, a secret string, a
# mapping whose leaves are secrets (set with --secret --path), or the Magnum site settings (checked by
# components/clusters/magnum.py MagnumSettings).
Kind = Literal["string", "bool", "string-list", "cidr-list", "secret", "secret-map", "magnum"]
# Pulumi's project config types (pulumi/pulumi sdk/go/common/workspace/project.json, configTypeDeclaration: string,
# integer, boolean, array); a mapping has none.
PULUMI_TYPES: dict[str, str] = {
    "string": "string",
    "bool": "boolean",
    "secret": "string",
    "string-list": "array",
    "cidr-list": "array",
}


@dataclass(frozen=True)
class StackSetting:
    """One ``gpu-fleet:<name>`` stack setting."""

    name: str
    kind: Kind
    description: str
    clouds: frozenset[str] | None = None  # None: every cloud
    default: Any = None  # what the program uses when the stack does not set it (None: nothing)
    ranges_of: str = ""  # cidr-list: whose ranges belong here (said in each problem)
    each: str = ""  # secret-map: the path of one value below the key, for `pulumi config set --secret --path`

    @property
    def key(self) -> str:
        """The full config key, such as ``gpu-fleet:protect``."""
        return f"{CONFIG_NAMESPACE}:{self.name}"

    @property
    def attribute(self) -> str:
        """The field of ``ComponentSettings`` (and so of the program's ``StackSettings``) holding its value: the name
        in snake case (``protect``, ``stack_reference_prefix``)."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()

    def applies_to(self, cloud: str) -> bool:
        """Whether a cluster of ``cloud`` may set it."""
        return self.clouds is None or cloud in self.clouds

    def declaration(self) -> dict[str, Any] | None:
        """This setting as Pulumi.yaml declares project config (pulumi/pulumi sdk/go/common/workspace/project.json:
        a type of string, integer, boolean or array, arrays with `items`, an optional default, description and
        secret), or None for a mapping, which that schema cannot type, and for a setting without a default: the CLI
        requires every key of the project's own namespace that Pulumi.yaml declares without one (pulumi/pulumi
        pkg/v3 v3.274.0 workspace/config.go, "Stack '...' is missing configuration values"), and ours are
        optional (found by the real tier: every stack's preview failed so)."""
        if self.kind not in PULUMI_TYPES or self.default is None:
            return None
        where = f" ({', '.join(sorted(self.clouds))} clusters)" if self.clouds else ""
        out: dict[str, Any] = {"type": PULUMI_TYPES[self.kind], "description": f"{self.description}{where}"}
        if out["type"] == "array":
            out["items"] = {"type": "string"}
        if self.kind == "secret":
            out["secret"] = True
        if self.default is not None:
            out["default"] = self.default
        return out


_CLOUDS_WITH_API_ENDPOINT = frozenset({"gcp", "aws", "azure", "openstack"})

STACK_SETTINGS: dict[str, StackSetting] = {
    s.name: s
    for s in (
        StackSetting(
            "stackReferencePrefix",
            "string",
            "<org>/<project> of the stacks the central one references",
            default="organization/gpu-fleet",
        ),
        StackSetting("federationSourceRanges", "cidr-list", EGRESS_RANGES, ranges_of=EGRESS_RANGES),
        StackSetting("protect", "bool", "protect the cluster against deletion", default=True),
        StackSetting("storageClass", "string", "StorageClass of the central Prometheus volume"),
        StackSetting(
            WORKLOAD_SECRETS,
            "secret-map",
            "workload credentials, set with --secret --path",
            each="<workload>.<VARIABLE>",
        ),
        StackSetting(
            RUNNER_TOKENS,
            "secret-map",
            "GitLab runner authentication tokens by card, set with --secret --path",
            each="<card>",
        ),
        StackSetting("policyFile", "string", "another policy file than policy/fleet.yaml"),
        StackSetting("workloadsDir", "string", "another workloads folder than workloads/"),
        StackSetting("magnum", "magnum", "Magnum site settings", frozenset({"openstack"})),
        StackSetting("kubeconfig", "secret", "the existing cluster's kubeconfig", frozenset({"existing"})),
        StackSetting("subnetIds", "string-list", "existing subnets instead of a new VPC", frozenset({"aws"})),
        StackSetting(
            "apiAllowedCidrs",
            "cidr-list",
            "who may reach the cluster's API endpoint",
            _CLOUDS_WITH_API_ENDPOINT,
            ranges_of=API_RANGES,
        ),
        StackSetting(
            "openApiEndpoint",
            "bool",
            "without apiAllowedCidrs, an API endpoint open to every address (closed by default where the cloud can "
            "close it: EKS private, GKE no authorised network; a deploy refuses it)",
            _CLOUDS_WITH_API_ENDPOINT,
            default=False,
        ),
        StackSetting(
            "privateApiEndpoint",
            "bool",
            "an API endpoint inside the network only",
            frozenset({"gcp", "aws", "azure"}),
            default=False,
        ),
        StackSetting(
            "publicNodes",
            "bool",
            "opt out of private nodes: nodes with public addresses, no Cloud NAT",
            frozenset({"gcp"}),
            default=False,
        ),
        StackSetting(
            "auditLogs",
            "bool",
            "the API server's kube-audit-admin log to a Log Analytics workspace",
            frozenset({"azure"}),
            default=True,
        ),
        StackSetting(
            "autoUpgrade",
            "bool",
            "patch-version auto-upgrade and node-image updates of the cluster",
            frozenset({"azure"}),
            default=True,
        ),
        StackSetting(
            "previewPrincipal",
            "string",
            "the preview identity, limited to dry runs",
            frozenset({"gcp", "aws", "azure", "existing"}),
        ),
        StackSetting("grafanaAdminPassword", "secret", "the central Grafana's admin password"),
        StackSetting("alertReceiver", "secret", "the central Alertmanager's receiver (JSON), set with --secret"),
        StackSetting("availabilityZones", "string-list", "zones of the new VPC's subnets", frozenset({"aws"})),
        StackSetting(
            "multikueueToken",
            "secret",
            "a queue worker's token for the manager (kubectl create token multikueue -n kueue-system --duration "
            "744h; at most 31 days, rotate it)",
        ),
        StackSetting(
            FEDERATION_CERTIFICATES,
            "secret-map",
            "the federation gateway's certificates from the site's own CA instead of ones the stack makes, set with "
            "--secret --path",
            each="<" + "|".join(FEDERATION_CERTIFICATE_PARTS) + ">",
        ),
        StackSetting(
            "chartCache",
            "string",
            "a folder of the pinned charts' archives (<chart>-<version>.tgz) to install from instead of their "
            "repositories (an air-gapped site's, or the real test tier's ../shared/charts)",
        ),
        StackSetting(
            STAND_IN_KUBECONFIG,
            "secret",
            "a cluster standing in for the cloud's (the real test tier's hollow control plane): no cloud resource "
            "is created and everything in-cluster goes to it",
            frozenset(_CLOUDS_WITH_API_ENDPOINT),
        ),
    )
}


def runner_tokens_value(value: Any) -> dict[str, str]:
    """``gpu-fleet:runnerTokens`` as the program uses it: card -> runner authentication token; ``ValueError`` when it
    is not that shape."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) and v.strip() for v in value.values()):
        raise ValueError("must map each card to its runner's authentication token (a string)")
    return {str(card): token.strip() for card, token in value.items()}


def workload_secrets_value(value: Any) -> dict[str, dict[str, str]]:
    """``gpu-fleet:workloadSecrets`` as the program uses it: workload -> {variable: value}; ``ValueError`` when it is
    not that shape."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(vars_, dict) and all(isinstance(v, str) for v in vars_.values()) for vars_ in value.values()
    ):
        raise ValueError("must map each workload to {VARIABLE: value} (strings)")
    return {str(w): {str(k): v for k, v in vars_.items()} for w, vars_ in value.items()}


# Address ranges that never carry real traffic (RFC 5737, RFC 3849): a sample value left in a stack file.
DOCUMENTATION_RANGES = tuple(
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
# Where a problem lies inside a setting's value (list indexes, mapping keys), and what is wrong.
ValueProblems = list[tuple[tuple[object, ...], str]]


def decode_config_text(value: Any) -> Any:
    """A list or object held as JSON text (how the CLI hands non-string config to a program, and what `pulumi config
    set` without --path writes into the stack file) decoded; any other value as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def check_source_ranges(value: Any, wanted: str = EGRESS_RANGES) -> tuple[list[str], ValueProblems]:
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
    problems: ValueProblems = []
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


def plain_secret_message(key: str, leaf: tuple[object, ...]) -> str:
    """What to say of a plain-text value inside secret config ``key`` (never the value itself)."""
    dotted = ".".join(str(p) for p in (key, *leaf))
    return (
        "plain text where a credential belongs (the value is not shown): remove it and set it with "
        f"pulumi config set --secret --path '{dotted}' <value>"
    )


def storage_class_missing(cluster: Cluster, storage_class: object, has_default: bool) -> str | None:
    """Why the stack must name ``gpu-fleet:storageClass``, or None: the central Prometheus keeps its data on a
    volume, and where the cluster has no default StorageClass (Magnum, existing clusters) the volume and Prometheus
    would stay Pending."""
    if not cluster.central or storage_class or has_default:
        return None
    key = f"{CONFIG_NAMESPACE}:storageClass"
    return (
        f"required on {cluster.name}: the central Prometheus needs a volume and {cluster.facts.title} makes no "
        f"default StorageClass; set one: pulumi config set --stack {cluster.name} {key} <class>"
    )


PLAIN_KINDS = ("string", "bool", "string-list", "cidr-list")


def unset_value(setting: StackSetting) -> Any:
    """What the program uses for a setting the stack does not set: its default, or an empty list or mapping where
    the program iterates over the value."""
    if setting.default is not None:
        return setting.default
    return {"cidr-list": [], "secret-map": {}}.get(setting.kind)


def parse_value(setting: StackSetting, value: Any) -> tuple[Any, ValueProblems]:
    """A set value of a plain kind (string, bool, string-list, cidr-list) as the program uses it, and its problems;
    the same checks for the stack file (``validate``) and the program (``StackSettings.read``)."""
    if setting.kind == "string":
        if isinstance(value, str) and value.strip():
            return value.strip(), []
        return None, [((), f"must be a non-empty string ({setting.description})")]
    if setting.kind == "bool":
        if isinstance(value, bool):
            return value, []
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true", []
        return None, [((), "must be true or false")]
    if setting.kind == "string-list":
        items = decode_config_text(value)
        if isinstance(items, list) and all(isinstance(v, str) for v in items):
            return items, []
        return None, [((), f'must be a list of strings, such as ["a", "b"] ({setting.description})')]
    if setting.kind == "cidr-list":
        return check_source_ranges(decode_config_text(value), setting.ranges_of)
    raise ValueError(f"{setting.key} is a {setting.kind}, not a plain value")


def federation_certificates_value(value: Any) -> dict[str, str]:
    """``gpu-fleet:federationCertificates`` as the program uses it: each of ``FEDERATION_CERTIFICATE_PARTS`` to its
    PEM text, all of them or none; ``ValueError`` when it is not that shape."""
    if value is None:
        return {}
    parts = ", ".join(FEDERATION_CERTIFICATE_PARTS)
    if not isinstance(value, dict):
        raise ValueError(f"must map each of {parts} to its PEM text")
    missing = [p for p in FEDERATION_CERTIFICATE_PARTS if not isinstance(value.get(p), str) or not value[p].strip()]
    unknown = sorted(set(value) - set(FEDERATION_CERTIFICATE_PARTS))
    if missing or unknown:
        said = [f"nothing for {', '.join(missing)}"] if missing else []
        said += [f"unknown parts {', '.join(map(str, unknown))}"] if unknown else []
        raise ValueError(f"{'; '.join(said)}: needs all of {parts}, each a PEM text")
    return {p: value[p] for p in FEDERATION_CERTIFICATE_PARTS}


# The shape of each secret mapping's value, checked by the program once it knows the value is secret.
SECRET_MAP_VALUES = {
    WORKLOAD_SECRETS: workload_secrets_value,
    RUNNER_TOKENS: runner_tokens_value,
    FEDERATION_CERTIFICATES: federation_certificates_value,
}


def project_config() -> dict[str, dict[str, Any]]:
    """The ``config:`` block of Pulumi.yaml: every setting Pulumi's project schema can type, by full key."""
    out = {}
    for setting in STACK_SETTINGS.values():
        declared = setting.declaration()
        if declared is not None:
            out[setting.key] = declared
    return out


PROJECT_CONFIG_MARKER = "# Every gpu-fleet:* stack setting Pulumi's project schema can type"
PROJECT_CONFIG_HEADER = (
    PROJECT_CONFIG_MARKER + " (type, default, description; secrets\n"
    "# marked), so `pulumi config` knows them. Generated from fleet/model/core/stack_settings.py STACK_SETTINGS:\n"
    "# `python -m fleet schema` rewrites it and the tests fail when it is stale. Only the settings with a\n"
    "# default: the CLI requires every gpu-fleet:* key declared here without one (pulumi/pulumi pkg/v3\n"
    "# workspace/config.go), and the others are optional; mappings (gpu-fleet:magnum, ...) the schema\n"
    "# cannot type (pulumi/pulumi sdk/go/common/workspace/project.json). docs/reference.md lists them all.\n"
)


def project_file_text(current: str) -> str:
    """Pulumi.yaml with its ``config:`` block as ``project_config`` says (everything before the block kept)."""
    head = current.split(PROJECT_CONFIG_MARKER, 1)[0].rstrip("\n") + "\n"
    block = yaml.safe_dump({"config": project_config()}, sort_keys=False, width=110)
    return head + PROJECT_CONFIG_HEADER + block
