"""Reading ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI hands config to a program."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.errors import InputError, Problem
from fleet.yaml_source import read_yaml

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"
SECRET_PLACEHOLDER = "offline-plan-secret-placeholder"


def stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """Path of a stack's config file."""
    return stacks_dir / f"Pulumi.{stack}.yaml"


def stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Names of the stacks that have a config file."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def load_stack_config(stack: str, stacks_dir: Path = STACKS_DIR) -> tuple[dict[str, str], list[str]]:
    """The stack's config as ``{"ns:key": "value"}`` (non-strings as JSON) plus the secret keys.

    Encrypted values (``secure: v1:...``) cannot be decrypted offline; they become a placeholder that is
    still a secret, so the program takes the same code path and the secret never shows in the plan.
    """
    path = stack_file(stack, stacks_dir)
    if not path.is_file():
        raise InputError([Problem(str(path), 1, "", f"stack {stack!r} has no config file (create {path.name})")])
    doc = read_yaml(path)
    data = doc.data or {}
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise InputError([doc.problem(("config",), "must be a mapping of config keys")])
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (data.get("config") or {}).items():
        if ":" not in str(key):
            raise InputError([doc.problem(("config", key), "config keys are namespaced, such as gcp:project")])
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = SECRET_PLACEHOLDER
            secret_keys.append(key)
        else:
            config[key] = value if isinstance(value, str) else json.dumps(value)
    return config, secret_keys
