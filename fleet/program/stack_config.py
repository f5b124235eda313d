"""Reading ``stacks/Pulumi.<stack>.yaml`` the way the Pulumi CLI hands config to a program."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.model.core.errors import InputError, Problem
from fleet.model.core.yaml_source import read_yaml

STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"
SECRET_PLACEHOLDER = "offline-plan-secret-placeholder"


def stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """Path of a stack's config file."""
    return stacks_dir / f"Pulumi.{stack}.yaml"


def stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Names of the stacks that have a config file."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def load_stack_config(stack: str, stacks_dir: Path = STACKS_DIR) -> tuple[dict[str, str], list[str]]:
    """The stack's config as ``{"ns:key": "value"}`` (non-strings as JSON) plus the secret keys.

    Encrypted values (``secure: v1:...``, also nested in an object) cannot be decrypted offline; they become a
    placeholder and their key a secret, so the program takes the same code path and no secret shows in the plan.
    """
    path = stack_file(stack, stacks_dir)
    if not path.is_file():
        raise InputError([Problem(str(path), 1, "", f"stack {stack!r} has no config file (create {path.name})")])
    doc = read_yaml(path)
    data = doc.data or {}
    if not isinstance(data, dict) or not isinstance(data.get("config") or {}, dict):
        raise InputError([doc.problem(("config",), "must be a mapping of config keys")])
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (data.get("config") or {}).items():
        if ":" not in str(key):
            raise InputError([doc.problem(("config", key), "config keys are namespaced, such as gcp:project")])
        value, secret = _decrypted(value)
        if secret:
            secret_keys.append(key)
        config[key] = value if isinstance(value, str) else json.dumps(value)
    return config, secret_keys


def is_secure(value: object) -> bool:
    """Whether a stack-file value is encrypted (``{secure: v1:...}``, what ``pulumi config set --secret`` writes)."""
    return isinstance(value, dict) and set(value) == {"secure"}


def malformed_secure(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Paths inside a stack-file value of a ``secure:`` that is not what the CLI writes (a non-empty string, alone in
    its mapping): the CLI would read ``{secure: 123}`` as a plain object and the program would get no secret."""
    if isinstance(value, dict):
        if "secure" in value and not (
            set(value) == {"secure"} and isinstance(value["secure"], str) and value["secure"]
        ):
            return [(*path, "secure")]
        return [p for k, v in value.items() for p in malformed_secure(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in malformed_secure(v, (*path, i))]
    return []


def plain_leaves(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Paths of the values inside a stack-file value that are not encrypted ([] when all of it is)."""
    if is_secure(value):
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in plain_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in plain_leaves(v, (*path, i))]
    return [path]


def _decrypted(value: object) -> tuple[object, bool]:
    """``value`` with every encrypted part (also nested ones, which ``pulumi config set --secret --path`` writes)
    replaced by the placeholder, and whether it had any: then the whole key is a secret, as the CLI treats it."""
    if is_secure(value):
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        pairs = {k: _decrypted(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_decrypted(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False
