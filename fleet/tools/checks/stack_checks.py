"""Checks of the stack files (``stacks/Pulumi.<cluster>.yaml``) against their clusters, before anything is planned.

Each ``gpu-fleet:*`` setting is checked against its declaration (``fleet.model.core.stack_settings``), as the program
checks it when it runs (``fleet.program.settings``, ``MagnumSettings``); these checks read the files themselves, so
``validate`` and ``plan`` point at the line: YAML and encoding errors, keys a cloud requires, types, CIDR ranges, plain
text where a secret belongs, and (as warnings) values left from the sample files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.model.core.clouds import cloud_rules
from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.fleet import Fleet
from fleet.model.core.stack_settings import (
    CONFIG_NAMESPACE,
    PLAIN_KINDS,
    STACK_SETTINGS,
    decode_config_text,
    parse_value,
    plain_secret_message,
    storage_class_missing,
)
from fleet.model.core.yaml_source import YamlDocument, read_yaml
from fleet.model.queues.checks import managed_by_problem
from fleet.program.stack_config import is_secure, malformed_secure, plain_leaves, stack_file, stack_names

# What a Magnum manager below Kubernetes 1.32 is told to set (fleet/model/queues/settings.py MANAGED_BY_MIN_KUBERNETES):
# a published hyperkube tag of 1.32 (rancher/hyperkube pull request 411 "[v1.32] Add Kubernetes version v1.32.6",
# merged 2025-06-27; the image is pushed to Docker Hub on tag, rancher/hyperkube README) and a cluster-autoscaler of the
# same minor (components/kubernetes/images.yaml autoscaler_images "1.32"), which autoscaler_minor_problem requires.
MANAGER_KUBE_TAG = "v1.32.6-rancher1"
MANAGER_AUTOSCALER_TAG = "v1.32.7"
# Keys a cloud's component cannot do without (they have no sensible default).
REQUIRED: dict[str, tuple[str, ...]] = {
    "gcp": ("gcp:project",),
    "azure": ("azure-native:subscriptionId",),
    "openstack": (f"{CONFIG_NAMESPACE}:magnum",),
    "existing": (f"{CONFIG_NAMESPACE}:kubeconfig",),
}
# The top-level keys of a stack file (pulumi/pulumi sdk/go/common/workspace/project.go, ProjectStack: secretsprovider,
# encryptedkey, encryptionsalt, config, environment); anything else the CLI ignores without a word.
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")
# Every resource gets an explicit provider; with default providers disabled a forgotten one fails instead of
# deploying with the ambient credentials and kubeconfig (docs/security.md; Pulumi docs "Disabling default providers").
DISABLE_DEFAULT_PROVIDERS = "pulumi:disable-default-providers"
# Values the sample stack files carry that are nobody's real project or subscription.
PLACEHOLDERS = {"my-gcp-project", "00000000-0000-0000-0000-000000000000", "changeme", "example", "todo"}


# The cloud identifiers a stack file names, by their published shape (a wrong one fails only at `pulumi up`):
# * gcp:project: "must start with a lowercase letter and can have lowercase ASCII letters, digits or hyphens ...
#   between 6 and 30 characters" (gcloud reference, `gcloud projects create` PROJECT_ID,
#   https://cloud.google.com/sdk/gcloud/reference/projects/create), no hyphen last (Resource Manager v3 Project
#   projectId); a legacy domain-scoped id keeps its `example.com:` prefix;
# * azure-native:subscriptionId: "a GUID-formatted string (e.g. 00000000-0000-0000-0000-000000000000)" (Azure
#   PowerShell, IWebsitesIdentity.SubscriptionId, learn.microsoft.com).
IDENTIFIERS: dict[str, tuple[re.Pattern[str], str]] = {
    "gcp:project": (
        re.compile(r"^(?:[a-z0-9.-]+\.[a-z]{2,}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$"),
        "a Google Cloud project id: 6 to 30 lowercase letters, digits or hyphens, a letter first and no hyphen last, "
        "such as my-gpu-fleet-123 (gcloud projects list shows yours)",
    ),
    "azure-native:subscriptionId": (
        re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"),
        "an Azure subscription id, a GUID such as 6a1c2f3e-4b5d-4e6f-8a9b-0c1d2e3f4a5b (az account list shows yours)",
    ),
}


@dataclass
class StackReport:
    """Problems (refuse to plan) and warnings (plan, but say so) of the stack files."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _StackChecker:
    """The checks of one stack file; every finding located in it."""

    def __init__(self, cluster: Cluster, doc: YamlDocument, has_default_storage_class: bool, report: StackReport):
        self.cluster, self.doc, self.has_default, self.report = cluster, doc, has_default_storage_class, report

    def problem(self, keys: tuple[object, ...], message: str) -> None:
        self.report.problems.append(self.doc.problem(("config", *keys), message))

    def warn(self, keys: tuple[object, ...], message: str) -> None:
        self.report.warnings.append(str(self.doc.problem(("config", *keys), message)))

    def run(self) -> None:
        data = self.doc.data if self.doc.data is not None else {}
        if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict):
            self.report.problems.append(self.doc.problem(("config",), "must be a mapping of config keys"))
            return
        for key in data:
            if key not in STACK_FILE_KEYS:
                self.report.problems.append(
                    self.doc.problem(
                        (key,),
                        f"unknown top-level key of a stack file{did_you_mean(key, STACK_FILE_KEYS)} (Pulumi reads "
                        f"{', '.join(STACK_FILE_KEYS)}; the settings go under config:, such as config: "
                        "{gcp:project: my-project})",
                    )
                )
        config: dict[str, Any] = data.get("config") or {}
        for key in REQUIRED.get(self.cluster.cloud, ()):
            if key not in config:
                self.problem((key,), f"required for a {self.cluster.cloud} cluster: pulumi config set {key} <value>")
        self.check_default_providers(config)
        for key, value in config.items():
            if not isinstance(key, str) or ":" not in key:
                self.problem((key,), "config keys are namespaced, such as gcp:project")
                continue
            for where in malformed_secure(value):
                self.problem(
                    (key, *where),
                    "`secure:` holds the encrypted text `pulumi config set --secret` writes (a string such as "
                    f"v1:AAAA...), alone in its mapping: set it again with pulumi config set --secret {key} <value>",
                )
            namespace, name = key.split(":", 1)
            if isinstance(value, str) and value.strip().lower() in PLACEHOLDERS:
                self.warn((key,), f"{value!r} is the sample's placeholder: set your own before `pulumi up`")
            if namespace == CONFIG_NAMESPACE:
                self.check_setting(key, name, value)
            if key in IDENTIFIERS and not is_secure(value):
                pattern, expected = IDENTIFIERS[key]
                if not (isinstance(value, str) and pattern.match(value)):
                    self.problem((key,), f"{value!r} is not {expected}")
            self.check_location(key, value)
        storage_class = config.get(f"{CONFIG_NAMESPACE}:storageClass")
        missing = storage_class_missing(self.cluster, storage_class, self.has_default)
        if missing:
            self.problem((f"{CONFIG_NAMESPACE}:storageClass",), missing)

    def check_default_providers(self, config: dict[str, Any]) -> None:
        """``pulumi:disable-default-providers: ["*"]``: a resource without its explicit provider fails to deploy."""
        fix = f'add {DISABLE_DEFAULT_PROVIDERS}: ["*"] under config: (every resource of the fleet has its provider)'
        if DISABLE_DEFAULT_PROVIDERS not in config:
            self.problem((DISABLE_DEFAULT_PROVIDERS,), f"missing: {fix}")
            return
        value = decode_config_text(config[DISABLE_DEFAULT_PROVIDERS])
        if not (isinstance(value, list) and "*" in value):
            self.problem((DISABLE_DEFAULT_PROVIDERS,), f'must be ["*"], not {value!r}: {fix}')

    def check_location(self, key: str, value: Any) -> None:
        """A provider's region or zone in the stack file is the policy's, or it is a problem (it would be ignored):
        the cluster components take the location from the policy (fleet/model/core/clouds: stack_location_keys)."""
        cluster = self.cluster
        rules = cloud_rules(cluster.cloud)
        field_name = rules.stack_location_keys.get(key)
        if field_name is None:
            return
        wanted = getattr(cluster, field_name)
        if field_name == "region":
            wanted = rules.region_of(cluster.region, cluster.zone)
        if wanted is None or value != wanted:
            said = f"says {wanted!r}" if wanted else f"gives no {field_name}"
            self.problem(
                (key,),
                f"{value!r} contradicts the policy, which {said} for {cluster.name} (clusters.{cluster.cloud}."
                f"{cluster.name}.{field_name}); the cluster is built where the policy says: remove {key} here",
            )

    def check_setting(self, key: str, name: str, value: Any) -> None:
        """A ``gpu-fleet:*`` value against its declaration (``fleet.model.core.stack_settings.STACK_SETTINGS``)."""
        setting = STACK_SETTINGS.get(name)
        if setting is None:
            known = sorted(n for n, s in STACK_SETTINGS.items() if s.applies_to(self.cluster.cloud))
            self.problem(
                (key,),
                f"unknown setting{did_you_mean(name, known, f'{CONFIG_NAMESPACE}:')} (known for {self.cluster.cloud}: "
                f"{', '.join(known)})",
            )
            return
        if not setting.applies_to(self.cluster.cloud):
            self.problem((key,), f"only for {', '.join(sorted(setting.clouds or ()))} clusters ({setting.description})")
            return
        kind = setting.kind
        if kind == "secret":
            if not is_secure(value):
                self.problem((key,), f"must be a secret, not plain text in the file: pulumi config set --secret {key}")
        elif kind == "secret-map":
            for leaf in plain_leaves(value):
                self.problem((key, *leaf), plain_secret_message(key, leaf))
        elif kind in PLAIN_KINDS:
            for where, message in parse_value(setting, value)[1]:
                self.problem((key, *where), message)
        elif kind == "magnum":
            from components.clusters.magnum import MagnumSettings

            for where, message in MagnumSettings.problems(value):
                self.problem((key, *where), message)


