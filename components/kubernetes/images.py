"""Pinned images and Helm chart versions of the fleet's own services (data in images.yaml), and their releases.

images.yaml names each image relative to the fleet's registry (the policy file's ``registry``, ``Fleet.registry`` and
``Cluster.registry``), so every function that returns an image takes that registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from fleet.model.core.registry import in_registry

IMAGES_FILE = Path(__file__).with_name("images.yaml")


@dataclass(frozen=True)
class Chart:
    """A Helm chart pinned to one version."""

    name: str
    repo: str
    version: str


@lru_cache(maxsize=1)
def _data() -> dict:
    return yaml.safe_load(IMAGES_FILE.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PinnedImage:
    """One of the fleet's own images: where pods pull it, where it is published, and its recorded digest."""

    name: str
    image: str
    upstream: str
    digest: str

    @property
    def reference(self) -> str:
        """What pods pull: ``image@digest`` once the digest is recorded, else ``image``."""
        return f"{self.image}@{self.digest}" if self.digest else self.image


def reload_images() -> None:
    """Read images.yaml again on next use (after ``python -m fleet images --record`` wrote digests into it)."""
    _data.cache_clear()


def _pinned(name: str, entry: dict[str, Any], registry: str) -> PinnedImage:
    return PinnedImage(
        name, in_registry(entry["image"], registry), entry.get("upstream", ""), entry.get("digest") or ""
    )


def pinned_images(registry: str) -> list[PinnedImage]:
    """Every image of images.yaml, in file order, in ``registry``."""
    return [_pinned(name, entry, registry) for name, entry in _data()["images"].items()]


@dataclass(frozen=True)
class ChartImage:
    """An image a pinned chart deploys, copied into the fleet's registry and set in the chart's values."""

    name: str
    chart: str
    values: str  # dotted path of the chart's image block
    layout: str  # "split" (registry + repository), "joined" (repository holds the registry), "split-image"
    digest_as: str  # "sha" (hex), "sha-full" / "digest" (sha256:<hex>), "tag" (<tag>@sha256:<hex>)
    image: str
    upstream: str
    digest: str

    def block(self) -> dict[str, str]:
        """The chart values of the image block: our registry's copy, by digest once recorded."""
        name, tag = self.image.rsplit(":", 1)
        if self.layout == "split":
            registry_host, repository = name.split("/", 1)
            block = {"registry": registry_host, "repository": repository, "tag": tag}
        elif self.layout == "split-image":
            registry_host, repository = name.split("/", 1)
            block = {"registry": registry_host, "image": repository, "tag": tag}
        else:
            block = {"repository": name, "tag": tag}
        if self.digest:
            hex_digest = self.digest.removeprefix("sha256:")
            if self.digest_as == "sha":
                block["sha"] = hex_digest
            elif self.digest_as == "sha-full":
                block["sha"] = self.digest
            elif self.digest_as == "digest":
                block["digest"] = self.digest
            else:
                block["tag"] = f"{tag}@{self.digest}"
        return block

    @property
    def reference(self) -> str:
        """What the pods pull."""
        return f"{self.image}@{self.digest}" if self.digest else self.image


def chart_images(registry: str, chart_name: str | None = None) -> list[ChartImage]:
    """The images of images.yaml ``chart_images`` (of one chart, when named), in file order, in ``registry``."""
    out = []
    for name, entry in (_data().get("chart_images") or {}).items():
        if chart_name is None or entry["chart"] == chart_name:
            out.append(
                ChartImage(
                    name,
                    entry["chart"],
                    entry["values"],
                    entry["layout"],
                    entry["digest_as"],
                    in_registry(entry["image"], registry),
                    entry.get("upstream", ""),
                    entry.get("digest") or "",
                )
            )
    return out


AUTOSCALER_UPSTREAM = "registry.k8s.io/autoscaling/cluster-autoscaler"


def _autoscaler_images(section: str, prefix: str, registry: str) -> list[ChartImage]:
    """The cluster-autoscaler chart's images of images.yaml's ``section`` (a mapping of a key to its image), each named
    ``<prefix><key>``, in ``registry``."""
    return [
        ChartImage(
            f"{prefix}{key}",
            "cluster-autoscaler",
            "image",
            "joined",
            "tag",
            in_registry(entry["image"], registry),
            entry.get("upstream", ""),
            entry.get("digest") or "",
        )
        for key, entry in (_data().get(section) or {}).items()
    ]


def autoscaler_images(registry: str) -> list[ChartImage]:
    """The EKS cluster-autoscaler images of images.yaml, one per Kubernetes minor (``cluster-autoscaler-<minor>``),
    in ``registry``."""
    return _autoscaler_images("autoscaler_images", "cluster-autoscaler-", registry)


