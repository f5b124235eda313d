"""Pulumi component resources of gpu-fleet: one module per cloud, one per Kubernetes concern."""
