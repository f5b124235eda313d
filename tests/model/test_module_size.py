"""No catch-all module in the model: each module of fleet/model holds one concept, and stays under about 500 lines."""

from __future__ import annotations

from tests.conftest import ROOT

MAX_LINES = 500


def test_no_model_module_is_over_500_lines() -> None:
    model = ROOT / "fleet" / "model"
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(model.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concept (one feature, one module): {long}"
