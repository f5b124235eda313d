"""The queue manager's credential on a worker: a bound ServiceAccount token the operator makes (``kubectl create
token``), set as the secret stack setting ``gpu-fleet:multikueueToken``, checked here before it goes into the worker's
kubeconfig for the manager (components/kubernetes/multikueue.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

from fleet.model.queues.settings import WORKER_ACCOUNT

# the worker's token, a secret stack setting, and the longest a token may last (a month: rotate it monthly)
TOKEN_SETTING = "gpu-fleet:multikueueToken"
TOKEN_MAX_DAYS = 31


def _claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWT (its payload, not verified: the API server verifies it), or None when it is not one."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def check_token(token: str, now: float) -> str | None:
    """What is wrong with a worker token (``gpu-fleet:multikueueToken``) at ``now`` (seconds since the epoch), or None.

    A TokenRequest token is a JWT whose ``exp`` claim says when it expires (kubernetes pkg/serviceaccount/claims.go);
    a legacy Secret-based token has no ``exp`` and is refused, as is one that has expired or lasts longer than
    ``TOKEN_MAX_DAYS``. The message never holds the token."""
    make = (
        f"make one: kubectl create token {WORKER_ACCOUNT} -n kueue-system --duration {TOKEN_MAX_DAYS * 24}h, then "
        f"pulumi config set --secret {TOKEN_SETTING} <token>"
    )
    claims = _claims(token)
    if claims is None:
        return f"{TOKEN_SETTING} is not a ServiceAccount token (a JWT): {make}"
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        return f"{TOKEN_SETTING} never expires (no exp claim: a legacy token?): {make}"
    if exp <= now:
        return f"{TOKEN_SETTING} expired {(now - exp) / 86400:.1f} days ago: {make}"
    if exp - now > TOKEN_MAX_DAYS * 86400:
        return f"{TOKEN_SETTING} lasts {(exp - now) / 86400:.0f} days, more than {TOKEN_MAX_DAYS}: {make}"
    return None
