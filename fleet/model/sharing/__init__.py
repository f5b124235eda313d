"""GPU sharing (policy: a pool's ``sharing``): its settings and their resolution into the pool's ``Sharing``."""
