"""The pure selection: changed paths and the old and new policy in, the stacks to act on (and why) out."""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import functools
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.model.core.clusters import Cluster
from fleet.model.core.errors import InputError, Problem
from fleet.model.core.fleet import Fleet
from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.core.yaml_source import parse_yaml, read_yaml
from fleet.model.loader import POLICY_FILE, ROOT, load_fleet

POLICY_PATH = "policy/fleet.yaml"
STACK_FILE = "stacks/Pulumi.*.yaml"
ZERO_SHA = "0" * 40
# A commit id (abbreviated or whole): CI passes the commit before a push or a merge request's base, which a shallow
# clone, a force push or a new branch (ZERO_SHA) may not have; every stack is selected then. A name that is no
# commit id and not in the clone (a typo of a branch) is an error instead.
COMMIT_ID = re.compile(r"^[0-9a-fA-F]{7,64}$")

# Paths (fnmatch patterns) whose change reaches every stack: the program's entry and project file, the
# dependencies, the components, and the CrossGuard pack that judges every stack. The code and data under CODE_DIRS
# reach every stack only when the program or the pack reads them (``deployed_files``); the rest there is tooling.
SHARED = (
    "__main__.py",
    "Pulumi.yaml",
    "requirements*.txt",
    "requirements*.lock",
    "components/*",  # the program's components (loaded by cloud name: GpuCluster.for_cloud)
    "policy/*",  # the pack's code and requirements; policy/fleet.yaml and the schema are handled before this
)
CODE_DIRS = ("fleet/",)
# Where `pulumi up` and the policy pack start: everything they import, directly or not, is deployed code.
ENTRY_POINTS = ("__main__.py", "policy/__main__.py", "policy/gpufleet_policies/*.py", "components/**/*.py")
CODE_PACKAGES = ("fleet", "components")
# Paths never read by `pulumi up`: tests, docs, CI definitions, editor and tool configuration.
NOT_DEPLOYED = (
    "*.md",
    "tests/*",
    "docs/*",
    "benchmarks/*",
    ".github/*",
    ".gitlab-ci.yml",
    ".gitlab/*",
    ".ci/*",
    ".yamllint",
    ".hadolint.yaml",
    "examples/*",  # example fleets for a team to start from, planned only by the tests
    ".gitignore",
    "Makefile",
    "pyproject.toml",
    "LICENSE*",
    "policy/fleet.schema.json",  # generated for editors from fleet/model/policy_file/schema.py
)
# Inside workloads/<w>/: files that are test data or image sources, not read by the program (the loader reads
# workload.yaml, mtail/*.mtail and files/*).
# test_*.py: tests of its own code; requirements*.txt: the image's hash-locked packages (built, not deployed)
WORKLOAD_NOT_DEPLOYED = ("sample.log", "Dockerfile", "requirements*.txt", "*.md", "test_*.py")
# Monitoring keys only one side uses (components/kubernetes/prometheus_stack.py, federation.py); any other key
# reaches every cluster.
LEAF_ONLY_MONITORING = ("leaf_retention",)
CENTRAL_ONLY_MONITORING = ("federation_interval", "central_retention", "central_storage")
POLICY_SECTIONS = ("defaults", "monitoring", "clusters", "workloads")


@dataclass(frozen=True)
class LoadedPolicy:
    """A policy file as ``load_fleet`` resolves it, plus its plain YAML (to tell a cluster's own edit from a
    change of the defaults)."""

    fleet: Fleet
    raw: dict[str, Any]


@dataclass(frozen=True)
class StackEntry:
    """One stack to preview or deploy, with what CI needs to pick credentials and why it was selected."""

    stack: str
    cloud: str
    region: str
    central: bool
    reasons: tuple[str, ...]
    approval: bool = True  # its preview waits for a maintainer's approval (``needs_approval``)

    def matrix_entry(self) -> dict[str, Any]:
        """The flat entry of a CI matrix (GitHub ``include``)."""
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "region": self.region,
            "central": self.central,
            "approval": self.approval,
        }


