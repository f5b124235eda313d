"""The fleet's container registry: one setting of the policy file (``registry:``), from which every image the fleet's
pods pull is named.

Images are written relative to it (``mtail:3.0.8`` in components/kubernetes/images.yaml, ``image: gan3d:1.0`` in a
workload.yaml) and pulled as ``<registry>/<image>``, so moving to another registry is one edit. An image written with
a registry host of its own is taken as it is when it lies inside the fleet's registry, and refused when outside: the
images workflow (``fleet images``) pushes only there, and pods pull only from there.

How a reference names its registry host follows Docker's rule (distribution/reference v0.5.0, normalize.go
``splitDockerDomain``): the first ``/``-separated component is a host when it contains ``.`` or ``:`` or is
``localhost``; otherwise the whole reference is a repository path.
"""

from __future__ import annotations

import dataclasses
import re

from fleet.model.core.errors import Problem
from fleet.model.core.workloads import Workload
from fleet.model.core.yaml_source import YamlDocument, read_yaml

#: The registry of the project's sample fleet, and the default of the policy file's ``registry``.
DEFAULT_REGISTRY = "ghcr.io/gpu-fleet"

# distribution/reference v0.5.0 reference.go: domain-component := alpha-numeric [(alpha-numeric | '-')* alpha-numeric],
# path-component := alpha-numeric [separator alpha-numeric]*, separator := /[_.]|__|[-]*/ (lower case only)
_DOMAIN_COMPONENT = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REGISTRY = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?(?:/{_PATH_COMPONENT})*$")
REGISTRY_EXAMPLE = "ghcr.io/my-lab or registry.example.org/lab"


def registry_problem(value: str) -> str | None:
    """What is wrong with ``value`` as the policy file's ``registry`` (None: nothing)."""
    host = value.split("/", 1)[0]
    if "://" in value:
        return f"{value!r} has a scheme: write the registry without it, as pods name images ({REGISTRY_EXAMPLE})"
    if not REGISTRY.match(value) or not has_host(value + "/x"):
        return (
            f"{value!r} is not a registry host with an optional path ({REGISTRY_EXAMPLE}): a host has a dot or a port "
            f"(or is localhost), path components are lower case letters and digits"
            + (f"; {host!r} is not a host" if REGISTRY.match(value) else "")
        )
    return None


def has_host(reference: str) -> bool:
    """Whether ``reference`` starts with a registry host (``ghcr.io/x:1``) rather than a repository path (``x:1``)."""
    first, slash, _ = reference.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def in_registry(reference: str, registry: str) -> str:
    """The reference pods pull: ``<registry>/<reference>`` for one written relative to the registry, else as it is."""
    return reference if has_host(reference) else f"{registry.rstrip('/')}/{reference}"


def outside_registry(reference: str, registry: str) -> bool:
    """Whether ``reference`` (as written) names a registry host other than the fleet's ``registry``."""
    return has_host(reference) and not reference.startswith(registry.rstrip("/") + "/")


def relative_to(reference: str, registry: str) -> str:
    """``reference`` written relative to ``registry`` (unchanged when outside it)."""
    prefix = registry.rstrip("/") + "/"
    return reference.removeprefix(prefix)


def outside_message(reference: str, registry: str, where: str, *, built: bool = False, upstream: str = "") -> str:
    """The problem of an image outside the fleet's registry, with the fix: the lines to write instead (``built``: the
    workload's Dockerfile builds it; ``upstream``: the ``upstream:`` it already names)."""
    name = reference.split("/")[-1].split("@")[0]
    pulled = f"{registry.rstrip('/')}/{name}"
    if built or upstream:
        fix = f"write `image: {name}` (pulled as {pulled})"
        why = "the folder's Dockerfile is built into it" if built else f"`fleet images` copies {upstream} into it"
        return (
            f"{reference} is outside the fleet's registry {registry} ({where}), the only one the images workflow "
            f"(`fleet images`) pushes to and pods pull from: {fix}; {why}"
        )
    return (
        f"{reference} is outside the fleet's registry {registry} ({where}), the only one the images workflow "
        f"(`fleet images`) pushes to and pods pull from: write `image: {name}` (pulled as {pulled}) and "
        f"`upstream: {reference}` beside it, the published image `fleet images` copies into the registry"
    )


def workload_image_problems(doc: YamlDocument, registry: str, workloads: list[Workload]) -> list[Problem]:
    """A workload image outside the policy's ``registry``, located at its ``image:`` line in workload.yaml."""
    where = f"{doc.file}:{doc.line_of(('registry',))} registry" if "registry" in (doc.data or {}) else "the default"
    return [
        read_yaml(wl.folder / "workload.yaml").problem(
            ("image",),
            outside_message(
                wl.spec.image, registry, where, built=(wl.folder / "Dockerfile").is_file(), upstream=wl.spec.upstream
            ),
        )
        for wl in workloads
        if outside_registry(wl.spec.image, registry)
    ]


def workload_in_registry(workload: Workload, registry: str) -> Workload:
    """``workload`` with its image as pods pull it: a name written relative to the registry gets it in front."""
    image = in_registry(workload.spec.image, registry)
    return dataclasses.replace(workload, spec=workload.spec.model_copy(update={"image": image}))
