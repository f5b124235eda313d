"""``render``: the files written for real tools are complete, per stack, and hold no secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from fleet.model.loader import POLICY_FILE, load_fleet
from fleet.tools.cli import main
from fleet.tools.engine.render import LOCK_FILE, render_stack
from tests.helpers import plan_one

K8S_VERSION = "1.33.0"
SECRET_MARKERS = ("PRIVATE KEY", "BEGIN CERTIFICATE", "-----BEGIN")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped fleet rendered once through the command line."""
    out = tmp_path_factory.mktemp("rendered")
    assert main(["render", "--out", str(out)]) == 0
    return out


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_stack_gets_its_files(rendered: Path) -> None:
    fleet = load_fleet(POLICY_FILE)
    assert sorted(p.name for p in rendered.iterdir()) == sorted([*fleet.clusters, LOCK_FILE])
    for name, cluster in fleet.clusters.items():
        root = rendered / name
        assert (root / "prometheus" / "prometheus.yml").is_file(), name
        assert (root / "helm" / "kps.values.yaml").is_file(), name
        assert (root / "gateway" / "nginx.conf").is_file() is (not cluster.central), name
        jobs = list((root / "kubernetes").glob("Job_*")) + list((root / "kubernetes").glob("CronJob_*"))
        # the workloads that name a queue have their Jobs once, on the manager
        queued = len(fleet.queued_jobs()) if fleet.dispatch and name == fleet.dispatch.manager else 0
        assert len(jobs) == len(fleet.workload_jobs(cluster)) + queued, name


def test_each_runners_config_toml_parses_and_puts_jobs_on_its_cards_pool(rendered: Path) -> None:
    """Derived from the policy: one config.toml per runner of the runners section, which a TOML parser reads, with
    the pool's selector, its tolerations and the card requested by the CI job's build container."""
    import tomllib

    fleet = load_fleet(POLICY_FILE)
    for name, cluster in fleet.clusters.items():
        files = {p.name: p for p in (rendered / name).glob("gitlab-runner/*.config.toml")}
        assert set(files) == {f"{r.name}.config.toml" for r in fleet.runners_of(cluster)}, name
        for runner in fleet.runners_of(cluster):
            (entry,) = tomllib.loads(files[f"{runner.name}.config.toml"].read_text(encoding="utf-8"))["runners"]
            kube, pool = entry["kubernetes"], runner.pool
            assert kube["node_selector"] == pool.node_selector
            assert kube["node_tolerations"] == {f"{t.key}={t.value}": t.effect for t in pool.pod_tolerations}
            (build,) = yaml.safe_load(kube["pod_spec"][0]["patch"])["containers"]
            assert build["resources"]["limits"] == {pool.resource: runner.accelerators}


def test_external_labels_are_unique_and_the_central_federates_every_leaf(rendered: Path) -> None:
    fleet = load_fleet(POLICY_FILE)
    labels = {}
    for name, cluster in fleet.clusters.items():
        config = _yaml(rendered / name / "prometheus" / "prometheus.yml")
        labels[name] = config["global"]["external_labels"]
        for rule_file in config["rule_files"]:
            assert (rendered / name / "prometheus" / rule_file).is_file(), (name, rule_file)
        if cluster.central:
            jobs = {j["job_name"]: j for j in config["scrape_configs"]}
            assert set(jobs) == {f"federate-{leaf}" for leaf in fleet.clusters if leaf != name}
            for job in jobs.values():
                assert job["metrics_path"] == "/federate" and job["honor_labels"] is True
                assert job["tls_config"]["cert_file"].startswith("/etc/prometheus/secrets/federation-")
        else:
            assert labels[name] == {"cluster": name, "cloud": cluster.cloud}
            assert config["scrape_configs"] == []
    leaf_labels = [tuple(sorted(v.items())) for n, v in labels.items() if not fleet.clusters[n].central]
    assert len(set(leaf_labels)) == len(leaf_labels)


def _benchmark_count() -> int:
    fleet = load_fleet(POLICY_FILE)
    return sum(len(fleet.benchmarks(c)) for c in fleet.clusters.values())


def test_no_secret_reaches_the_disk(rendered: Path) -> None:
    files = [p for p in rendered.rglob("*") if p.is_file()]
    assert len(files) > _benchmark_count()  # every Job, and each stack's own objects
    for path in files:
        text = path.read_text(encoding="utf-8")
        for marker in SECRET_MARKERS:
            assert marker not in text, f"{path} contains {marker!r}"
    secrets = list(rendered.rglob("Secret_*.yaml"))
    assert secrets
    for path in secrets:
        secret = _yaml(path)
        data = secret["stringData"]
        if not data and "-multikueue-kubeconfig-" in path.name:
            continue  # the manager's Secret of a worker whose stack has no gpu-fleet:multikueueToken yet: empty
        assert data and set(data.values()) == {"[secret]"}, path


def test_rendered_manifests_are_valid_kubernetes_objects(rendered: Path) -> None:
    checked = 0
    for path in sorted(rendered.rglob("kubernetes/*.yaml")):
        manifest = _yaml(path)
        group = manifest["apiVersion"].split("/")[0] if "/" in manifest["apiVersion"] else ""
        if "." in group and (not group.endswith(".k8s.io") or group.endswith(".x-k8s.io")):
            continue  # custom resources (PodMonitor, TrainJob, Kueue's queues): no schema in kubernetes-validate
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        checked += 1
    assert checked > _benchmark_count()  # every benchmark Job or CronJob, and each stack's namespaces, quotas...


def test_render_empties_the_stack_folder_first(tmp_path: Path) -> None:
    plan = plan_one(
        tmp_path,
        """
        clusters:
          existing:
            lab: {central: true, gpus: []}
        """,
        "lab",
        {"gpu-fleet:kubeconfig": {"secure": "djE6..."}, "gpu-fleet:storageClass": "local-path"},
    )
    stale = tmp_path / "out" / "lab" / "kubernetes" / "Job_benchmarks_gone.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Job\n", encoding="utf-8")
    written = render_stack(plan, tmp_path / "out")
    assert not stale.exists() and written and all(p.is_file() for p in written)


def test_render_of_an_unknown_stack_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--stack", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err
