"""docs/features.md maps each feature to its model, component, policy-pack module, report section, tests and doc
page: every path it names exists, and every feature names its model, its tests and its page."""

from __future__ import annotations

import re

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "features.md"
CODE = re.compile(r"`([^`]+)`")
COLUMNS = ["feature", "model", "component or tool", "policy pack", "report", "tests", "doc"]


def named_paths(cell: str) -> list[str]:
    """The repository paths a table cell names in backticks (``fleet/model/core/``, ``README.md``), not the keys or
    names beside them (``SharingSettings``, ``/federate``)."""
    return [
        token
        for token in CODE.findall(cell)
        if re.fullmatch(r"[\w.-]+(/[\w.-]*)*", token) and ("/" in token or token.endswith((".md", ".yml", ".py")))
    ]


def rows() -> list[dict[str, str]]:
    """The feature table, one mapping of column -> cell per feature."""
    lines = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


def test_every_path_named_exists():
    named = [(row["feature"], path) for row in rows() for cell in row.values() for path in named_paths(cell)]
    assert len(named) > 50
    missing = [f"{feature}: {path}" for feature, path in named if not (ROOT / path).exists()]
    assert missing == []


def test_every_feature_names_its_model_tests_and_page():
    features = rows()
    assert len(features) >= 10
    for row in features:
        assert named_paths(row["model"]), row["feature"]
        assert any(p.startswith("tests/") for p in named_paths(row["tests"])), row["feature"]
        assert any(p.endswith(".md") for p in named_paths(row["doc"])), row["feature"]


def model_package(path: str) -> str:
    """The package of fleet/model/ a path lies in (``fleet/model/queues``), or the loader (``loader.py``)."""
    return "/".join(path.split("/")[:3])


def test_each_feature_names_one_model_package():
    """A feature's model is one package of fleet/model/ (the core, its own, the policy file's) or the loader: the
    model column names paths inside one of them only."""
    spread = {
        row["feature"]: sorted({model_package(p) for p in named_paths(row["model"])})
        for row in rows()
        if len({model_package(p) for p in named_paths(row["model"])}) != 1
    }
    assert spread == {}
    assert all(p.startswith("fleet/model/") for row in rows() for p in named_paths(row["model"]))


def test_a_model_spread_over_packages_is_seen():
    cell = "`fleet/model/queues/`, `fleet/model/queues/settings.py`, `fleet/model/core/fleet.py` (`Dispatch`)"
    assert sorted({model_package(p) for p in named_paths(cell)}) == ["fleet/model/core", "fleet/model/queues"]


def test_the_path_finder_tells_paths_from_names():
    cell = (
        "`fleet/model/core/fleet.py`, `SharingSettings`, `/federate`, `README.md`, `defaults.gpu_pool`, "
        "`.github/workflows/`"
    )
    assert named_paths(cell) == ["fleet/model/core/fleet.py", "README.md", ".github/workflows/"]
