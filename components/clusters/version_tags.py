"""Kubernetes and cluster-autoscaler version tags as written (``v1.31.5-rancher1``, ``1.29``), read for their minor.

Apart from the Magnum component that first needed it, so that the program reads a cluster's version without
importing a cloud's SDK (a stack's program imports its own cloud's SDK only, ``GpuCluster.for_cloud``).
"""

from __future__ import annotations

import re

# The cluster-autoscaler's minor must be the control plane's: "Starting from Kubernetes 1.12, versioning scheme was
# changed to match Kubernetes minor releases exactly", and each CA minor is tested with its own Kubernetes minor
# only (kubernetes/autoscaler cluster-autoscaler/README.md, "Releases"). Both the GPU groups' autoscaler and
# Magnum's own (the template's ``autoscaler_tag`` label) run this tag.
VERSION_TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def tag_minor(tag: str) -> tuple[int, int] | None:
    """The (major, minor) a version tag names (``v1.31.5-rancher1`` -> (1, 31)); None for another kind of tag."""
    found = VERSION_TAG.match(tag.strip())
    return (int(found[1]), int(found[2])) if found else None
