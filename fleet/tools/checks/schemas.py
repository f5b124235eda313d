"""Check Kubernetes objects against the upstream schemas, strictly (an unknown field is an error).

Built-in kinds go to the OpenAPI schema of the cluster's own Kubernetes version that ``kubernetes-validate`` ships
(``strict=True``: its ``-strict`` schemas, which refuse unknown fields). Custom resources (PodMonitor, Prometheus,
Kueue's queues, TrainJob ...) go to the ``openAPIV3Schema`` of their upstream CustomResourceDefinition, version by
version, read from a folder of CRD files (``$GPU_FLEET_CRDS``, by default ``../shared/k8s/crds`` beside the
repository). A CRD schema is made strict the way the API server prunes: every object schema with ``properties``
refuses other fields unless it keeps unknown fields (``x-kubernetes-preserve-unknown-fields``) or says what its
other fields are (``additionalProperties``). A custom resource's ``metadata`` is the API server's ObjectMeta, as for
any kind: it is checked against the cluster's strict ObjectMeta schema (a CRD's schema says only ``type: object``
there). Plain JSON Schema ignores the ``x-kubernetes-*`` keywords and CEL rules, which are not checked here.

``kubernetes-validate``'s schemas are made from each Kubernetes release's OpenAPI document (``api/openapi-spec``,
the ``.0`` release of every minor) by openapi2jsonschema; the cluster's minor must be one of them: a newer or older
cluster is refused rather than checked against another version's API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from fleet.tools.checks.charts import CRD_KIND, kube_version, load_all

CRDS_ENV = "GPU_FLEET_CRDS"
PRESERVE = "x-kubernetes-preserve-unknown-fields"


def strict_schema(schema: Any, top: bool = True) -> Any:
    """A copy of a CRD's ``openAPIV3Schema`` that refuses unknown fields, as the API server prunes them."""
    if isinstance(schema, list):
        return [strict_schema(s, False) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                name: ({"type": "object"} if top and name == "metadata" else strict_schema(sub, False))
                for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not"):
            out[key] = strict_schema(value, False)
        elif key == "pattern" and isinstance(value, str):
            out[key] = python_pattern(value)
        else:
            out[key] = value
    if "properties" in out and not out.get(PRESERVE) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def python_pattern(pattern: str) -> str:
    """A CRD's ``pattern`` (Go RE2, which takes inline flags anywhere: Kueue's AdmissionCheck ``kind`` is
    ``^(?i)[a-z]...``) as Python's ``re`` takes it: the global flags moved to the front."""
    flags = re.findall(r"\(\?[aiLmsux]+\)", pattern)
    if not flags or pattern.startswith(flags[0]):
        return pattern
    return "".join(flags) + re.sub(r"\(\?[aiLmsux]+\)", "", pattern)


def _api_group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def is_builtin(api_version: str) -> bool:
    """Whether ``api_version`` belongs to Kubernetes itself (core, ``apps``, ``*.k8s.io`` but not ``*.x-k8s.io``)."""
    group = _api_group(api_version)
    return "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


@dataclass
class CrdSchemas:
    """The strict schema of every served version of a folder's CRDs, by (apiVersion, kind)."""

    schemas: dict[tuple[str, str], dict[str, Any]]
    # served versions the CRD marks ``deprecated: true``, with its ``deprecationWarning`` ("" when it gives none)
    deprecated_versions: dict[tuple[str, str], str] = field(default_factory=dict)
    _validators: dict[tuple[str, str], Any] = field(default_factory=dict)

    @staticmethod
    def from_objects(crds: Iterable[dict[str, Any]]) -> CrdSchemas:
        """From CRD objects (files, or what a chart renders)."""
        schemas, deprecated = {}, {}
        for crd in crds:
            if crd.get("kind") != CRD_KIND:
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                if version.get("served", True) and schema:
                    schemas[key] = schema
                if version.get("served", True) and version.get("deprecated"):
                    deprecated[key] = version.get("deprecationWarning") or ""
        return CrdSchemas(schemas, deprecated)

    def knows(self, obj: dict[str, Any]) -> bool:
        """Whether a CRD of this set defines ``obj``'s apiVersion and kind."""
        return (obj.get("apiVersion", ""), obj.get("kind", "")) in self.schemas

    def errors(self, obj: dict[str, Any]) -> list[str]:
        """Where ``obj`` breaks its CRD's strict schema (``path: message``); [] when it fits."""
        import jsonschema  # the checker check-jsonschema installs

        key = (obj.get("apiVersion", ""), obj.get("kind", ""))
        if key not in self._validators:
            self._validators[key] = jsonschema.Draft4Validator(strict_schema(self.schemas[key]))
        return _located(self._validators[key].iter_errors(obj))

    def deprecated(self, obj: dict[str, Any]) -> list[str]:
        """What ``obj`` uses that its CRD deprecates: its version (``deprecated: true``, as Kueue's v1beta1 at 0.19.2)
        and the fields whose description has kubebuilder's ``Deprecated:`` line (prometheus-operator's
        ``bearerTokenFile``), as ``path: what the CRD says``; [] when none."""
        key = (obj.get("apiVersion", ""), obj.get("kind", ""))
        if key not in self.schemas:
            return []
        found = []
        if key in self.deprecated_versions:
            warning = self.deprecated_versions[key] or f"{key[0]} {key[1]} is deprecated"
            found.append(f"apiVersion: the CRD deprecates {key[0]}: {warning}")
        return found + list(_deprecated(obj, self.schemas[key], ()))


def _deprecated(value: Any, schema: dict[str, Any], path: tuple[str, ...]) -> Iterable[str]:
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            sub = schema["properties"].get(key)
            if sub is None:
                continue
            where = (*path, str(key))
            notes = [line.strip() for line in sub.get("description", "").splitlines() if "Deprecated:" in line]
            if notes:
                yield f"{'.'.join(where)}: {notes[0]}"
            yield from _deprecated(item, sub, where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _deprecated(item, schema["items"], (*path, str(i)))


@lru_cache(maxsize=4)
def load_crds(folder: Path) -> CrdSchemas:
    """The CRDs of every ``*.yaml`` file of ``folder``."""
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no CRD files (*.yaml) in {folder} (set {CRDS_ENV})")
    return CrdSchemas.from_objects(doc for f in files for doc in load_all(f.read_text(encoding="utf-8")) if doc)


@lru_cache(maxsize=8)
def _schema_folder(kubernetes_version: str) -> str:
    """kubernetes-validate's strict schema folder for the cluster's own minor (its ``.0`` release's API); a minor it
    does not ship is an error, not another version's schema."""
    from kubernetes_validate import utils

    wanted = utils.major_minor(kube_version(kubernetes_version).removeprefix("v"))
    shipped = sorted({utils.major_minor(v) for v in utils.all_versions()}, key=utils.Version)
    if wanted not in shipped:
        raise ValueError(
            f"kubernetes-validate ships no schema for Kubernetes {wanted} (it has {shipped[0]} to {shipped[-1]}): "
            "upgrade it, or check the cluster's version"
        )
    return f"kubernetes-json-schema/v{wanted}.0-local-strict"


@lru_cache(maxsize=512)
def _builtin_validator(folder: str, api_version: str, kind: str) -> Any:
    """A validator of one built-in kind, made once: ``kubernetes_validate.validate`` reads and compiles the schema
    and its 5 MB of definitions on every call, far too slow for thousands of objects. Same files, same
    draft and references as it uses."""
    import jsonschema
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # rbac.authorization.k8s.io/v1 -> rbac-v1
    try:
        schema = utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", folder)
    except FileNotFoundError:
        return None
    registry = Resource.from_contents(schema) @ Registry()
    registry = _definitions(folder) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@lru_cache(maxsize=8)
def _definitions(folder: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Resource

    return Resource.from_contents(utils.schema_contents(f"{folder}/_definitions.json", folder))


OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@lru_cache(maxsize=8)
def _object_meta_validator(folder: str) -> Any:
    """The cluster's strict ObjectMeta (what every object's ``metadata`` is, a custom resource's too)."""
    import jsonschema
    from referencing import Registry

    definitions = _definitions(folder)
    schema = {"$ref": f"{definitions.id()}#/$defs/{OBJECT_META}"}
    return jsonschema.validators.Draft202012Validator(schema, registry=definitions @ Registry())


def _located(errors: Iterable[Any], prefix: tuple[str, ...] = ()) -> list[str]:
    found = sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in (*prefix, *e.absolute_path)) or '(top)'}: {e.message}" for e in found]


def schema_errors(obj: dict[str, Any], kubernetes_version: str, crds: CrdSchemas) -> list[str]:
    """Where ``obj`` breaks the upstream schema of its kind on a cluster of ``kubernetes_version`` (``1.33``,
    ``v1.28.9-rancher1``): its CRD's for a custom resource, the cluster's strict OpenAPI schema (kubernetes-validate)
    for a built-in kind; [] when it fits."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    if crds.knows(obj):
        meta = _object_meta_validator(_schema_folder(kubernetes_version)).iter_errors(obj.get("metadata") or {})
        return crds.errors(obj) + _located(meta, ("metadata",))
    if not is_builtin(api_version):
        return [f"no CRD defines {api_version} {kind}"]
    validator = _builtin_validator(_schema_folder(kubernetes_version), api_version, kind)
    if validator is None:
        return [f"Kubernetes {kubernetes_version} has no {api_version} {kind}"]
    return _located(validator.iter_errors(obj))
