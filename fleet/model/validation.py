"""Validating a parsed YAML document against a pydantic model, with every error located by line."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic

from fleet.model.errors import InputError, Problem
from fleet.model.yaml_source import YamlDocument

M = TypeVar("M", bound=pydantic.BaseModel)


class StrictModel(pydantic.BaseModel):
    """Base for every input model: immutable, unknown keys rejected, no silent type coercion of strings."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", strict=False)


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key (check the spelling)"
    if kind == "missing":
        return "required key is missing"
    msg = str(error["msg"])
    return msg[len("Value error, ") :] if msg.startswith("Value error, ") else msg


def problems_from(exc: pydantic.ValidationError, doc: YamlDocument, prefix: tuple[object, ...] = ()) -> list[Problem]:
    """Translate a pydantic error into located problems (one per failing key)."""
    out = []
    for error in exc.errors():
        loc = tuple(part for part in error["loc"] if not (isinstance(part, str) and part.startswith("function-")))
        out.append(doc.problem((*prefix, *loc), _message(error)))
    return out


def validate_document(model: type[M], doc: YamlDocument, context: dict[str, Any] | None = None) -> M:
    """Build ``model`` from the document's data, raising ``InputError`` with every problem on failure."""
    if not isinstance(doc.data, dict):
        raise InputError([doc.problem((), "the file must hold a mapping of keys at the top level")])
    try:
        return model.model_validate(doc.data, context=context)
    except pydantic.ValidationError as exc:
        raise InputError(problems_from(exc, doc)) from None
