"""No catch-all module: each module of fleet/ (the model, the program, the tools, the report) and components/ holds
one concept, and stays under about 500 lines."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

MAX_LINES = 500
PACKAGES = ("fleet", "components")
# Over the limit for now: the most lines each may have, and why; remove an entry when its module is split.
KNOWN_LONG: dict[str, tuple[int, str]] = {}


def module_lengths(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, int]:
    """Each Python module under ``packages`` of ``root`` (as a path relative to it) -> its number of lines."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def too_long(lengths: dict[str, int], known: dict[str, tuple[int, str]]) -> dict[str, int]:
    """The modules over ``MAX_LINES``, or over their own limit when ``known`` names them."""
    return {module: n for module, n in lengths.items() if n > known.get(module, (MAX_LINES, ""))[0]}


def test_no_module_is_over_500_lines() -> None:
    long = too_long(module_lengths(ROOT), KNOWN_LONG)
    assert not long, f"split these by concept (one job, one module): {long}"


def test_every_known_long_module_is_still_long() -> None:
    """An exception outlives its reason once the module is split (or gone): then its entry goes."""
    lengths = module_lengths(ROOT)
    stale = {module: lengths.get(module) for module in KNOWN_LONG if lengths.get(module, 0) <= MAX_LINES}
    assert not stale, f"these are split now: remove them from KNOWN_LONG: {stale}"


def test_a_long_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "fleet" / "tools" / "doctor").mkdir(parents=True)
    (tmp_path / "fleet" / "tools" / "doctor" / "rows.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    lengths = module_lengths(tmp_path)
    assert lengths == {"fleet/tools/doctor/rows.py": MAX_LINES + 1, "components/short.py": MAX_LINES}
    assert too_long(lengths, {}) == {"fleet/tools/doctor/rows.py": MAX_LINES + 1}
    assert too_long(lengths, {"fleet/tools/doctor/rows.py": (MAX_LINES + 1, "being split")}) == {}
