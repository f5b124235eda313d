"""The model: the policy file, the catalogue, the workloads and the pod contract, resolved and checked. No Pulumi."""
