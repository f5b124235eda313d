"""Monitoring and dashboards: the Prometheus configuration and rules of every cluster, and the Grafana dashboards."""
