"""What runs on every cluster: namespaces and policies, Prometheus, the federation gateway, benchmark Jobs."""