def check_stacks(fleet: Fleet, stacks_dir: Path) -> StackReport:
    """Every stack file of the fleet's clusters checked; a cluster without one is a problem, a stack file without a
    cluster a warning (its cluster keeps existing, protected, until someone destroys it on purpose)."""
    from components.clusters.cluster import GpuCluster

    report = StackReport()
    for name in stack_names(stacks_dir):
        if name not in fleet.clusters:
            report.warnings.append(
                f"{stack_file(name, stacks_dir)}:1: stack {name!r} has no cluster in {fleet.file}; "
                "`pulumi up` on it will refuse to run"
            )
    for cluster in fleet.clusters.values():
        path = stack_file(cluster.name, stacks_dir)
        if not path.exists():
            report.problems.append(Problem(str(path), 1, "", "missing: every cluster needs its stack config file"))
            continue
        try:
            doc = read_yaml(path)
        except InputError as exc:
            report.problems.extend(exc.problems)
            continue
        has_default = GpuCluster.for_cloud(cluster.cloud).has_default_storage_class(cluster)
        _StackChecker(cluster, doc, has_default, report).run()
        if fleet.dispatch is not None and cluster.name == fleet.dispatch.manager:
            report.problems.extend(check_manager_kubernetes(fleet, cluster, doc))
    return report


