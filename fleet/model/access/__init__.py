"""Access: the Kubernetes rights the fleet grants and needs (RBAC), checked before a deployment (can-i, preview)."""
