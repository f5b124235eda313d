"""Every object against the upstream schemas, strictly (fleet/tools/checks/schemas.py): what every stack of every fleet
(the sample, each example, the fixture fleet) hands Kubernetes, and what every chart renders, against the
OpenAPI schema of the cluster's own Kubernetes version and, for custom resources, their upstream CRD."""

from __future__ import annotations

import copy

import pytest

from fleet.tools.checks.schemas import CrdSchemas, is_builtin, schema_errors, strict_schema
from fleet.tools.engine.render import kubernetes_manifest
from tests.tools.conftest import PlannedFleet


def _is_kubernetes_object(reg) -> bool:
    return reg.type.startswith("kubernetes:") and reg.custom and not reg.type.startswith("kubernetes:helm.sh/")


def test_every_object_every_stack_renders_fits_the_upstream_schemas(
    planned_fleets: list[PlannedFleet], crd_schemas: CrdSchemas
):
    bad, custom, builtin = [], 0, 0
    for planned in planned_fleets:
        for stack, plan in planned.plans.items():
            version = planned.kubernetes_version(stack)
            for reg in plan.registrations:
                if not _is_kubernetes_object(reg):
                    continue
                manifest = kubernetes_manifest(reg)
                custom += not is_builtin(manifest["apiVersion"])
                builtin += is_builtin(manifest["apiVersion"])
                bad += [
                    f"{planned.name} {stack}: {manifest['kind']} {reg.name}: {e}"
                    for e in schema_errors(manifest, version, crd_schemas)
                ]
    assert bad == []
    assert custom and builtin  # PodMonitors, Kueue's queues, TrainJobs ... and the built-in kinds


def test_no_object_of_ours_sets_a_field_its_crd_deprecates(planned_fleets: list[PlannedFleet], crd_schemas: CrdSchemas):
    """What the stacks declare (the charts' own objects are upstream's) is written in no version its CRD deprecates
    (Kueue's queues in v1beta2) and sets no field its CRD marks ``Deprecated:``:
    the Kueue ServiceMonitor authenticates through a scrape class, not prometheus-operator's deprecated
    ``bearerTokenFile``."""
    found, checked = [], 0
    for planned in planned_fleets:
        for stack, plan in planned.plans.items():
            for reg in plan.registrations:
                if _is_kubernetes_object(reg) and crd_schemas.knows(manifest := kubernetes_manifest(reg)):
                    checked += 1
                    found += [
                        f"{planned.name} {stack}: {manifest['kind']} {reg.name}: {d}"
                        for d in crd_schemas.deprecated(manifest)
                    ]
    assert found == []
    assert checked


def test_a_deprecated_field_is_found_where_it_is(crd_schemas: CrdSchemas):
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "m", "namespace": "n"},
        "spec": {
            "selector": {},
            "endpoints": [{"port": "https"}, {"port": "https", "bearerTokenFile": "/var/run/secrets/x/token"}],
        },
    }
    (found,) = crd_schemas.deprecated(monitor)
    assert found == "spec.endpoints.1.bearerTokenFile: Deprecated: use `authorization` instead."
    assert crd_schemas.errors(monitor) == []  # deprecated, still valid: the schema check alone cannot see it


def test_every_object_the_charts_render_fits_the_upstream_schemas(
    planned_fleets: list[PlannedFleet], rendered_charts, crd_schemas: CrdSchemas
):
    bad, checked = [], 0
    for planned in planned_fleets:
        for stack in planned.plans:
            version = planned.kubernetes_version(stack)
            for item in rendered_charts[(planned.name, stack)]:
                for obj in item.objects:
                    checked += 1
                    name = (obj.get("metadata") or {}).get("name")
                    bad += [
                        f"{planned.name} {stack}: release {item.release.name}: {obj['kind']} {name}: {e}"
                        for e in schema_errors(obj, version, crd_schemas)
                    ]
    assert bad == []
    assert checked


def _one(planned_fleets: list[PlannedFleet], kind: str) -> dict:
    for planned in planned_fleets:
        for plan in planned.plans.values():
            for reg in plan.registrations:
                if _is_kubernetes_object(reg) and reg.type.endswith(f":{kind}"):
                    return copy.deepcopy(kubernetes_manifest(reg))
    raise AssertionError(f"no {kind} in any fleet")


def test_an_unknown_field_is_refused_by_both_schemas(planned_fleets: list[PlannedFleet], crd_schemas: CrdSchemas):
    monitor = _one(planned_fleets, "PodMonitor")
    assert schema_errors(monitor, "1.33", crd_schemas) == []
    monitor["spec"]["podMetricsEndpoints"][0]["scrapeIntervall"] = "30s"
    assert any("scrapeIntervall" in e for e in schema_errors(monitor, "1.33", crd_schemas))
    deployment = _one(planned_fleets, "Deployment")
    deployment["spec"]["template"]["spec"]["nodeSelectr"] = {}
    assert any("nodeSelectr" in e for e in schema_errors(deployment, "1.33", crd_schemas))