def check_manager_kubernetes(fleet: Fleet, cluster: Cluster, doc: YamlDocument) -> list[Problem]:
    """The queues' manager runs a Kubernetes that keeps a Job's ``managedBy`` (``managed_by_problem``): located at the
    stack file's ``kubeTag`` on Magnum, else at the policy's ``kubernetes_version`` the cluster takes."""
    from components.clusters.version_tags import tag_minor
    from fleet.model.policy_file.schema import DEFAULT_KUBERNETES_VERSION

    if cloud_rules(cluster.cloud).kubernetes_version_from_stack:
        config = doc.data.get("config") if isinstance(doc.data, dict) else None
        magnum = config.get(f"{CONFIG_NAMESPACE}:magnum") if isinstance(config, dict) else None
        tag = magnum.get("kubeTag") if isinstance(magnum, dict) else None
        if not isinstance(tag, str):  # missing: the Magnum settings' own check says so
            return []
        problem = managed_by_problem(cluster.name, tag_minor(tag), f"kubeTag {tag}")
        fix = (
            f"set a newer kubeTag, such as kubeTag: {MANAGER_KUBE_TAG} with autoscalerTag: {MANAGER_AUTOSCALER_TAG} "
            "(the autoscaler's minor is the cluster's), a tag your Magnum driver can pull"
        )
        where_tag = ("config", f"{CONFIG_NAMESPACE}:magnum", "kubeTag")
        return [doc.problem(where_tag, f"{problem}: {fix}")] if problem else []
    version = cluster.kubernetes_version
    problem = managed_by_problem(cluster.name, tag_minor(version), f"kubernetes_version {version}")
    if not problem:
        return []
    policy = read_yaml(fleet.file)
    own = (((policy.data or {}).get("clusters") or {}).get(cluster.cloud) or {}).get(cluster.name) or {}
    where: tuple[object, ...] = ("defaults", "kubernetes_version")
    if isinstance(own, dict) and "kubernetes_version" in own:
        where = ("clusters", cluster.cloud, cluster.name, "kubernetes_version")
    return [policy.problem(where, f'{problem}: raise kubernetes_version, such as "{DEFAULT_KUBERNETES_VERSION}"')]
