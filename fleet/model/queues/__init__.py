"""Fleet-wide queues (policy: ``queues``, ``workloads.<name>.queue``): their settings and checks, their resolution
into the fleet's ``Dispatch``, the queued sweep points and the worker token."""
