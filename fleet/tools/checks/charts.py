"""Render the upstream Helm charts of a planned stack, offline, as the cluster's Helm would.

Every Helm release a stack plans (``kubernetes:helm.sh/v3:Release``: chart, version, namespace, values) is rendered
from a **chart cache**, a folder of chart archives named ``<chart>-<version>.tgz`` as ``helm pull`` writes them,
with the Helm v4 engine of ``helm-python-sdk`` (no ``helm`` binary, no network), for the cluster's Kubernetes
version and the API versions its charts install (their CRDs). The cache is ``$GPU_FLEET_CHART_CACHE``, by default
``../shared/charts`` beside the repository; a user with network access fills a folder of their own::

    helm pull kube-prometheus-stack --repo https://prometheus-community.github.io/helm-charts --version 79.5.0

``helm-python-sdk`` 0.2.2 renders with ``_native.call_string("helm_render", ...)``, the native call behind
``Chart.render`` that also takes ``kube_version`` and ``api_versions`` (not a public API: the version is pinned in
requirements-dev.txt). A render removes switched-off subcharts from the loaded chart, so every render loads the
archive afresh.

A release with a ``postrender`` command has its rendered templates passed through it as Helm 3 does (one stream,
each template after ``---`` and ``# Source: <path>``; Helm 3.18 pkg/action/action.go renderResources): the
command's own function, from components/kubernetes/postrender ``POST_RENDERERS`` (the charts' CRDs are not
post-rendered, as in Helm; their hooks are here, which Helm does not post-render: the charts the fleet post-renders
have none).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.kubernetes.postrender import POST_RENDERERS
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import StackPlan

CHART_CACHE_ENV = "GPU_FLEET_CHART_CACHE"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CRD_KIND = "CustomResourceDefinition"
# Objects that carry a pod template, and where (a CronJob's is one level deeper).
_POD_TEMPLATE = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader, reading the plain scalar ``=`` as a string: prometheus-operator's CRDs list it in enums
    (``matchType``), which ``safe_load`` refuses as YAML 1.1's value tag."""


_Loader.add_constructor("tag:yaml.org,2002:value", _Loader.construct_yaml_str)


def load_all(text: str) -> Iterator[Any]:
    """The YAML documents of ``text`` (Kubernetes manifests, CRDs)."""
    return yaml.load_all(text, Loader=_Loader)  # a SafeLoader subclass


class ChartCacheError(Exception):
    """The chart cache lacks an archive a release needs, or cannot be read."""


@dataclass(frozen=True)
class HelmRelease:
    """One Helm release of a planned stack: what Pulumi hands Helm."""

    stack: str
    name: str
    chart: str  # the chart's own name (an OCI reference's last segment)
    version: str
    namespace: str
    values: dict[str, Any]
    postrender: str = ""  # the Release's post-renderer command, if any

    @property
    def archive_name(self) -> str:
        """The archive ``helm pull`` writes for this chart and version."""
        return f"{self.chart}-{self.version}.tgz"


def helm_release(stack: str, reg: Registration) -> HelmRelease:
    """The release a ``Release`` registration describes (secret values shown as ``[secret]``)."""
    inputs = reg.plain_inputs()
    return HelmRelease(
        stack=stack,
        name=str(inputs.get("name", reg.name)),
        chart=str(inputs["chart"]).rstrip("/").rsplit("/", 1)[-1],
        version=str(inputs["version"]),
        namespace=str(inputs.get("namespace") or "default"),
        values=inputs.get("values") or {},
        postrender=str(inputs.get("postrender") or ""),
    )


def helm_releases(plan: StackPlan) -> list[HelmRelease]:
    """Every Helm release of a planned stack, in URN order."""
    return [helm_release(plan.stack, r) for r in plan.registrations if r.type == HELM_RELEASE]


