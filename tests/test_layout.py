"""The code's layout: no module of the project imports, directly or through others, a module that imports it back
(lazy imports inside functions count; in fleet/, imports for type checkers only count too)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("fleet", "components")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def import_graph(packages: tuple[str, ...] = PACKAGES, typing_too: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports at run time (with ``typing_too``, also those it imports for type
    checkers only, under ``if TYPE_CHECKING:``)."""
    modules = {_module(p): p for package in packages for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if not typing_too and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (each as the path that closes it)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_import_cycles():
    graph = import_graph()
    assert "fleet.tools.cli" in graph and "components.kubernetes.infra" in graph
    assert cycles(graph) == []


def test_no_import_cycles_in_fleet_counting_imports_for_type_checkers():
    """Each feature of the model reads the core and the core reads no feature: not even for a type annotation."""
    graph = import_graph(("fleet",), typing_too=True)
    assert "fleet.model.loader" in graph and "fleet.tools.cli" in graph
    assert not any(node.level for p in (ROOT / "fleet").rglob("*.py") for node in _imports(p)), "relative import"
    assert cycles(graph) == []


def imports_outside(graph: dict[str, set[str]], inside: str, allowed: tuple[str, ...]) -> list[str]:
    """The imports of the modules under ``inside`` (a dotted prefix) of modules under none of ``allowed``."""
    return sorted(
        f"{module} imports {dep}"
        for module, deps in graph.items()
        if module == inside or module.startswith(inside + ".")
        for dep in deps
        if not any(dep == a or dep.startswith(a + ".") for a in allowed)
    )


# The model's floors (docs/layout.md, "The model"): the core imports no feature; a feature imports the core and other
# features' modules, never the policy file's composition nor the loader on top.
MODEL_TOP = ("fleet.model.policy_file", "fleet.model.loader")


def test_the_model_core_imports_no_feature_and_no_feature_imports_the_top():
    graph = import_graph(("fleet",), typing_too=True)
    assert imports_outside(graph, "fleet.model.core", ("fleet.model.core",)) == []
    features = {m.split(".")[2] for m in graph if m.startswith("fleet.model.") and m.count(".") >= 3}
    features -= {"core", "policy_file"}
    assert {"sharing", "probes", "runners", "sweeps", "queues", "billing", "monitoring"} <= features
    every_model_module = tuple(m for m in graph if m.startswith("fleet.model.") and not m.startswith(MODEL_TOP))
    for feature in sorted(features):
        assert imports_outside(graph, f"fleet.model.{feature}", every_model_module) == [], feature


def test_an_import_outside_its_floor_is_seen():
    graph = {"fleet.model.core.pools": {"fleet.model.core.taints", "fleet.model.sharing.settings"}}
    assert imports_outside(graph, "fleet.model.core", ("fleet.model.core",)) == [
        "fleet.model.core.pools imports fleet.model.sharing.settings"
    ]


def _imports(path: Path) -> list[ast.ImportFrom]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ImportFrom)]


def test_the_graph_counts_imports_for_type_checkers_when_asked():
    graph, strict = import_graph(("fleet",)), import_graph(("fleet",), typing_too=True)
    assert "fleet.report.model" in strict["fleet.report.plots"] - graph["fleet.report.plots"]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


# Which package may import which (each import edge between packages, at run time): the model is read by all and reads
# none; components build from the model (clusters install what components/kubernetes declares, never the reverse);
# the program reads the components and the model; the report reads the model; the tools (the command line, the
# offline plan, checks, delivery, the doctor) read everything, since they run the program offline and print reports;
# the policy pack reads the model only. Any other edge fails below.
ALLOWED_EDGES = {
    "components.settings": {"fleet.model"},
    "components.kubernetes": {"fleet.model", "components.settings"},
    "components.clusters": {"fleet.model", "components.settings", "components.kubernetes"},
    "fleet.program": {"fleet.model", "components.settings", "components.kubernetes", "components.clusters"},
    "fleet.report": {"fleet.model"},
    "fleet.tools": {
        "fleet.model", "fleet.report", "fleet.program", "components.settings", "components.kubernetes",
        "components.clusters",
    },
    "fleet.__main__": {"fleet.tools"},
    "policy.gpufleet_policies": {"fleet.model"},
}  # fmt: skip


def package_of(module: str) -> str:
    """The package ``module`` belongs to in ``ALLOWED_EDGES``: its first two dotted parts (``fleet.model``,
    ``components.clusters``, ``components.settings``)."""
    return ".".join(module.split(".")[:2])


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the module imports that make that edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, deps in graph.items():
        for dep in deps:
            if package_of(module) != package_of(dep):
                edges.setdefault((package_of(module), package_of(dep)), []).append(f"{module} imports {dep}")
    return edges