def test_a_kind_the_clusters_version_lacks_is_refused(crd_schemas: CrdSchemas):
    """ValidatingAdmissionPolicy is admissionregistration.k8s.io/v1 from Kubernetes 1.30 on."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {}}
    assert schema_errors(policy, "1.33", crd_schemas) == []
    assert schema_errors(policy, "v1.28.9-rancher1", crd_schemas) != []
    assert schema_errors({"apiVersion": "example.com/v1", "kind": "Thing"}, "1.33", crd_schemas) == [
        "no CRD defines example.com/v1 Thing"
    ]


def test_strictness_keeps_what_the_crd_keeps_open():
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {
                "type": "object",
                "properties": {
                    "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
                    "map": {"type": "object", "additionalProperties": {"type": "string"}},
                    "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
            },
        },
    }
    strict = strict_schema(schema)
    assert strict["additionalProperties"] is False and strict["properties"]["metadata"] == {"type": "object"}
    spec = strict["properties"]["spec"]["properties"]
    assert "additionalProperties" not in spec["open"] and spec["map"]["additionalProperties"] == {"type": "string"}
    assert spec["closed"]["additionalProperties"] is False


def test_a_go_pattern_with_inline_flags_is_read_as_go_reads_it():
    """RE2 takes ``(?i)`` anywhere; Python only at the start (Kueue's AdmissionCheck parameters.kind pattern)."""
    import re

    from fleet.tools.checks.schemas import python_pattern

    pattern = python_pattern("^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$")
    assert re.match(pattern, "MultiKueueConfig") and not re.match(pattern, "9kind")
    assert python_pattern("^[a-z]+$") == "^[a-z]+$"


def test_a_custom_resources_metadata_is_checked_as_the_clusters_object_meta(
    planned_fleets: list[PlannedFleet], crd_schemas: CrdSchemas
):
    """A CRD's schema says only ``metadata: {type: object}``; the API server holds a custom resource's metadata to
    ObjectMeta like any object's, so a misspelt key or a label that is not a string is refused."""
    monitor = _one(planned_fleets, "PodMonitor")
    monitor["metadata"]["label"] = {"app": "x"}
    monitor["metadata"].setdefault("annotations", {})["replicas"] = 2
    assert set(schema_errors(monitor, "1.33", crd_schemas)) == {
        "metadata.annotations.replicas: 2 is not of type 'string', 'null'",
        "metadata: Additional properties are not allowed ('label' was unexpected)",
    }


def test_a_cluster_minor_without_its_own_schema_is_refused_not_checked_against_another(crd_schemas: CrdSchemas):
    """kubernetes-validate ships the ``.0`` API of each minor it knows; a cluster outside them gets no other
    version's schema in its place."""
    from kubernetes_validate import utils

    newest = max((utils.major_minor(v) for v in utils.all_versions()), key=utils.Version)
    major, minor = newest.split(".")
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert schema_errors(config_map, newest, crd_schemas) == []
    with pytest.raises(ValueError, match=rf"no schema for Kubernetes {major}\.{int(minor) + 1} "):
        schema_errors(config_map, f"{major}.{int(minor) + 1}", crd_schemas)


def test_a_deprecated_crd_version_is_found(crd_schemas: CrdSchemas):
    """Kueue 0.19.2 serves v1beta1 beside v1beta2 and marks it ``deprecated: true`` (config/components/crd/bases):
    an object of ours written in it would still be admitted, with a warning, until Kueue stops serving it."""
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}}
    assert crd_schemas.deprecated(flavor) == []
    old = {**flavor, "apiVersion": "kueue.x-k8s.io/v1beta1"}
    (found,) = crd_schemas.deprecated(old)
    assert found.startswith("apiVersion: the CRD deprecates kueue.x-k8s.io/v1beta1")
    assert crd_schemas.errors(old) == []  # served, so the schema check alone cannot see it


def test_every_served_version_of_every_crd_has_a_strict_schema_of_its_own(crd_schemas: CrdSchemas):
    """CRD version by CRD version: each served version's openAPIV3Schema, made strict, is a valid JSON Schema and
    refuses an unknown top-level field; an object is checked against the version it names, not another."""
    import jsonschema

    from fleet.tools.checks.schemas import strict_schema

    versions_of: dict[str, set[str]] = {}
    for (api_version, kind), schema in crd_schemas.schemas.items():
        jsonschema.Draft4Validator.check_schema(strict_schema(schema))
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "unknownField": 1}
        assert any("unknownField" in e for e in crd_schemas.errors(obj)), (api_version, kind)
        versions_of.setdefault(kind, set()).add(api_version)
    assert len(versions_of["ClusterQueue"]) == 2  # Kueue 0.19.2 serves v1beta1 and v1beta2, each checked on its own
