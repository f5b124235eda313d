"""The synthetic fleet the plan benchmark plans: N clusters cycling over clouds, their cards, stack files and
workload folders, written to a folder (benchmarks/README.md, ``plan_speed.py``)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.model.core.catalogue import load_catalogue
from fleet.model.core.clouds import cloud_rules
from fleet.model.core.workloads import WORKLOADS_DIR, Workload, load_workload

#: Clouds a synthetic fleet may mix (``--clouds``): the catalogue's (fleet/model/catalogue.yaml), in its order.
CLOUD_NAMES = tuple(load_catalogue().clouds)
#: Stack settings every synthetic stack has.
STACK_CONFIG = {
    "pulumi:disable-default-providers": ["*"],
    "gpu-fleet:stackReferencePrefix": "organization/gpu-fleet",
    "gpu-fleet:federationSourceRanges": ["10.20.0.0/16"],
}
#: What each cloud's stack needs beyond that, as tests/fixtures/fleet/stacks and stacks/ set it: the GCP project, the
#: Azure subscription, the Magnum site settings and the central volume's class (Magnum and existing clusters have no
#: default StorageClass), the existing cluster's kubeconfig (an encrypted placeholder the offline plan never decrypts).
CLOUD_STACK_CONFIG: dict[str, dict[str, Any]] = {
    "gcp": {"gcp:project": "bench-project"},
    "aws": {},
    "azure": {"azure-native:subscriptionId": "11111111-2222-3333-4444-555555555555"},
    "openstack": {
        "openstack:cloud": "bench-site",
        "gpu-fleet:storageClass": "standard",
        "gpu-fleet:magnum": {
            "image": "fedora-coreos-40",
            "keypair": "bench",
            "externalNetwork": "ext-net",
            "masterFlavor": "m2.medium",
            "kubeTag": "v1.31.5-rancher1",
            "autoscalerTag": "v1.31.5",  # the autoscaler's minor is the cluster's, as stacks/Pulumi.cern-main.yaml
            "autoscalerImage": "registry.k8s.io/autoscaling/cluster-autoscaler",
        },
    },
    "existing": {
        "gpu-fleet:storageClass": "standard",
        "gpu-fleet:kubeconfig": {"secure": "v1:YmVuY2gta3ViZWNvbmZpZw=="},
    },
}
MONITORING = {
    "scrape_interval": "30s",
    "federation_interval": "60s",
    "leaf_retention": "7d",
    "central_retention": "180d",
    "central_storage": "100Gi",
}


@dataclass(frozen=True)
class SyntheticFleet:
    """Files of a generated fleet: the policy, one stack file per cluster, the workload folders."""

    root: Path
    policy_file: Path
    stacks_dir: Path
    workloads_dir: Path
    clusters: tuple[str, ...]
    cards: tuple[str, ...]  # every card of the fleet, first cloud's first
    workloads: tuple[str, ...]
    workload_source: str  # "copied from workloads/<names>" or "minimal"
    clouds: tuple[str, ...] = ("gcp",)  # the clouds the clusters cycle over, in order
    cards_by_cloud: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the cards of each cloud's clusters


def cloud_sdk(cloud: str) -> str | None:
    """The typed provider SDK a cloud's clusters are declared with (its version is reported): the Python module of
    the package of its cluster's engine type (``azure-native:...`` is ``pulumi_azure_native``); None for a cloud
    whose clusters the fleet does not create."""
    cluster_type = cloud_rules(cloud).cluster_type
    return "pulumi_" + cluster_type.split(":", 1)[0].replace("-", "_") if cluster_type else None


def cluster_name(cloud: str, index: int) -> str:
    """The ``index``-th synthetic cluster's name: ``<cloud>-bench-NNNN`` (``stack_cloud`` reads the cloud back)."""
    return f"{cloud}-bench-{index:04d}"


def stack_cloud(stack: str) -> str:
    """The cloud of a synthetic stack, from the name ``cluster_name`` gave it."""
    return stack.split("-bench-", 1)[0]


