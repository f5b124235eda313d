"""Property: no edit of a valid policy file makes validation crash; it either loads or reports problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.model.core.errors import InputError
from fleet.model.loader import load_fleet
from tests.helpers import GOOD

BASE = yaml.safe_load(GOOD)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["t4", "k80", "all", "us-central1-a", "central", "gpus", "x100", "1.33", "0 3 * * 1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _edit(doc: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[f"extra_{value!s:.6}"] = value
    return doc


@st.composite
def edited_policies(draw: st.DrawFn) -> str:
    doc = yaml.safe_load(GOOD)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        doc = _edit(doc, path, draw(st.sampled_from(["replace", "delete", "add"])), draw(values))
    text = yaml.safe_dump(doc, sort_keys=False)
    if draw(st.booleans()):  # sometimes break the YAML text itself
        pos = draw(st.integers(0, len(text)))
        text = (
            text[:pos]
            + draw(st.sampled_from(["[", "{", ":", "\t", "- ", "'", "&a", "*b", "!!python/object:os.system"]))
            + text[pos:]
        )
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edited_policies())
def test_random_edits_never_crash(tmp_path_factory, text):
    folder: Path = tmp_path_factory.mktemp("fuzz")
    policy = folder / "fleet.yaml"
    policy.write_text(text, encoding="utf-8")
    (folder / "workloads").mkdir()
    try:
        load_fleet(policy, folder / "workloads")
    except InputError as exc:
        assert exc.problems, "an InputError must carry at least one problem"
        for problem in exc.problems:
            assert problem.line >= 1 and problem.message
            assert str(problem).startswith(str(policy.name)) or "fleet.yaml" in str(problem)
