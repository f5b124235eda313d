"""Pinned images and Helm chart versions of the fleet's own services (data in images.yaml), and their releases."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

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


def registry() -> str:
    """The registry that holds the fleet's own images (its builds and its copies of upstream images)."""
    return str(_data()["registry"])


def _pinned(name: str, entry: dict[str, Any]) -> PinnedImage:
    return PinnedImage(name, entry["image"], entry.get("upstream", ""), entry.get("digest") or "")


def pinned_images() -> list[PinnedImage]:
    """Every image of images.yaml, in file order."""
    return [_pinned(name, entry) for name, entry in _data()["images"].items()]


def image(name: str) -> str:
    """The reference pods pull for ``name`` (KeyError for an unknown one)."""
    return _pinned(name, _data()["images"][name]).reference


def chart(name: str) -> Chart:
    """The pinned Helm chart ``name``."""
    entry = _data()["charts"][name]
    return Chart(name, entry["repo"], str(entry["version"]))


def helm_release(
    resource_name: str,
    chart_name: str,
    release: str,
    namespace: pulumi.Input[str],
    values: pulumi.Input[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    **extra: Any,
) -> k8s.helm.v3.Release:
    """A Helm release of the pinned chart ``chart_name`` (``extra``: other Release arguments, such as timeout)."""
    pinned = chart(chart_name)
    return k8s.helm.v3.Release(
        resource_name,
        name=release,
        chart=pinned.name,
        version=pinned.version,
        repository_opts={"repo": pinned.repo},
        namespace=namespace,
        values=values,
        opts=opts,
        **extra,
    )