def kube_version(version: str) -> str:
    """``1.33`` or ``v1.28.9-rancher1`` as Helm's ``kube_version`` (``v1.33.0``, ``v1.28.9``)."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not match:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected e.g. 1.33 or v1.33.2)")
    major, minor, patch = match.groups()
    return f"v{major}.{minor}.{patch or 0}"


@dataclass(frozen=True)
class RenderedRelease:
    """What one release renders: its objects (templates, then the charts' ``crds/`` files) and its NOTES."""

    release: HelmRelease
    objects: list[dict[str, Any]]
    hooks: list[dict[str, Any]]  # objects annotated helm.sh/hook (tests, pre-install jobs ...), also in objects


def _archive(cache: Path, release: HelmRelease) -> Path:
    path = cache / release.archive_name
    if not path.is_file():
        raise ChartCacheError(
            f"{release.stack}: release {release.name} needs {release.archive_name} in the chart cache {cache} "
            f"(`helm pull {release.chart} --version {release.version}` into it; the tests read {CHART_CACHE_ENV}, "
            "plan --chart-cache)"
        )
    return path


def _documents(texts: Iterable[str]) -> Iterator[dict[str, Any]]:
    for text in texts:
        for doc in load_all(text):
            if isinstance(doc, dict) and doc.get("kind"):
                if doc["kind"].endswith("List") and isinstance(doc.get("items"), list):
                    yield from (item for item in doc["items"] if isinstance(item, dict))
                else:
                    yield doc


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> tuple[dict[str, Any], ...]:
    """The objects of one rendered file, parsed once a process: the CRDs (kube-prometheus-stack's are 4 MB) and
    every template rendered again with the same result. Shared between renders: read them, never change them."""
    return tuple(_documents([text]))


def rendered_templates(
    release: HelmRelease, cache: Path, kubernetes_version: str, api_versions: Iterable[str] = ()
) -> tuple[list[tuple[str, str]], list[str]]:
    """What Helm's engine renders of ``release`` from ``cache`` on a cluster of ``kubernetes_version`` that serves the
    extra ``api_versions``: each template (path, text; NOTES and empty ones left out) and the chart's CRD files."""
    import helm_python as helm  # helm-python-sdk: a native library, loaded only when charts are rendered
    from helm_python import _native

    options = {
        "name": release.name,
        "namespace": release.namespace,
        "is_install": True,
        "kube_version": kube_version(kubernetes_version),
        "api_versions": sorted(set(api_versions)),
    }
    with helm.Chart.load(str(_archive(cache, release))) as chart:
        try:
            manifests = json.loads(
                _native.call_string("helm_render", chart._raw(), json.dumps(release.values), json.dumps(options))
            )
        except Exception as error:  # the engine's own message: a failed template, a refused value
            raise ChartCacheError(
                f"{release.stack}: release {release.name} ({release.archive_name}): {error}"
            ) from error
        crds = [
            c["data"] if isinstance(c["data"], str) else c["data"].decode() for c in chart.crds
        ]  # the crds/ files of the chart and the subcharts still switched on
    templates = [(path, text) for path, text in sorted(manifests.items()) if not path.endswith("NOTES.txt") and text]
    return templates, crds


def helm_stream(templates: Iterable[tuple[str, str]]) -> str:
    """The rendered templates as one stream, as Helm 3 hands it to a post-renderer."""
    return "".join(f"---\n# Source: {path}\n{text}\n" for path, text in templates)


def render_release(
    release: HelmRelease, cache: Path, kubernetes_version: str, api_versions: Iterable[str] = ()
) -> RenderedRelease:
    """Render ``release`` from ``cache`` as Helm installs it on a cluster of ``kubernetes_version`` that serves the
    extra ``api_versions`` (``group/version`` of its custom resources), post-rendered where it names a post-renderer."""
    templates, crds = rendered_templates(release, cache, kubernetes_version, api_versions)
    texts = [_post_rendered(release, templates)] if release.postrender else [text for _path, text in templates]
    objects = [o for text in texts + crds for o in _parsed(text)]
    hooks = [o for o in objects if "helm.sh/hook" in ((o.get("metadata") or {}).get("annotations") or {})]
    return RenderedRelease(release, objects, hooks)


def _post_rendered(release: HelmRelease, templates: list[tuple[str, str]]) -> str:
    """The rendered ``templates`` (path, text) as ``release``'s post-renderer returns them."""
    renderer = POST_RENDERERS.get(release.postrender)
    if renderer is None:
        raise ChartCacheError(
            f"{release.stack}: release {release.name}: post-renderer {release.postrender!r} is none of the fleet's "
            f"(components/kubernetes/postrender: {', '.join(sorted(POST_RENDERERS))})"
        )
    try:
        return renderer(helm_stream(templates))
    except Exception as error:  # the post-renderer's own message, as Helm would stop the install with it
        raise ChartCacheError(f"{release.stack}: release {release.name}: post-renderer: {error}") from error


def served_versions(objects: Iterable[dict[str, Any]]) -> set[str]:
    """``group/version`` of every served version of the CRDs among ``objects``."""
    out = set()
    for obj in objects:
        if obj.get("kind") == CRD_KIND:
            group = obj["spec"]["group"]
            out.update(f"{group}/{v['name']}" for v in obj["spec"]["versions"] if v.get("served", True))
    return out


def render_stack_charts(plan: StackPlan, cache: Path, kubernetes_version: str) -> list[RenderedRelease]:
    """Every release of ``plan`` rendered for its cluster, which serves the API versions of every CRD the stack's
    charts install (rendered twice: first to learn them, as a cluster has them once the first release is in)."""
    releases = helm_releases(plan)
    first = [render_release(r, cache, kubernetes_version) for r in releases]
    apis = served_versions(o for rendered in first for o in rendered.objects)
    if not apis:
        return first
    return [render_release(r, cache, kubernetes_version, apis) for r in releases]


def stack_kubernetes_version(plan: StackPlan, policy_version: str) -> str:
    """The Kubernetes version a stack's cluster runs: a Magnum cluster's template ``kube_tag`` decides there
    (the policy's ``kubernetes_version`` elsewhere)."""
    for reg in plan.registrations:
        if reg.type.endswith(":ClusterTemplate"):
            tag = (reg.inputs.get("labels") or {}).get("kube_tag")
            if isinstance(tag, str):
                return tag
    return policy_version


@dataclass(frozen=True)
class PodOf:
    """A pod template found in an object: the object's kind, name and namespace, and the pod spec."""

    kind: str
    name: str
    namespace: str
    metadata: dict[str, Any]
    spec: dict[str, Any]

    def containers(self) -> list[dict[str, Any]]:
        """Init containers, then containers."""
        return list(self.spec.get("initContainers") or []) + list(self.spec.get("containers") or [])


def pods_of(obj: dict[str, Any], default_namespace: str = "default") -> PodOf | None:
    """The pod an object runs (a bare Pod, or the template of a workload object), or None."""
    kind = obj.get("kind", "")
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or default_namespace
    if kind == "Pod":
        return PodOf(kind, meta.get("name", ""), namespace, meta, obj.get("spec") or {})
    path = _POD_TEMPLATE.get(kind)
    if path is None:
        return None
    node: Any = obj
    for key in path:
        node = (node or {}).get(key)
    if not isinstance(node, dict):
        return None
    return PodOf(kind, meta.get("name", ""), namespace, node.get("metadata") or {}, node.get("spec") or {})
