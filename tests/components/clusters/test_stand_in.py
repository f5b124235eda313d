"""``gpu-fleet:standInKubeconfig``, ``gpu-fleet:federationCertificates`` and ``gpu-fleet:chartCache`` under the mock
engine: what a stack declares when a hollow cluster stands in for its cloud's, the site brings its own federation
certificates and the charts come from a folder of archives (the real tier uses all three, tests/real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.kubernetes.images import chart_archive, missing_chart_archives
from fleet.model.core.errors import InputError
from fleet.model.core.stack_settings import FEDERATION_CERTIFICATE_PARTS, federation_certificates_value
from tests.helpers import by_type, plan_one

POLICY = """
clusters:
  {cloud}:
    {name}:
      {where}
      gpus:
        t4: {{}}
  {central_cloud}:
    central-test:
      {central_where}
      central: true
"""
CLOUDS = {
    "gcp": ("gke-leaf", "zone: us-central1-c", {"gcp:project": "proj-1"}),
    "aws": ("eks-leaf", "region: us-east-1", {}),
    "azure": ("aks-leaf", "region: eastus", {"azure-native:subscriptionId": "00000000-0000-0000-0000-000000000000"}),
}


def policy_of(cloud: str) -> str:
    """A leaf of ``cloud`` with a T4 pool, and a central cluster on another cloud."""
    name, where, _ = CLOUDS[cloud]
    central_cloud = "aws" if cloud == "gcp" else "gcp"
    central_where = CLOUDS[central_cloud][1].replace("us-central1-c", "us-central1-a")
    return POLICY.format(cloud=cloud, name=name, where=where, central_cloud=central_cloud, central_where=central_where)


def folder(path: Path) -> Path:
    """``path``, made."""
    path.mkdir(parents=True, exist_ok=True)
    return path


def secure(text: str) -> dict[str, str]:
    """A value as ``pulumi config set --secret`` writes it."""
    return {"secure": f"v1:{text}"}


OURS = ("kubernetes:", "gpufleet:", "tls:", "pulumi:providers:kubernetes", "pulumi:providers:tls", "pulumi:pulumi:")


def cloud_types(plan) -> set[str]:
    """The types of every resource (providers included) that is neither Kubernetes' nor the federation's TLS nor a
    component of ours: the cloud's."""
    return {r.type for r in plan.registrations if not r.type.startswith(OURS)}


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_stand_in_creates_no_cloud_resource_and_everything_in_cluster_still(tmp_path, cloud):
    name, _, config = CLOUDS[cloud]
    policy = policy_of(cloud)
    real = plan_one(folder(tmp_path / "real"), policy, name, config)
    stand_in = plan_one(
        folder(tmp_path / "stand-in"), policy, name, {**config, "gpu-fleet:standInKubeconfig": secure("k")}
    )
    assert cloud_types(real), "the cloud's own stack declares cloud resources"
    assert cloud_types(stand_in) == set()
    in_cluster = {(r.type, r.name) for r in real.registrations if r.type.startswith("kubernetes:")}
    stood_in = {(r.type, r.name) for r in stand_in.registrations if r.type.startswith("kubernetes:")}
    # the autoscalers of EKS and Magnum scale the cloud's node groups, which a stand-in has not
    assert {x for x in in_cluster - stood_in if "autoscaler" not in x[1]} == set()
    assert stood_in <= in_cluster


def test_site_federation_certificates_replace_the_stacks_own_ca(tmp_path):
    name, _, config = CLOUDS["gcp"]
    policy = policy_of("gcp")
    certificates = {part: secure(part) for part in FEDERATION_CERTIFICATE_PARTS}
    plan = plan_one(tmp_path, policy, name, {**config, "gpu-fleet:federationCertificates": certificates})
    assert not [r for r in plan.registrations if r.type.startswith(("tls:", "pulumi:providers:tls"))]
    made = plan_one(folder(tmp_path / "made"), policy, name, config)
    assert by_type(made, "tls:index/selfSignedCert:SelfSignedCert"), "without them the stack makes its own CA"


def test_federation_certificates_need_all_five_parts():
    with pytest.raises(ValueError, match="nothing for clientKey: needs all of caCert"):
        federation_certificates_value({p: "pem" for p in FEDERATION_CERTIFICATE_PARTS if p != "clientKey"})
    with pytest.raises(ValueError, match="unknown parts caKey"):
        federation_certificates_value({**{p: "pem" for p in FEDERATION_CERTIFICATE_PARTS}, "caKey": "x"})


def test_a_chart_cache_installs_each_release_from_its_archive(tmp_path):
    name, _, config = CLOUDS["gcp"]
    policy = policy_of("gcp")
    cache = tmp_path / "charts"
    cache.mkdir()
    plan = plan_one(tmp_path, policy, name, config)
    releases = by_type(plan, "kubernetes:helm.sh/v3:Release")
    # a chart from an HTTP repository names it; an OCI chart (Kueue's, for the benchmark queue) is its own address
    assert releases and all(r.inputs.get("repositoryOpts") or r.inputs["chart"].startswith("oci://") for r in releases)
    for line in missing_chart_archives(cache):  # an empty cache lacks every pinned chart
        Path(line.split(" is missing")[0]).write_bytes(b"archive")
    cached = plan_one(folder(tmp_path / "cached"), policy, name, {**config, "gpu-fleet:chartCache": str(cache)})
    for release in by_type(cached, "kubernetes:helm.sh/v3:Release"):
        assert Path(release.inputs["chart"]).parent == cache, release.name
        assert "repositoryOpts" not in release.inputs and "version" not in release.inputs


def test_a_chart_cache_without_an_archive_is_refused_naming_it(tmp_path):
    name, _, config = CLOUDS["gcp"]
    policy = policy_of("gcp")
    with pytest.raises(InputError) as raised:
        plan_one(tmp_path, policy, name, {**config, "gpu-fleet:chartCache": str(tmp_path)})
    text = str(raised.value)
    assert "gpu-fleet:chartCache" in text and "kueue-0.19.2.tgz is missing: helm pull kueue --version 0.19.2" in text


def test_chart_archive_names_the_file_helm_pull_writes(tmp_path):
    from components.kubernetes.images import chart

    (tmp_path / "kueue-0.19.2.tgz").write_bytes(b"x")
    assert chart_archive(tmp_path, chart("kueue")) == tmp_path / "kueue-0.19.2.tgz"
