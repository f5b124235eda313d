"""Checks of inputs and rendered output: stack files, workloads, kubeconfigs, upstream charts and schemas."""
