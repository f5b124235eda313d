"""Placement: every pod the fleet runs lands on its own pool and fits a node of it; the node agents beside it."""
