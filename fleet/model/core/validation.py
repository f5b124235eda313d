"""Validating a parsed YAML document against a pydantic model, with every error located by line."""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Any, TypeVar

import pydantic

from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.yaml_source import YamlDocument

M = TypeVar("M", bound=pydantic.BaseModel)


class StrictModel(pydantic.BaseModel):
    """Base for every input model: immutable, unknown keys rejected, no silent type coercion of strings."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", strict=False)

    @pydantic.field_validator("*", mode="before")
    @classmethod
    def _true_is_not_a_number(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        """YAML's true and false are not the numbers 1 and 0, nor a number true or false: pydantic's lax mode takes
        either for the other (``max_nodes: true`` planned one node, ``spot: 1`` a spot pool)."""
        kinds = _field_kinds(cls, str(info.field_name))
        if isinstance(value, bool) and kinds & {int, float} and bool not in kinds:
            number = "a whole number, such as 2" if int in kinds else "a number, such as 0.5"
            raise ValueError(f"expected {number}, not {str(value).lower()}")
        if kinds == {bool} and isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(f"expected true or false, not {value!r}")
        return value


# What each pattern of the input models means, in the user's words with an example: a message never shows a
# regular expression.
PATTERN_WORDS = {
    r"^[1-9][0-9]*[smh]$": "a whole number of seconds, minutes or hours above zero, such as 30s, 5m or 2h",
    r"^[1-9][0-9]*[hdwy]$": "a whole number of hours, days, weeks or years above zero, such as 12h, 7d or 1y",
    r"^[1-9][0-9]*(Gi|Ti)$": "a size in Gi or Ti above zero, such as 100Gi",
    r"^[1-9][0-9]*Gi$": "a size in Gi above zero, such as 10Gi",
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
    if value is None:
        return "an empty value (null)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.cache
def _field_kinds(model: type[pydantic.BaseModel], field: str) -> frozenset[Any]:
    """The types a model's field may hold (:func:`_unwrap`), worked out once per field, not once per value read."""
    return frozenset(_unwrap(model.model_fields[field].annotation))


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
                    elif each.model_config.get("extra") == "allow":  # entries of any name (queues by name)
                        extra = typing.get_type_hints(each).get("__pydantic_extra__")
                        following.extend(typing.get_args(extra)[1:2])
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


def _named_entry_near_a_key(loc: tuple[object, ...], model: Any) -> str:
    """Where a model takes entries of any name besides its keys (``queues``: ``manager``, ``spill`` and queues by
    name), a key misspelt is taken for an entry: `` (did you mean 'spill'?)`` then, else empty."""
    if model is None or not loc or not isinstance(loc[-1], str):
        return ""
    holder = _model_at(model, loc[:-1])
    if holder is None or holder.model_config.get("extra") != "allow" or loc[-1] in holder.model_fields:
        return ""
    return did_you_mean(loc[-1], holder.model_fields)


def _choices(error: Any) -> list[str]:
    """The values a ``literal_error`` or ``enum`` error allows, from pydantic's ``'a', 'b' or 'c'``."""
    return re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))


BOUND_WORDS = {  # pydantic's bound errors: the bound's name in its context, and the words before it
    "greater_than_equal": ("ge", "{} or more"),
    "greater_than": ("gt", "more than {}"),
    "less_than_equal": ("le", "at most {}"),
    "less_than": ("lt", "less than {}"),
}


def _message(error: Any, model: Any = None) -> str:
    kind = error["type"]
    loc = tuple(error["loc"])
    if kind == "extra_forbidden":
        return _unknown_key(error, model)
    if kind in ("literal_error", "enum"):
        choices = _choices(error)
        if loc and loc[-1] == "[key]":  # a mapping's key out of a fixed set: the clouds
            return f"unknown key{did_you_mean(loc[-2], choices)}; the keys allowed here: {', '.join(choices)}"
        return f"expected one of {', '.join(choices)}, not {_given(error.get('input'))}"
    if kind in BOUND_WORDS:
        name, words = BOUND_WORDS[kind]
        bound = (error.get("ctx") or {}).get(name)
        shown = f"{bound:g}" if isinstance(bound, float) else bound  # 0, not 0.0
        return f"expected {words.format(shown)}, not {_given(error.get('input'))}"
    near = _named_entry_near_a_key(loc, model)
    if near and kind in TYPE_WORDS:
        keys = ", ".join(_model_at(model, loc[:-1]).model_fields)  # type: ignore[union-attr]
        return (
            f"unknown key{near}; the keys allowed here: {keys}, and names of entries of their own, each holding "
            f"{TYPE_WORDS[kind]}, not {_given(error.get('input'))}"
        )
    if kind == "missing":
        holder = _model_at(model, loc[:-1]) if model is not None and loc else None
        field = holder.model_fields.get(str(loc[-1])) if holder is not None else None
        meaning = f": {field.description}" if field is not None and field.description else ""
        return f"required key is missing{meaning}"
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
        message = _message({**error, "loc": loc}, model)
        where = loc[:-1] if loc and loc[-1] == "[key]" else loc  # a mapping's key: the key itself is the place
        out.append(doc.problem((*prefix, *where), message))
    return out


def validate_document(model: type[M], doc: YamlDocument, context: dict[str, Any] | None = None) -> M:
    """Build ``model`` from the document's data, raising ``InputError`` with every problem on failure."""
    if not isinstance(doc.data, dict):
        raise InputError([doc.problem((), "the file must hold a mapping of keys at the top level")])
    try:
        return model.model_validate(doc.data, context=context)
    except pydantic.ValidationError as exc:
        raise InputError(problems_from(exc, doc, model=model)) from None
