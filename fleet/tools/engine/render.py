"""Write what a planned stack hands to Kubernetes, Helm, Prometheus and nginx as plain files, for real tools.

``python -m fleet render --stack NAME --out DIR`` writes, under ``DIR/NAME/``:

* ``kubernetes/<kind>_<namespace>_<name>.yaml``: every Kubernetes object, as the provider would apply it;
* ``helm/<release>.values.yaml``: the values of every Helm release (chart and version in a header);
* ``prometheus/prometheus.yml`` and ``prometheus/rules/<name>.yml``: what the program hands the cluster's
  Prometheus through kube-prometheus-stack: external labels, intervals, the additional scrape jobs (the
  central's federation jobs) and the rule files (the operator adds its own jobs for the monitors);
* ``gateway/nginx.conf``: the mTLS federation gateway of a leaf cluster;
* ``gitlab-runner/<release>.config.toml``: each GitLab runner's ``[[runners]]`` configuration (the chart adds the
  global section: concurrency, the metrics listener).

Secrets never reach the disk: every secret value is written as ``[secret]`` (certificate *paths* are plain).

A stack's folder is replaced as a whole: its files are written into ``DIR/.render-new.NAME`` (same file
system) and renamed into place, so a folder is either the old output or the complete new one, never half
written, and stale files never survive. Runs into the same ``DIR`` take turns on ``DIR/.render.lock``
(``flock``); the next run puts back what an interrupted one left (:func:`render_lock`).
"""

from __future__ import annotations

import fcntl
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleet.model.core import pod_contract
from fleet.model.monitoring.prometheus import to_yaml
from fleet.tools.engine.mock_engine import Registration
from fleet.tools.engine.plan import StackPlan

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KUBERNETES = "kubernetes:"
# components.kubernetes.prometheus_stack.RELEASE: the kube-prometheus-stack release of every cluster
PROMETHEUS_RELEASE = "kps"
GATEWAY_CONF_KEY = "nginx.conf"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _file_part(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-") or "_"


def _sorted(value: Any, first: tuple[str, ...] = ()) -> Any:
    """Maps with their keys in order (``first`` ones ahead), so files read well and diff stably."""
    if isinstance(value, dict):
        keys = [k for k in first if k in value] + sorted(k for k in value if k not in first)
        return {k: _sorted(value[k], first) for k in keys}
    if isinstance(value, list):
        return [_sorted(v, first) for v in value]
    return value


def kubernetes_manifest(reg: Registration) -> dict[str, Any]:
    """The object as the Kubernetes provider would send it (secrets redacted), apiVersion and kind first."""
    return _sorted(reg.plain_inputs(), ("apiVersion", "kind", "metadata", "name", "namespace"))


def _is_kubernetes_object(reg: Registration) -> bool:
    return reg.type.startswith(KUBERNETES) and reg.type != HELM_RELEASE and reg.custom


def _prometheus_files(values: dict[str, Any]) -> dict[str, str]:
    """``prometheus.yml`` and rule files from kube-prometheus-stack values (what the operator gets from us)."""
    spec = values.get("prometheus", {}).get("prometheusSpec", {})
    rules = values.get("additionalPrometheusRulesMap", {})
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": spec.get("scrapeInterval", "1m"),
            "evaluation_interval": spec.get("evaluationInterval", spec.get("scrapeInterval", "1m")),
            "external_labels": spec.get("externalLabels", {}),
        },
        "rule_files": [f"rules/{_file_part(name)}.yml" for name in rules],
        "scrape_configs": _sorted(spec.get("additionalScrapeConfigs", []), ("job_name",)),
    }
    files = {"prometheus/prometheus.yml": to_yaml(config)}
    for name, groups in rules.items():
        files[f"prometheus/rules/{_file_part(name)}.yml"] = to_yaml(groups)
    return files


