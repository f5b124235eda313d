"""The managed clusters, one component per cloud behind the GpuCluster interface."""
