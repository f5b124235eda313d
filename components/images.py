"""Pinned images and Helm chart versions of the fleet's own services (data in images.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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


def image(name: str) -> str:
    """The pinned image reference of ``name`` (KeyError for an unknown one)."""
    return _data()["images"][name]["image"]


def chart(name: str) -> Chart:
    """The pinned Helm chart ``name``."""
    entry = _data()["charts"][name]
    return Chart(name, entry["repo"], str(entry["version"]))
