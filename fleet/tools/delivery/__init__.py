"""Delivery: stack selection for CI (which stacks a change affects) and image delivery to the fleet's registry."""