def test_packages_import_each_other_one_way_only():
    edges = package_edges(import_graph((*PACKAGES, "policy/gpufleet_policies")))
    assert ("fleet.program", "components.clusters") in edges and ("fleet.tools", "fleet.model") in edges
    assert set(ALLOWED_EDGES) >= {a for a, _ in edges}, "a package ALLOWED_EDGES does not list"
    wrong = sorted(m for (a, b), found in edges.items() if b not in ALLOWED_EDGES.get(a, set()) for m in found)
    assert wrong == []


def test_a_forbidden_edge_is_found():
    graph = {"components.kubernetes.infra": {"fleet.program.settings"}, "fleet.program.settings": set()}
    edges = package_edges(graph)
    assert edges == {
        ("components.kubernetes", "fleet.program"): ["components.kubernetes.infra imports fleet.program.settings"]
    }
    assert "fleet.program" not in ALLOWED_EDGES["components.kubernetes"]


def test_the_packages_say_what_is_deployed():
    """fleet/model and fleet/program are what `pulumi up` and the policy pack read; fleet/tools and fleet/report never
    are, so editing them selects no stack (fleet/tools/delivery/affected/ follows the imports to decide)."""
    from fleet.tools.delivery.affected import deployed_files

    deployed = {p for p in deployed_files() if p.endswith(".py")}
    # besides the old names: GKE's IAM roles (gke_iam.py), which docs/delivery.md and the tests read, not the program
    old_names = {f"{name.replace('.', '/')}.py" for name in OLD_NAMES} | {"fleet/model/core/clouds/gke_iam.py"}
    for package in ("fleet/model", "fleet/program"):
        modules = {str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py")} - old_names
        assert modules <= deployed, package
    for package in ("fleet/tools", "fleet/report"):
        assert not {p for p in deployed if p.startswith(package + "/")}, package
    model = [p for p in (ROOT / "fleet" / "model").rglob("*.py")]
    assert not [p.name for p in model if "import pulumi" in p.read_text(encoding="utf-8")]  # the model: no Pulumi


# The model's modules by their names before the model had a core and a package per feature (issue 46): gone, and
# nothing (benchmarks/ included) imports them or a feature package for what its modules hold.
OLD_NAMES = (
    "fleet.model.spec",
    "fleet.model.workloads",
    "fleet.model.catalogue",
    "fleet.model.prometheus",
    "fleet.model.accounting",
    "fleet.model.accounting_hours",
    "fleet.model.probe_phases",
)


def test_the_old_model_names_are_gone():
    import importlib.util

    assert [old for old in OLD_NAMES if importlib.util.find_spec(old) is not None] == []
    graph = import_graph((*PACKAGES, "policy", "tests", "benchmarks"))
    users = sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps if d in OLD_NAMES)
    assert users == []


def test_test_modules_share_helpers_not_each_other():
    """Shared test code lives in tests/helpers.py, the conftest.py files, tests/policy/support.py,
    tests/e2e/support.py and processes.py, and tests/tools/doctor/ (fake_kube_api.py, world.py, support.py)."""
    offenders = []
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(ROOT)} imports {node.module}")
    assert offenders == []


# Where each folder of tests/ finds the code it tests: the folders mirror the code's packages.
TESTED_PACKAGES = {
    "model": "fleet/model",
    "program": "fleet/program",
    "tools": "fleet/tools",
    "tools/doctor": "fleet/tools/doctor",
    "report": "fleet/report",
    "components": "components",
    "components/clusters": "components/clusters",
    "components/kubernetes": "components/kubernetes",
    "policy": "policy/gpufleet_policies",
}
# Folders of tests/ that mirror no package: whole-repository tests at the top, real tools on rendered output, the real
# receivers (tests/real, docs/tests.md), data.
UNMIRRORED = {"e2e", "real", "fixtures"}


def test_tests_are_laid_out_like_the_code():
    folders = {
        str(p.relative_to(ROOT / "tests"))
        for p in (ROOT / "tests").rglob("*")
        if p.is_dir() and "__pycache__" not in p.parts and p.relative_to(ROOT / "tests").parts[0] not in UNMIRRORED
    }
    assert folders == set(TESTED_PACKAGES)
    for folder, package in TESTED_PACKAGES.items():
        assert (ROOT / package).is_dir(), f"tests/{folder} mirrors {package}, which does not exist"


def test_each_policy_module_has_its_test_module():
    """A policy of the pack sits in a module with its name, description and check; its tests sit in
    tests/policy/test_<module>.py (or, split by aspect, test_<module>_<aspect>.py)."""
    pack = ROOT / "policy" / "gpufleet_policies"
    modules = {p.stem for p in pack.glob("*.py") if "_policy(" in p.read_text(encoding="utf-8")} - {"registry"}
    assert {"gpu_pools", "pod_security", "namespaces"} <= modules
    tests = {p.stem.removeprefix("test_") for p in (ROOT / "tests" / "policy").glob("test_*.py")}
    assert modules - tests == set()
    aspects = {t for t in tests - modules if any(t.startswith(f"{m}_") for m in modules)}
    assert tests - modules - aspects == {"pack"}  # the pack as a whole
