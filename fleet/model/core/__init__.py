"""The model's core: the types every feature shares (cards, machines, taints, pools, clusters, the fleet), the
catalogue and the clouds' rules, the workload folders and the reading of the input files. It imports no feature."""