@dataclass(frozen=True)
class Selection:
    """The stacks a change touches (non-central first, central last), removed clusters, and notes."""

    stacks: tuple[StackEntry, ...]
    removed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Stack names in deployment order."""
        return [s.stack for s in self.stacks]

    @property
    def leaves(self) -> list[StackEntry]:
        """The selected non-central stacks."""
        return [s for s in self.stacks if not s.central]

    @property
    def central(self) -> list[StackEntry]:
        """The central stack if it is selected (a list of zero or one)."""
        return [s for s in self.stacks if s.central]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: names, matrix entries for leaves and central, reasons, removed clusters, notes."""
        return {
            "stacks": self.names,
            "leaves": [s.matrix_entry() for s in self.leaves],
            "central": [s.matrix_entry() for s in self.central],
            "reasons": {s.stack: list(s.reasons) for s in self.stacks},
            "removed": list(self.removed),
            "notes": list(self.notes),
        }


# --- loading a policy version ----------------------------------------------------------------------------------


def load_policy_file(path: Path | str = POLICY_FILE, workloads_dir: Path = WORKLOADS_DIR) -> LoadedPolicy:
    """Load a policy file from disk (``InputError`` when it is invalid)."""
    fleet = load_fleet(path, workloads_dir)
    return LoadedPolicy(fleet, _raw(read_yaml(path).data))


def load_policy_text(text: str, label: str, workloads_dir: Path = WORKLOADS_DIR) -> LoadedPolicy:
    """Load policy text (e.g. from ``git show``) with the same loader; problems name ``label`` as the file."""
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-policy-") as tmp:
        path = Path(tmp) / "fleet.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            fleet = load_fleet(path, workloads_dir)
        except InputError as exc:
            raise InputError([_relabel(p, str(path), label) for p in exc.problems]) from None
    return LoadedPolicy(fleet, _raw(parse_yaml(text, label).data))


def _relabel(problem: Problem, path: str, label: str) -> Problem:
    return Problem(label if problem.file == path else problem.file, problem.line, problem.path, problem.message)


def _raw(data: Any) -> dict[str, Any]:
    return data if isinstance(data, dict) else {}


# --- the pure selection ----------------------------------------------------------------------------------------


def classify(path: str) -> tuple[str, str]:
    """What a changed path reaches: ``("policy", "")``, ``("stack", name)``, ``("workload", name)``,
    ``("workload-metrics", name)``, ``("shared", path)``, ``("unclassified", path)`` (both reach every stack)
    or ``("none", why)``."""
    if path == POLICY_PATH:
        return "policy", ""
    if fnmatch.fnmatchcase(path, STACK_FILE):
        return "stack", path[len("stacks/Pulumi.") : -len(".yaml")]
    if path.startswith("workloads/"):
        parts = path.split("/")
        if len(parts) < 3:
            return "none", "a file beside the workload folders"
        rest = "/".join(parts[2:])
        if any(fnmatch.fnmatchcase(rest, p) for p in WORKLOAD_NOT_DEPLOYED):
            return "none", f"{rest} is not read by the program"
        # workload.yaml declares the metrics the central Prometheus federates from every leaf
        return ("workload-metrics" if rest == "workload.yaml" else "workload"), parts[1]
    if any(fnmatch.fnmatchcase(path, p) for p in NOT_DEPLOYED):
        return "none", "not deployed"
    if any(fnmatch.fnmatchcase(path, p) for p in SHARED):
        return "shared", path
    if path.startswith(CODE_DIRS):
        if path in deployed_files() or not (ROOT / path).is_file():
            return "shared", path  # read by the program or the pack; or removed or unknown here: to be safe
        return "none", "a tool of the repository (CLI, plan engine, render, report, stack selection): never deployed"
    return "unclassified", path


