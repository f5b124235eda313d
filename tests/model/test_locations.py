"""Where a cluster is and which Kubernetes it runs: regions, zones and versions the catalogue knows per cloud (each
list with its source), and unknown keys named with the nearest allowed one. Each wrong input is a located error
(exit 2) or, for a version newer than the catalogue knows, a located warning."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fleet.model.core.catalogue import load_catalogue
from fleet.tools.cli import main
from tests.conftest import ROOT
from tests.helpers import GOOD


def validate(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``validate`` of ``text`` with no stack files and no workloads; (status, stderr)."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    for folder in ("stacks", "workloads"):
        (tmp_path / folder).mkdir(exist_ok=True)
    code = main(
        ["validate", "--policy", str(policy), "--stacks-dir", str(tmp_path / "stacks"),
         "--workloads-dir", str(tmp_path / "workloads")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *expected: str) -> str:
    code, err = validate(tmp_path, text, capsys)
    assert code == 2, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    return err


CATALOGUE = load_catalogue()


def facts(cloud: str):
    return CATALOGUE.clouds[cloud]  # type: ignore[index]


# --- regions and zones -------------------------------------------------------------------------------------------


def test_an_aws_region_that_does_not_exist(tmp_path, capsys):
    refused(
        tmp_path,
        capsys,
        GOOD.replace("region: us-east-1", "region: us-east-99"),
        "fleet.yaml:15: clusters.aws.eks-a.region: 'us-east-99' is not a region of Amazon EKS",
        "expected one such as us-east-1 (did you mean 'us-east-",
        facts("aws").locations.cited_as,
    )


def test_an_azure_region_in_a_gcp_zone(tmp_path, capsys):
    err = refused(
        tmp_path,
        capsys,
        GOOD.replace("zone: us-central1-a", "zone: eastus"),
        "fleet.yaml:11: clusters.gcp.gke-a.zone: 'eastus' is not a zone of Google Kubernetes Engine ('eastus' is a "
        "region of Azure Kubernetes Service); expected a region and a zone letter such as us-central1-a",
    )
    # the old rule's message (a zone outside its region) is not added to the real one
    assert "is not in region" not in err


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("zone: us-central1-a", "zone: us-central1-q", "gke-a.zone: 'us-central1-q' is not a zone of"),
        ("zone: us-central1-a", "zone: us-centrl1-a", "(did you mean 'us-central1-a'?)"),
        ("zone: us-central1-a", "region: us-centrall", "gke-a.region: 'us-centrall' is not a region of"),
        ("zone: us-central1-a", "region: us-east-1", "('us-east-1' is a region of Amazon EKS)"),
        ("region: us-east-1", "region: eastus", "eks-a.region: 'eastus' is not a region of Amazon EKS ('eastus' is a "),
        ("region: us-east-1", "region: us-central1", "('us-central1' is a region of Google Kubernetes Engine)"),
    ],
    ids=["gcp-zone-letter", "gcp-zone-typo", "gcp-region-typo", "aws-region-on-gcp", "azure-on-aws", "gcp-on-aws"],
)
def test_locations_of_the_wrong_cloud_or_misspelt(tmp_path, capsys, old, new, expected):
    refused(tmp_path, capsys, GOOD.replace(old, new), expected)


AZURE = GOOD.replace("workloads: {}", "  azure:\n    aks-a:\n      region: REGION\n      gpus: [t4]\nworkloads: {}")


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("east-us", "(did you mean 'eastus'?)"),
        ("westeurop", "(did you mean 'westeurope'?)"),
        ("mars", "such as eastus"),
    ],
)
def test_wrong_azure_locations(tmp_path, capsys, region, expected):
    refused(
        tmp_path,
        capsys,
        AZURE.replace("REGION", region),
        f"clusters.azure.aks-a.region: '{region}' is not a region of",
        expected,
    )


def test_every_listed_location_is_accepted_and_ai_zones_by_their_naming():
    gcp = facts("gcp").locations
    assert all(gcp.has_zone(z) for z in gcp.all_zones)
    region = next(iter(gcp.zones))
    assert gcp.has_zone(f"{region}-ai2b")  # Compute Engine "Regions and zones": AI zone <region>-ai<N><letter>
    assert not gcp.has_zone("nowhere1-ai2b") and not gcp.has_zone(region)


def test_each_list_names_its_source_and_date():
    for cloud in ("gcp", "aws", "azure"):
        for data in (facts(cloud).locations, facts(cloud).kubernetes_versions):
            assert data is not None and "read 20" in data.source and data.cited_as


def test_the_shipped_and_example_fleets_are_in_known_locations():
    """Every fleet the repository ships passes the location checks (the whole validate runs in test_examples)."""
    from fleet.model.loader import load_fleet

    for policy in [ROOT / "policy" / "fleet.yaml", *sorted((ROOT / "examples").glob("*/fleet.yaml"))]:
        fleet = load_fleet(policy)
        for cluster in fleet.clusters.values():
            known = facts(cluster.cloud).locations
            if known is None:
                continue
            assert cluster.region is None or cluster.region in known.all_regions, (policy, cluster.name)
            assert cluster.zone is None or known.has_zone(cluster.zone), (policy, cluster.name)


# --- Kubernetes versions -----------------------------------------------------------------------------------------


def test_a_version_no_cloud_supports_any_more(tmp_path, capsys):
    gke, eks = facts("gcp").kubernetes_versions, facts("aws").kubernetes_versions
    err = refused(
        tmp_path,
        capsys,
        GOOD.replace("defaults:\n", 'defaults:\n  kubernetes_version: "1.12"\n'),
        "fleet.yaml:2: defaults.kubernetes_version: Kubernetes 1.12 (taken by eks-a) is no longer supported by "
        f"Amazon EKS: it supports {eks.supported[0]} to {eks.supported[-1]} (as of {eks.as_of}",
        f"Google Kubernetes Engine: it supports {gke.supported[0]} to {gke.supported[-1]}",
        f'such as kubernetes_version: "{eks.supported[-1]}"',
    )
    # Magnum's version is the site's (its kube_tag): not checked
    assert "cern-main" not in err


def test_a_clusters_own_old_version_is_located_at_the_cluster(tmp_path, capsys):
    refused(
        tmp_path,
        capsys,
        GOOD.replace("      zone: us-central1-a\n", '      zone: us-central1-a\n      kubernetes_version: "1.20"\n'),
        "fleet.yaml:12: clusters.gcp.gke-a.kubernetes_version: Kubernetes 1.20 is no longer supported by Google",
    )


def test_a_version_newer_than_the_catalogue_knows_is_a_warning(tmp_path, capsys):
    newest = facts("aws").kubernetes_versions.supported[-1]
    newer = f"1.{int(newest.split('.')[1]) + 5}"
    text = GOOD.replace("      region: us-east-1\n", f'      region: us-east-1\n      kubernetes_version: "{newer}"\n')
    code, err = validate(tmp_path, text, capsys)
    # the only problems are the missing stack files of this temporary fleet
    assert code == 2 and "no longer supported" not in err
    assert (
        f"warning: {tmp_path / 'fleet.yaml'}:16: clusters.aws.eks-a.kubernetes_version: Kubernetes {newer} is newer "
        f"than the newest Amazon EKS version the catalogue knows ({newest}" in err
    ), err


def test_a_magnum_clusters_own_version_is_ignored_and_said_so(tmp_path, capsys):
    text = GOOD.replace("      region: cern\n", '      region: cern\n      kubernetes_version: "1.12"\n')
    _, err = validate(tmp_path, text, capsys)
    assert "no longer supported" not in err
    assert (
        "fleet.yaml:7: clusters.openstack.cern-main.kubernetes_version: ignored on OpenStack Magnum: the cluster "
        in err
    )


def test_every_supported_version_passes(tmp_path, capsys):
    for version in facts("aws").kubernetes_versions.supported:
        text = GOOD.replace(
            "      region: us-east-1\n", f'      region: us-east-1\n      kubernetes_version: "{version}"\n'
        )
        _, err = validate(tmp_path, text, capsys)
        assert "kubernetes_version" not in err, err


# --- unknown keys ------------------------------------------------------------------------------------------------


QUEUE = "queues:\n  manager: cern-main\n  gpu: {clusters: [gke-a, eks-a], gpus: [t4]}\n"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("      central: true", "      centrl: true", "cern-main.centrl: unknown key (did you mean 'central'?)"),
        ("defaults:", "defualts:", "fleet.yaml:1: defualts: unknown key (did you mean 'defaults'?)"),
        ("{max_nodes: 3}", "{max_node: 3}", "gpus.t4.max_node: unknown key (did you mean 'max_nodes'?)"),
        (
            "min_nodes: 0, max",
            "min_node: 0, max",
            "defaults.gpu_pool.min_node: unknown key (did you mean 'min_nodes'?)",
        ),
        ("      zone: us-central1-a", "      zones: us-central1-a", "gke-a.zones: unknown key (did you mean 'zone'?)"),
        ("  aws:\n", "  amazon:\n", "fleet.yaml:13: clusters.amazon: unknown key; the keys allowed here: gcp, aws,"),
        (
            "workloads: {}",
            f"workloads: {{}}\n{QUEUE}".replace("gpus: [t4]", "gpu: [t4]"),
            "queues.gpu.gpu: unknown key",
        ),
        (
            "workloads: {}",
            f"workloads: {{}}\n{QUEUE}  spil: ordered\n",
            "queues.spil: unknown key (did you mean 'spill'?); the keys allowed here: manager, spill, and names of",
        ),
    ],
    ids=["cluster", "top-level", "pool", "defaults", "zone", "cloud", "queue", "queues"],
)
def test_unknown_keys_name_the_nearest_allowed_one(tmp_path, capsys, old, new, expected):
    """At every level, also where a mapping's keys are names (the clouds, the queues): a queue's unknown key said
    only "check the spelling", a cloud's gave pydantic's "clusters.amazon.[key]: Input should be 'gcp', ..."."""
    err = refused(tmp_path, capsys, GOOD.replace(old, new, 1), expected, "the keys allowed here: ")
    assert "check the spelling" not in err and "[key]" not in err and "Input should" not in err, err


def test_an_unknown_key_far_from_any_lists_the_allowed_keys(tmp_path, capsys):
    refused(
        tmp_path,
        capsys,
        GOOD.replace("      central: true", "      colour: blue\n      central: true"),
        "cern-main.colour: unknown key; the keys allowed here: region, zone, central, gpus,",
    )


def test_through_the_command_line(tmp_path):
    """``python -m fleet validate`` as a user runs it: exit 2, the located messages, no traceback."""
    policy = tmp_path / "fleet.yaml"
    bad = GOOD.replace("region: us-east-1", "region: us-east-99").replace("zone: us-central1-a", "zone: eastus")
    policy.write_text(bad.replace("defaults:\n", 'defaults:\n  kubernetes_version: "1.12"\n'), encoding="utf-8")
    (tmp_path / "stacks").mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "fleet", "validate", "--policy", str(policy), "--stacks-dir", str(tmp_path / "stacks")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    for fragment in (
        "clusters.aws.eks-a.region: 'us-east-99' is not a region of Amazon EKS",
        "clusters.gcp.gke-a.zone: 'eastus' is not a zone of Google Kubernetes Engine",
        "defaults.kubernetes_version: Kubernetes 1.12 (taken by eks-a) is no longer supported",
        "nothing was planned or deployed",
    ):
        assert fragment in run.stderr, run.stderr


def test_a_tpu_zone_that_does_not_offer_it_is_a_warning_naming_the_zones_that_do(tmp_path, capsys):
    """The catalogue lists the zones Cloud TPU gives for v5e (those read): a pool elsewhere is planned, with a warning
    naming them and the page (a zone the page lists but the catalogue lacks must stay possible)."""
    offer = load_catalogue().accelerators["tpu-v5e"].offers["gcp"]
    assert offer.zones and offer.zone_warning("tpu-v5e", "gcp", offer.zones[0]) is None
    said = offer.zone_warning("tpu-v5e", "gcp", "us-central1-b")
    assert "us-central1-b is not among them" in said and "such as zone: us-central1-a" in said
    said = offer.zone_warning("tpu-v5e", "gcp", "europe-west4-a")
    assert "europe-west4, whose zones were not read" in said and "TPU regions and zones" in said
    assert load_catalogue().accelerators["t4"].offers["gcp"].zone_warning("t4", "gcp", "europe-west4-a") is None
    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  gcp:\n    lab:\n      zone: us-central1-b\n      central: true\n      gpus: [tpu-v5e]\n"
        "workloads: {}\n",
        encoding="utf-8",
    )
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.lab.yaml").write_text(
        'config:\n  pulumi:disable-default-providers: ["*"]\n  gcp:project: lab-project\n', encoding="utf-8"
    )
    assert main(["validate", "--policy", str(policy), "--stacks-dir", str(tmp_path / "stacks")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {policy}:6: clusters.gcp.lab.gpus[0]: tpu-v5e is offered in us-central1-a" in err, err