def autoscaler_image(minor: str, registry: str) -> dict[str, str]:
    """The cluster-autoscaler chart's ``image`` values for a control plane of Kubernetes ``minor``: the fleet's copy
    in ``registry`` (by digest once recorded), or upstream's ``v<minor>.0`` by tag for a minor images.yaml does not
    list."""
    for entry in autoscaler_images(registry):
        if entry.name == f"cluster-autoscaler-{minor}":
            return entry.block()
    return {"repository": AUTOSCALER_UPSTREAM, "tag": f"v{minor}.0"}


def magnum_autoscaler_images(registry: str) -> list[ChartImage]:
    """The Magnum autoscaler images of images.yaml, one per ``autoscalerTag`` (``magnum-cluster-autoscaler-<tag>``),
    in ``registry``."""
    return _autoscaler_images("magnum_autoscaler_images", "magnum-cluster-autoscaler-", registry)


def magnum_autoscaler_image(upstream: str, registry: str) -> dict[str, str] | None:
    """The cluster-autoscaler chart's ``image`` values of the fleet's copy of ``upstream`` (``repository:tag``) in
    ``registry``, or None when images.yaml does not mirror it."""
    for entry in magnum_autoscaler_images(registry):
        if entry.upstream == upstream:
            return entry.block()
    return None


def chart_image_values(chart_name: str, registry: str) -> dict[str, Any]:
    """The values that make ``chart_name`` pull its images from ``registry`` (nested by the dotted paths)."""
    values: dict[str, Any] = {}
    for entry in chart_images(registry, chart_name):
        node = values
        *parents, last = entry.values.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = entry.block()
    return values


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, mappings recursively (``extra`` wins elsewhere); neither is changed."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def image(name: str, registry: str) -> str:
    """The reference pods pull for ``name`` from ``registry`` (KeyError for an unknown one)."""
    return _pinned(name, _data()["images"][name], registry).reference


def chart(name: str) -> Chart:
    """The pinned Helm chart ``name``."""
    entry = _data()["charts"][name]
    return Chart(name, entry["repo"], str(entry["version"]))


# The folder of chart archives the stack installs from (gpu-fleet:chartCache), while the program declares it.
_CHART_CACHE: ContextVar[Path | None] = ContextVar("chart_cache", default=None)


@contextmanager
def charts_from(folder: str | Path | None) -> Iterator[None]:
    """Within the block, every ``helm_release`` installs its pinned chart from ``folder``'s archive
    ``<chart>-<version>.tgz`` (as ``helm pull`` names it) instead of the chart's repository; None: the repositories."""
    token = _CHART_CACHE.set(Path(folder) if folder else None)
    try:
        yield
    finally:
        _CHART_CACHE.reset(token)


def chart_archive(folder: Path, pinned: Chart) -> Path:
    """The archive of ``pinned`` in the chart cache ``folder``; ``FileNotFoundError`` naming it when it is not
    there."""
    archive = folder / f"{pinned.name}-{pinned.version}.tgz"
    if not archive.is_file():
        raise FileNotFoundError(f"{archive} is missing: helm pull {pinned.name} --version {pinned.version} into it")
    return archive


def missing_chart_archives(folder: str | Path) -> list[str]:
    """What the chart cache ``folder`` lacks of the pinned charts (each as ``<chart>-<version>.tgz``)."""
    out = []
    for name in sorted(_data()["charts"]):
        try:
            chart_archive(Path(folder), chart(name))
        except FileNotFoundError as exc:
            out.append(str(exc))
    return out


def helm_release(
    resource_name: str,
    chart_name: str,
    release: str,
    namespace: pulumi.Input[str],
    values: pulumi.Input[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    *,
    registry: str,
    **extra: Any,
) -> k8s.helm.v3.Release:
    """A Helm release of the pinned chart ``chart_name`` (``extra``: other Release arguments, such as timeout),
    its images pulled from the fleet's ``registry`` (``chart_images``)."""
    pinned = chart(chart_name)
    images = chart_image_values(chart_name, registry)
    if images:
        values = (
            merged(values, images)
            if isinstance(values, dict)
            else pulumi.Output.from_input(values).apply(lambda v: merged(v, images))
        )
    cache = _CHART_CACHE.get()
    # an OCI registry holds the chart itself: oci://<repo>/<chart>, no repository (pulumi/pulumi-kubernetes#1892)
    oci = pinned.repo.startswith("oci://")
    if cache is not None:  # a local archive: the provider reads it, no repository (helm/v3 Release chart)
        where: dict[str, Any] = {"chart": str(chart_archive(cache, pinned))}
    elif oci:
        where = {"chart": f"{pinned.repo}/{pinned.name}", "version": pinned.version}
    else:
        where = {"chart": pinned.name, "version": pinned.version, "repository_opts": {"repo": pinned.repo}}
    return k8s.helm.v3.Release(
        resource_name,
        name=release,
        **where,
        namespace=namespace,
        values=values,
        opts=opts,
        **extra,
    )