def _imported_files(root: Path, rel: str) -> set[str]:
    """The repository files of the modules ``rel`` imports (anywhere in it, lazy imports too, not those under
    ``if TYPE_CHECKING:``), with the ``__init__.py`` of their packages."""
    found: set[str] = set()
    tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # imported for type checkers only: never run
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] not in CODE_PACKAGES:
                continue
            for depth in range(1, len(parts) + 1):
                base = "/".join(parts[:depth])
                for candidate in (f"{base}.py", f"{base}/__init__.py"):
                    if (root / candidate).is_file():
                        found.add(candidate)
    return found


@functools.lru_cache(maxsize=4)
def deployed_files(root: Path = ROOT) -> frozenset[str]:
    """The files under CODE_DIRS that `pulumi up` or the policy pack read: every module imported, transitively,
    from ENTRY_POINTS, and every data file whose name such a module's source mentions (catalogue.yaml,
    images.yaml). The CLI and its tools are not among them, so changing one selects no stack."""
    modules: set[str] = set()
    todo = [str(f.relative_to(root)) for pattern in ENTRY_POINTS for f in sorted(root.glob(pattern)) if f.is_file()]
    while todo:
        rel = todo.pop()
        if rel in modules:
            continue
        modules.add(rel)
        todo.extend(_imported_files(root, rel) - modules)
    sources = "\n".join((root / m).read_text(encoding="utf-8") for m in modules)
    data = {
        str(f.relative_to(root))
        for d in CODE_DIRS
        for f in (root / d).rglob("*")
        if f.is_file() and f.suffix != ".py" and "__pycache__" not in f.parts and f.name in sources
    }
    return frozenset({m for m in modules if m.startswith(CODE_DIRS)} | data)


def _normal(cluster: Cluster) -> Cluster:
    """The cluster with its pools in card order: listing the same cards in another order changes nothing."""
    return dataclasses.replace(cluster, pools=tuple(sorted(cluster.pools, key=lambda p: p.card)))


def _pairs(fleet: Fleet, cluster: Cluster) -> set[tuple[str, str, str | None]]:
    """The (workload, card, schedule) of every benchmark the stack declares or prepares: its own, and with the fleet's
    queues, the queued Jobs and sweep points on the manager and what each worker may be given."""
    pairs = {(b.workload.name, b.pool.card, b.schedule) for b in fleet.benchmarks(cluster)}
    pairs |= {(b.workload.name, b.pool.card, "dispatched") for b in fleet.dispatched_to(cluster)}
    pairs |= {(p.workload.name, p.card, f"dispatched n{p.accelerators}") for p, _ in fleet.queued_points_on(cluster)}
    if fleet.dispatch is not None and fleet.dispatch.manager == cluster.name:
        pairs |= {(j.workload.name, j.card, f"queue {j.queue.name}") for j in fleet.queued_jobs()}
        pairs |= {(p.workload.name, p.card, f"queue {p.queue.name} n{p.accelerators}") for p in fleet.queued_points()}
    return pairs


def _section(raw: dict[str, Any], cluster: Cluster) -> Any:
    clusters = raw.get("clusters") or {}
    return (clusters.get(cluster.cloud) or {}).get(cluster.name)


def _runners(fleet: Fleet, workload: str) -> list[str]:
    """The stacks a change of ``workload``'s folder touches: those that run, prepare or declare its Jobs."""
    return [c.name for c in fleet.clusters.values() if any(p[0] == workload for p in _pairs(fleet, c))]


