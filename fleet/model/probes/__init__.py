"""Pool probes (policy: a pool's ``probe``, ``defaults.probe``): their settings, their resolution into the pool's
``Probe``, the probe workload (``probe/``) and the records of its phases."""
