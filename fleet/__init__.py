"""gpu-fleet: one policy file, one Pulumi stack per GPU cluster, checkable offline."""
