"""Stack configuration keys of the ``gpu-fleet`` namespace, read in one place with their defaults and checks.

A wrong value is an ``InputError`` located in the stack file (``stacks/Pulumi.<stack>.yaml``), so ``plan`` and
``pulumi up`` both refuse it with ``FILE:LINE: key: what is wrong`` before anything is deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.config import is_config_secret

from components.settings import ComponentSettings
from fleet.model.core.errors import InputError, Problem, format_path
from fleet.model.core.stack_settings import (
    CONFIG_NAMESPACE,
    PLAIN_KINDS,
    SECRET_MAP_VALUES,
    STACK_SETTINGS,
    StackSetting,
    decode_config_text,
    parse_value,
    plain_secret_message,
    unset_value,
)
from fleet.model.core.yaml_source import read_yaml
from fleet.program.stack_config import SECRET_PLACEHOLDER, plain_leaves

ROOT = Path(__file__).resolve().parents[2]
# Set by the offline plan (fleet/tools/engine/plan.py): the stack file it read, so problems point into it.
STACK_FILE_KEY = "stackFile"
# Set by the offline plan: bad input goes up as an ``InputError`` instead of a Pulumi run error.
OFFLINE_PLAN_KEY = "offlinePlan"


def stack_file_path() -> Path:
    """The current stack's config file: the one the offline plan read, else ``stacks/Pulumi.<stack>.yaml``."""
    given = pulumi.Config(CONFIG_NAMESPACE).get(STACK_FILE_KEY)
    return Path(given) if given else ROOT / "stacks" / f"Pulumi.{pulumi.get_stack()}.yaml"


def config_problem(key: str, message: str, *subpath: object) -> Problem:
    """A problem with config ``key`` (``ns:name``, optionally a path inside its value), located in the stack file."""
    path = stack_file_path()
    keys: tuple[object, ...] = ("config", key, *subpath)
    if path.is_file():
        try:
            return read_yaml(path).problem(keys, message)
        except InputError:
            pass  # the file itself is broken: the location below still names it
    return Problem(str(path), 1, format_path(keys), message)


def config_value(cfg: pulumi.Config, name: str) -> Any:
    """A config value as the stack file wrote it: objects and lists decoded, anything else the plain string.

    Unlike ``Config.get_object`` this never fails (nor echoes the value, which may be a secret, in an error): the
    caller checks the type and reports a located problem.
    """
    raw = cfg.get(name)
    return None if raw is None else decode_config_text(raw)


def stack_file_config() -> dict[str, Any]:
    """The ``config`` mapping of the current stack's file as written (secrets still encrypted); empty when the file
    is missing, broken (reported where it is read) or holds no mapping."""
    path = stack_file_path()
    try:
        data = read_yaml(path).data if path.is_file() else None
    except InputError:
        return {}
    config = data.get("config") if isinstance(data, dict) else None
    return config if isinstance(config, dict) else {}


def plain_in_stack_file(key: str, file_config: dict[str, Any] | None = None) -> list[tuple[object, ...]]:
    """Paths inside config ``key`` that the stack file holds in plain text. One encrypted part makes the CLI treat
    the whole key as secret, so only the file tells which parts a user left plain. ``file_config`` is the file's
    ``config`` mapping when the caller has read it already (``stack_file_config``)."""
    config = stack_file_config() if file_config is None else file_config
    return plain_leaves(config[key]) if key in config else []


class StackSettings(ComponentSettings):
    """What a stack's config file says beyond the policy file (site-specific, per stack), as the components take it
    (``components.settings.ComponentSettings``: one field per setting declared in
    ``fleet.model.core.stack_settings.STACK_SETTINGS``), read from the current stack's config by ``read``."""

    @staticmethod
    def read() -> StackSettings:
        """Read every declared ``gpu-fleet:*`` setting (``fleet.model.core.stack_settings.STACK_SETTINGS``) of the
        current stack into its field; every problem at once as an ``InputError``."""
        cfg = pulumi.Config(CONFIG_NAMESPACE)
        file_config = stack_file_config()  # read once: every secret setting looks for plain parts in it
        problems: list[Problem] = []
        values: dict[str, Any] = {}
        for setting in STACK_SETTINGS.values():
            values[setting.attribute], found = _read_setting(cfg, setting, file_config)
            problems += [config_problem(setting.key, message, *where) for where, message in found]
        if problems:
            raise InputError(problems)
        return StackSettings(**values, secret_placeholder=SECRET_PLACEHOLDER, config_problem=config_problem)


def _read_setting(
    cfg: pulumi.Config, setting: StackSetting, file_config: dict[str, Any]
) -> tuple[Any, list[tuple[tuple[object, ...], str]]]:
    """One setting's value as the program uses it (``unset_value`` when the stack does not set it), and its problems
    as (path inside the value, message); ``file_config`` is the stack file's ``config`` mapping as written."""
    if setting.kind == "magnum":
        return config_value(cfg, setting.name), []  # checked by MagnumSettings, where the component reads it
    if setting.kind in PLAIN_KINDS:
        raw = cfg.get(setting.name)
        return (unset_value(setting), []) if raw is None else parse_value(setting, raw)
    plain = [(leaf, plain_secret_message(setting.key, leaf)) for leaf in plain_in_stack_file(setting.key, file_config)]
    if setting.kind == "secret":
        return (cfg.get_secret(setting.name) if is_config_secret(setting.key) else None), plain
    value = config_value(cfg, setting.name)
    if value is None:
        return unset_value(setting), []
    try:
        _require_secret(setting)
        return SECRET_MAP_VALUES[setting.name](value), plain
    except ValueError as exc:
        return unset_value(setting), [((), str(exc))]


def _require_secret(setting: StackSetting) -> None:
    """``ValueError`` with the command to set it when ``setting`` (a mapping of secrets) is not secret config."""
    if not is_config_secret(setting.key):
        raise ValueError(
            f"holds credentials in plain text in the stack file: remove it and set each value with "
            f"pulumi config set --secret --path '{setting.key}.{setting.each}' <value>"
        )