def cloud_cards(cloud: str) -> list[str]:
    """Cards a synthetic cluster of ``cloud`` may offer, in catalogue order: those the catalogue offers there today;
    on a cloud whose pools the fleet does not build (an existing cluster) every NVIDIA card some cloud offers today."""
    catalogue = load_catalogue()
    if cloud_rules(cloud).builds_pools:
        return catalogue.available_on(cloud)
    builders = [other for other in CLOUD_NAMES if cloud_rules(other).builds_pools]
    offered = {card for other in builders for card in catalogue.available_on(other)}
    return [card for card, acc in catalogue.accelerators.items() if acc.is_nvidia and card in offered]


def _location(cloud: str, index: int) -> dict[str, str]:
    """Where the ``index``-th synthetic cluster of ``cloud`` is, from its rules and the catalogue's locations: on a
    zonal cloud the zones of its example region in turn, elsewhere its example region; none where the catalogue
    lists no locations (Magnum's regions are a site's own; an existing cluster has none)."""
    rules = cloud_rules(cloud)
    listed = load_catalogue().clouds[cloud].locations
    if listed is None:
        return {}
    if rules.zonal:
        zones = [z for z in listed.all_zones if z.rsplit("-", 1)[0] == rules.region_example]
        return {"zone": zones[index % len(zones)]}
    return {"region": rules.region_example}


def _real_workloads() -> list[Workload]:
    """The shipped workload folders that load cleanly (another change may have one half-edited)."""
    out = []
    if WORKLOADS_DIR.is_dir():
        for folder in sorted(p for p in WORKLOADS_DIR.iterdir() if (p / "workload.yaml").is_file()):
            try:
                out.append(load_workload(folder))
            except Exception:
                continue
    return out


def _metric_prefix(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name) + "_"


def _copy_workload(src: Workload, dst: Path, name: str) -> None:
    """Copy a real workload folder under a new name; metric names get a per-copy prefix so copies never clash."""
    shutil.copytree(src.folder, dst)
    data = yaml.safe_load((dst / "workload.yaml").read_text(encoding="utf-8"))
    prefix = _metric_prefix(name)
    renames = {m["name"]: prefix + m["name"] for m in data.get("metrics", [])}
    data["name"] = name
    for metric in data.get("metrics", []):
        metric["name"] = renames[metric["name"]]
    if "headline" in data and data["headline"].get("metric") in renames:
        data["headline"]["metric"] = renames[data["headline"]["metric"]]
    (dst / "workload.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    if renames:
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")\b")
        for program in (dst / "mtail").glob("*.mtail"):
            text = program.read_text(encoding="utf-8")
            program.write_text(pattern.sub(lambda m: renames[m.group(1)], text), encoding="utf-8")


def _minimal_workload(dst: Path, name: str) -> None:
    """A minimal valid workload folder (fleet/model/workloads.py): workload.yaml, one mtail program, a sample log."""
    metric = _metric_prefix(name) + "ops_total"
    spec = {
        "name": name,
        "description": "synthetic benchmark workload",
        "image": "busybox:1.36",
        "command": ["sh", "-c", "echo ops=1"],
        "accelerators": 1,
        "resources": {"cpu_request": "1", "memory_request": "1Gi", "cpu_limit": "2", "memory_limit": "2Gi"},
        "timeout_seconds": 600,
        "metrics": [{"name": metric, "type": "counter", "help": "Operations done.", "labels": []}],
        "headline": {"metric": metric, "unit": "ops"},
    }
    (dst / "mtail").mkdir(parents=True)
    (dst / "workload.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    (dst / "mtail" / f"{name}.mtail").write_text(
        f"counter {metric}\n\n/^ops=(?P<n>\\d+)$/ {{\n  {metric} += $n\n}}\n", encoding="utf-8"
    )
    (dst / "sample.log").write_text("ops=1\nops=2\n", encoding="utf-8")