def _policy_reasons(old: LoadedPolicy, new: LoadedPolicy) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """Reasons per stack of the new policy, the removed clusters, and reasons to select every stack."""
    reasons: dict[str, list[str]] = {}
    o, n = old.fleet, new.fleet
    central = n.central.name

    def add(stack: str, why: str) -> None:
        reasons.setdefault(stack, []).append(why)

    for key in sorted(set(old.raw) | set(new.raw)):
        if key not in POLICY_SECTIONS and old.raw.get(key) != new.raw.get(key):
            return (
                {},
                [],
                [f"policy: top-level key {key!r} changed, which fleet/tools/delivery/affected/ does not model"],
            )

    for name, cluster in n.clusters.items():
        before = o.clusters.get(name)
        if before is None:
            add(name, "policy: cluster added")
            if not cluster.central:
                add(central, f"policy: cluster {name} added (a new federation job)")
            continue
        if _normal(before) != _normal(cluster):
            if before.central != cluster.central:
                add(name, "policy: now the central cluster" if cluster.central else "policy: no longer central")
            elif _section(old.raw, before) != _section(new.raw, cluster):
                add(name, f"policy: clusters.{cluster.cloud}.{name} changed")
            else:
                add(name, "policy: defaults changed its effective settings")
            if before.cloud != cluster.cloud and not cluster.central:
                add(central, f"policy: cluster {name} moved from {before.cloud} to {cluster.cloud} (federation labels)")
        was, now = _pairs(o, before), _pairs(n, cluster)
        if was != now:
            plus = [f"+{w}/{c}" + (f" ({s})" if s else "") for w, c, s in sorted(now - was, key=str)]
            minus = [f"-{w}/{c}" for w, c, s in sorted(was - now, key=str)]
            add(name, "policy: workload placement changed: " + ", ".join(plus + minus))
        other_side = LEAF_ONLY_MONITORING if cluster.central else CENTRAL_ONLY_MONITORING
        keys = [k for k in type(n.monitoring).model_fields if k not in other_side]
        changed = [k for k in keys if getattr(o.monitoring, k) != getattr(n.monitoring, k)]
        if changed:
            add(name, "policy: monitoring." + ", monitoring.".join(changed) + " changed")
    removed = [name for name in o.clusters if name not in n.clusters]
    for name in removed:
        if not o.clusters[name].central:
            add(central, f"policy: cluster {name} removed (its federation job goes)")
    return reasons, removed, []


def select_stacks(
    changed: Iterable[str],
    new: LoadedPolicy,
    old: LoadedPolicy | None = None,
    *,
    old_problem: str = "",
) -> Selection:
    """The stacks that ``changed`` paths touch, given the new policy and the old one (``None`` when unknown).

    ``old_problem`` says why the old policy is missing (it did not load, or was not given); when the policy
    file is among the changes and there is no old policy to compare, every stack is selected with a note.
    """
    fleet = new.fleet
    reasons: dict[str, list[str]] = {}
    notes: list[str] = []
    removed: list[str] = []
    everywhere: list[str] = []

    def add(stack: str, why: str) -> None:
        if why not in reasons.setdefault(stack, []):
            reasons[stack].append(why)

    olds = old.fleet if old is not None else None
    shared: list[str] = []
    unclassified: list[str] = []
    for path in sorted(set(changed)):
        kind, what = classify(path)
        if kind == "shared":
            shared.append(what)
        elif kind == "unclassified":
            unclassified.append(what)
        elif kind == "stack":
            if what in fleet.clusters:
                add(what, f"stack config changed: {path}")
            elif olds is not None and what in olds.clusters:
                pass  # a removed cluster: reported below from the policy diff
            else:
                notes.append(f"{path} changed but {what!r} is not a cluster of the policy: not planned")
        elif kind in ("workload", "workload-metrics"):
            runners = _runners(fleet, what) + (_runners(olds, what) if olds is not None else [])
            for stack in dict.fromkeys(runners):
                if stack in fleet.clusters:
                    add(stack, f"workload {what} changed ({path}) and runs here")
            if kind == "workload-metrics":
                add(
                    fleet.central.name,
                    f"workload {what} changed ({path}): the central Prometheus federates its metrics",
                )
        elif kind == "policy":
            if old is None:
                everywhere.append(f"{POLICY_PATH} changed and {old_problem or 'the old version is unknown'}")
                notes.append(f"every stack is selected: {old_problem or 'no old policy to compare with'}")
            else:
                by_stack, gone, everything = _policy_reasons(old, new)
                everywhere += everything
                for stack, whys in by_stack.items():
                    for why in whys:
                        add(stack, why)
                removed += gone
    if shared:
        everywhere.append("shared code changed: " + _some(shared))
    if unclassified:
        everywhere.append(
            f"not classified by fleet/tools/delivery/affected/, so every stack to be safe: {_some(unclassified)}"
        )
    for why in everywhere:
        for name in fleet.clusters:
            add(name, why)
    for name in removed:
        notes.append(
            f"cluster {name!r} left the policy: its stack is not planned; destroy it by hand "
            f"(pulumi state unprotect, then pulumi destroy --stack {name}) and remove stacks/Pulumi.{name}.yaml"
        )
    return _ordered(fleet, reasons, removed, notes)


