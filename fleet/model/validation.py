"""Validating a parsed YAML document against a pydantic model, with every error located by line."""

from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

import pydantic

from fleet.model.errors import InputError, Problem, did_you_mean
from fleet.model.yaml_source import YamlDocument

M = TypeVar("M", bound=pydantic.BaseModel)


class StrictModel(pydantic.BaseModel):
    """Base for every input model: immutable, unknown keys rejected, no silent type coercion of strings."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", strict=False)


# What each pattern of the input models means, in the user's words with an example: a message never shows a
# regular expression.
PATTERN_WORDS = {
    r"^[0-9]+[smh]$": "a whole number of seconds, minutes or hours, such as 30s, 5m or 2h",
    r"^[0-9]+[hdwy]$": "a whole number of hours, days, weeks or years, such as 12h, 7d or 1y",
    r"^[0-9]+(Gi|Ti)$": "a size in Gi or Ti, such as 100Gi",
    r"^[0-9]+Gi$": "a size in Gi, such as 10Gi",
    r"^[1-9][0-9]{0,3}m$": "whole minutes, such as 5m",
    r"^1\.[0-9]{2}$": 'a Kubernetes minor version in quotes, such as "1.33"',
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$": "a Kubernetes name: lower-case letters, digits and '-', such as my-claim",
    r"^https://[^\s/]+(/[^\s]*)?$": "an https:// URL, such as https://gitlab.example.org",
    r"^[1-7]g\.[0-9]+gb$": "a MIG profile such as 1g.5gb",
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$": "a name of letters, digits, '_', '.' and '-', such as cern-it",
    r"^[a-z][a-z0-9-]*$": "a name of lower-case letters, digits and '-' starting with a letter, such as gpu",
}
# pydantic's names of plain types, as a policy file writes them
TYPE_WORDS = {
    "dict_type": "a mapping of keys to values (key: value lines, or {key: value})",
    "model_type": "a mapping of keys to values (key: value lines, or {key: value})",
    "list_type": "a list ([a, b] or lines starting with '- ')",
    "int_type": "a whole number, such as 2",
    "int_parsing": "a whole number, such as 2",
    "int_from_float": "a whole number, such as 2",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text, such as a name in quotes",
    "float_type": "a number, such as 0.5",
    "float_parsing": "a number, such as 0.5",
}


def _given(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unwrap(annotation: Any) -> list[Any]:
    """The types an annotation may hold: ``X | None`` and unions give each member, anything else itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _model_at(model: Any, loc: tuple[object, ...]) -> type[pydantic.BaseModel] | None:
    """The input model that holds the key at ``loc`` (a pydantic error location below ``model``), or None."""
    current: list[Any] = [model]
    for part in loc:
        following: list[Any] = []
        for kind in current:
            for each in _unwrap(kind):
                origin = typing.get_origin(each)
                if isinstance(each, type) and issubclass(each, pydantic.BaseModel):
                    field = each.model_fields.get(str(part))
                    if field is not None:
                        following.append(field.annotation)
                elif origin is dict:
                    following.append(typing.get_args(each)[1])
                elif origin is list and isinstance(part, int):
                    following.append(typing.get_args(each)[0])
        current = following
    found = [
        each
        for kind in current
        for each in _unwrap(kind)
        if isinstance(each, type) and issubclass(each, pydantic.BaseModel)
    ]
    return found[0] if found else None


def _unknown_key(error: Any, model: Any) -> str:
    """An unknown key, with the keys allowed there and the nearest of them."""
    loc = tuple(error["loc"])
    holder = _model_at(model, loc[:-1]) if model is not None else None
    if holder is None:
        return "unknown key (check the spelling)"
    allowed = list(holder.model_fields)
    return f"unknown key{did_you_mean(loc[-1], allowed)}; the keys allowed here: {', '.join(allowed)}"


def _message(error: Any, model: Any = None) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return _unknown_key(error, model)
    if kind == "missing":
        return "required key is missing"
    if kind == "string_pattern_mismatch":
        pattern = str((error.get("ctx") or {}).get("pattern", ""))
        words = PATTERN_WORDS.get(pattern, "a value of the documented form (see policy/fleet.schema.json)")
        return f"expected {words}, not {_given(error.get('input'))}"
    if kind in TYPE_WORDS:
        return f"expected {TYPE_WORDS[kind]}, not {_given(error.get('input'))}"
    msg = str(error["msg"])
    return msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg


def problems_from(
    exc: pydantic.ValidationError,
    doc: YamlDocument,
    prefix: tuple[object, ...] = (),
    model: type[pydantic.BaseModel] | None = None,
) -> list[Problem]:
    """Translate a pydantic error into located problems (one per failing key); with the ``model`` validated, an
    unknown key names the keys allowed where it is, and the nearest one."""
    out = []
    for error in exc.errors():
        loc = tuple(part for part in error["loc"] if not (isinstance(part, str) and part.startswith("function-")))
        out.append(doc.problem((*prefix, *loc), _message({**error, "loc": loc}, model)))
    return out


def validate_document(model: type[M], doc: YamlDocument, context: dict[str, Any] | None = None) -> M:
    """Build ``model`` from the document's data, raising ``InputError`` with every problem on failure."""
    if not isinstance(doc.data, dict):
        raise InputError([doc.problem((), "the file must hold a mapping of keys at the top level")])
    try:
        return model.model_validate(doc.data, context=context)
    except pydantic.ValidationError as exc:
        raise InputError(problems_from(exc, doc, model=model)) from None
