"""Imports every cloud's cluster component so ``GpuCluster.for_cloud`` can find it."""

from components import existing, gke  # noqa: F401