def _some(paths: list[str], shown: int = 4) -> str:
    more = f" (+{len(paths) - shown} more)" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def select_all(new: LoadedPolicy, why: str = "every stack requested") -> Selection:
    """Every stack of the policy (drift checks, manual full deploys)."""
    return _ordered(new.fleet, {name: [why] for name in new.fleet.clusters}, [], [])


def needs_approval(fleet: Fleet, cluster: Cluster, stacks_dir: Path = ROOT / "stacks") -> bool:
    """Whether a pull request's preview of ``cluster`` waits for a maintainer (docs/delivery.md, "Previews"): the
    central (it reads every leaf's federation credentials), the queues' manager (every worker's kubeconfig) and every
    stack without a preview identity (``gpu-fleet:previewPrincipal``; Magnum has none), whose preview would use the
    cluster's admin credentials."""
    if cluster.central or (fleet.dispatch is not None and fleet.dispatch.manager == cluster.name):
        return True
    path = stacks_dir / f"Pulumi.{cluster.name}.yaml"
    try:
        data = read_yaml(path).data if path.is_file() else None
    except InputError:
        return True
    config = data.get("config") if isinstance(data, dict) else None
    return not (isinstance(config, dict) and config.get("gpu-fleet:previewPrincipal"))


def _ordered(fleet: Fleet, reasons: dict[str, list[str]], removed: list[str], notes: list[str]) -> Selection:
    order = [c for c in fleet.clusters.values() if not c.central] + [fleet.central]
    stacks = tuple(
        StackEntry(c.name, c.cloud, c.region or "", c.central, tuple(reasons[c.name]), needs_approval(fleet, c))
        for c in order
        if c.name in reasons
    )
    return Selection(stacks, tuple(removed), tuple(notes))


def affected(
    changed: Sequence[str],
    new_policy: str,
    old_policy: str | None = None,
    *,
    workloads_dir: Path = WORKLOADS_DIR,
    old_workloads_dir: Path | None = None,
) -> Selection:
    """``select_stacks`` from policy texts: the entry point for tests and for ``--files``/``--old-policy``.

    The new policy must load (``InputError`` otherwise); an old policy that does not load selects every stack
    with a note, since nothing can be compared.
    """
    new = load_policy_text(new_policy, f"{POLICY_PATH} (new)", workloads_dir)
    old_wl = old_workloads_dir or workloads_dir
    return compare(changed, new, old_policy, label=f"{POLICY_PATH} (old)", old_workloads_dir=old_wl)


def compare(
    changed: Sequence[str],
    new: LoadedPolicy,
    old_text: str | None,
    *,
    label: str = f"{POLICY_PATH} (old)",
    old_workloads_dir: Path | None = None,
) -> Selection:
    """``select_stacks`` against the old policy given as text (``None``: unknown), loaded with the workload
    folders it was written against (default: the current ones); an old policy that does not load selects
    every stack with a note."""
    wl = old_workloads_dir or WORKLOADS_DIR
    if old_text is None:
        return select_stacks(changed, new, None, old_problem=f"there is no old {POLICY_PATH}")
    try:
        old = load_policy_text(old_text, label, wl)
    except InputError as exc:
        first = exc.problems[0] if exc.problems else "unknown problem"
        return select_stacks(
            changed, new, None, old_problem=f"the old policy does not load ({len(exc.problems)} problem(s); {first})"
        )
    return select_stacks(changed, new, old)