def _write_workloads(workloads_dir: Path, count: int) -> tuple[list[str], str]:
    workloads_dir.mkdir(parents=True, exist_ok=True)
    real = _real_workloads()
    names = []
    for i in range(count):
        if real:
            src = real[i % len(real)]
            name = f"w{i:02d}-{src.name}"[:40].rstrip("-")
            dst = workloads_dir / name
            try:
                _copy_workload(src, dst, name)
                load_workload(dst)
            except Exception:
                shutil.rmtree(dst, ignore_errors=True)
                name = f"w{i:02d}-synthetic"
                _minimal_workload(workloads_dir / name, name)
        else:
            name = f"w{i:02d}-synthetic"
            _minimal_workload(workloads_dir / name, name)
        names.append(name)
    source = f"copied from workloads/{{{','.join(w.name for w in real)}}}" if real else "minimal"
    return names, source


def generate_fleet(
    root: Path, clusters: int, cards: int, workloads: int, clouds: Sequence[str] = ("gcp",)
) -> SyntheticFleet:
    """Write a policy with ``clusters`` clusters cycling over ``clouds`` (the first one central), each offering the
    first ``cards`` cards of its cloud (fewer where the cloud offers fewer), one stack file per cluster with the
    settings its cloud needs, and ``workloads`` workload folders placed on ``all`` cards."""
    if clusters < 1:
        raise ValueError("at least one cluster")
    unknown = [c for c in clouds if c not in CLOUD_NAMES]
    if not clouds or unknown:
        raise ValueError(f"--clouds takes {', '.join(CLOUD_NAMES)} (got {', '.join(clouds) or 'none'})")
    offered = {cloud: cloud_cards(cloud) for cloud in clouds}
    most = max(len(v) for v in offered.values())
    if not 1 <= cards <= most:
        listed = "; ".join(f"{cloud} offers {', '.join(v)}" for cloud, v in offered.items())
        raise ValueError(f"--cards must be 1..{most} ({listed})")
    chosen = {cloud: tuple(v[:cards]) for cloud, v in offered.items()}
    root.mkdir(parents=True, exist_ok=True)
    workloads_dir = root / "workloads"
    workload_names, source = _write_workloads(workloads_dir, workloads)
    placed = [(i, clouds[i % len(clouds)]) for i in range(clusters)]
    names = [cluster_name(cloud, i) for i, cloud in placed]
    by_cloud: dict[str, dict[str, Any]] = {}
    for (i, cloud), name in zip(placed, names, strict=True):
        settings_: dict[str, Any] = {**_location(cloud, i // len(clouds)), "gpus": list(chosen[cloud])}
        if i == 0:
            settings_["central"] = True
            settings_["description"] = "synthetic central cluster"
        by_cloud.setdefault(cloud, {})[name] = settings_
    policy = {
        "defaults": {
            "gpu_pool": {"min_nodes": 0, "max_nodes": 2, "spot": True},
            "system_pool": {"min_nodes": 1, "max_nodes": 3},
            "kubernetes_version": "1.33",
        },
        "monitoring": dict(MONITORING),
        "clusters": by_cloud,
        "workloads": dict.fromkeys(workload_names, "all"),
    }
    policy_file = root / "fleet.yaml"
    policy_file.write_text(
        "# synthetic fleet written by benchmarks/plan_speed.py\n" + yaml.safe_dump(policy, sort_keys=False),
        encoding="utf-8",
    )
    stacks_dir = root / "stacks"
    stacks_dir.mkdir(exist_ok=True)
    for (_, cloud), name in zip(placed, names, strict=True):
        config = {**STACK_CONFIG, **CLOUD_STACK_CONFIG[cloud]}
        (stacks_dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return SyntheticFleet(
        root,
        policy_file.resolve(),
        stacks_dir,
        workloads_dir,
        tuple(names),
        tuple(dict.fromkeys(card for cloud in clouds for card in chosen[cloud])),
        tuple(workload_names),
        source,
        tuple(clouds),
        chosen,
    )
