"""Scaling sweeps (policy: ``workloads.<name>.scale``): where each point runs and the sweep pools that takes."""
