"""The benchmark report: queries to the central Prometheus, costs, tables and plots. Never deployed."""