def rendered_files(plan: StackPlan) -> dict[str, str]:
    """Relative path -> text of every file ``render`` writes for one planned stack."""
    files: dict[str, str] = {}
    for reg in plan.registrations:
        if reg.type == HELM_RELEASE:
            inputs = reg.plain_inputs()
            release = str(inputs.get("name", reg.name))
            repo = inputs.get("repositoryOpts", {}).get("repo", "")
            header = f"# Helm release {release}: chart {inputs.get('chart')} {inputs.get('version')} from {repo}\n"
            values = _sorted(inputs.get("values", {}))
            files[f"helm/{_file_part(release)}.values.yaml"] = header + to_yaml(values)
            if release == PROMETHEUS_RELEASE:
                files.update(_prometheus_files(values))
            if inputs.get("chart") == pod_contract.RUNNER_CHART:
                files[f"gitlab-runner/{_file_part(release)}.config.toml"] = values["runners"]["config"]
        elif _is_kubernetes_object(reg):
            manifest = kubernetes_manifest(reg)
            meta = manifest.get("metadata", {})
            parts = [manifest.get("kind", reg.type.rsplit(":", 1)[-1]), meta.get("namespace", "cluster"), reg.name]
            files[f"kubernetes/{'_'.join(_file_part(str(p)) for p in parts)}.yaml"] = to_yaml(manifest)
            data = manifest.get("data", {})
            if manifest.get("kind") == "ConfigMap" and GATEWAY_CONF_KEY in data:
                files["gateway/nginx.conf"] = data[GATEWAY_CONF_KEY]
    return files


LOCK_FILE = ".render.lock"
ROOT = Path(__file__).resolve().parents[3]
# The repository's own folders: output never goes into them (`render --out policy` wrote into the source tree).
SOURCE_FOLDERS = frozenset(
    {".git", ".github", ".ci", "benchmarks", "components", "docs", "examples", "fleet", "policy", "stacks"}
    | {"tests", "workloads", ".venv"}
)
_NEW = ".render-new."  # + stack: the folder being written
_OLD = ".render-old."  # + stack: the previous output, while the new folder is renamed into place


def source_tree_problem(out: Path) -> str | None:
    """Why ``out`` is not a place for output (the repository itself, or a folder of its own sources), or None."""
    where = out.resolve()
    if where == ROOT or where in ROOT.parents:
        return "is the repository itself (or above it): give a folder of its own, such as out/"
    if ROOT in where.parents:
        top = where.relative_to(ROOT).parts[0]
        if top in SOURCE_FOLDERS:
            return (
                f"is inside the repository's own {top}/: output there would mix with the sources; "
                "give a folder of its own, such as out/ (ignored by git)"
            )
    return None


def out_problem(out: Path) -> str | None:
    """Why ``out`` cannot be the output folder, or None: it (or the nearest existing folder above it) is not a
    directory, it lies in the repository's sources, or it holds files that no render wrote (a render replaces
    folders in it: it never writes over files it does not own)."""
    if out.exists() and not out.is_dir():
        return f"--out {out} exists and is not a directory"
    existing = next((p for p in out.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"--out {out}: {existing} is not a directory"
    in_sources = source_tree_problem(out)
    if in_sources:
        return f"--out {out} {in_sources}"
    if out.is_dir() and not (out / LOCK_FILE).exists() and any(out.iterdir()):
        return (
            f"--out {out} holds files that no render wrote: give a new or empty folder, such as out/ (a render "
            "replaces the stack folders in it)"
        )
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _recover(out: Path) -> None:
    """Undo what an interrupted render left in ``out``: a half-written new folder goes, and an old output
    moved aside goes back where its stack folder is missing (it is only removed once the new one is in place)."""
    for aside in out.glob(_OLD + "*"):
        stack = out / aside.name.removeprefix(_OLD)
        if stack.exists() or stack.is_symlink():
            _remove(aside)
        else:
            aside.rename(stack)
    for partial in out.glob(_NEW + "*"):
        _remove(partial)


@contextmanager
def render_lock(out: Path) -> Iterator[None]:
    """Hold the exclusive lock of the output folder ``out`` (created if missing) and recover what an
    interrupted render left there; concurrent renders into ``out`` wait for each other."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / LOCK_FILE).open("a", encoding="utf-8") as lock:  # "a": create, never truncate
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        _recover(out)
        yield


def render_stack(plan: StackPlan, out: Path) -> list[Path]:
    """Replace ``out/<stack>/`` with ``rendered_files(plan)`` as a whole (under :func:`render_lock`); return the
    paths written."""
    files = rendered_files(plan)
    root = out / plan.stack
    with render_lock(out):
        new = out / f"{_NEW}{plan.stack}"
        try:
            new.mkdir()
            for relative, text in sorted(files.items()):
                path = new / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            if root.exists() or root.is_symlink():
                root.rename(out / f"{_OLD}{plan.stack}")
            new.rename(root)
        finally:
            _recover(out)  # after success: removes the old output; after an interruption: puts it back
    return [root / relative for relative in sorted(files)]
