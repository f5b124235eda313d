"""Pulumi program of gpu-fleet: builds the cluster named by the current stack from policy/fleet.yaml."""

from fleet.program.stack import main

main()
