"""validate and plan check every stack file against its cluster before planning: located problems (exit 2, no
traceback) and warnings for what the sample files leave to fill in. A fixture fleet of one cluster per cloud."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fleet.tools.cli import main
from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "fleet"


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    """A copy of the fixture fleet whose stack files a test may break."""
    shutil.copytree(FIXTURE, tmp_path / "fleet")
    return tmp_path / "fleet"


def set_config(fleet_dir: Path, stack: str, **changes: object) -> Path:
    """Change (value) or drop (None) config keys of one stack file; returns the file."""
    path = fleet_dir / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in changes.items():
        key = key.replace("__", ":")
        if value is None:
            data["config"].pop(key, None)
        else:
            data["config"][key] = value
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run(fleet_dir: Path, capsys: pytest.CaptureFixture[str], command: str = "validate") -> tuple[int, str]:
    args = [command, "--policy", str(fleet_dir / "fleet.yaml"), "--stacks-dir", str(fleet_dir / "stacks")]
    status = main([*args, "--workloads-dir", str(fleet_dir / "workloads")])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, err


def test_the_fixture_fleet_is_clean(fleet_dir, capsys):
    status, err = run(fleet_dir, capsys)
    assert status == 0 and "warning" not in err, err


# a Magnum site whose autoscaler's minor is not its Kubernetes' (components/clusters/magnum.py autoscaler_minor_problem)
MISMATCHED_MAGNUM = {
    "image": "fcos",
    "keypair": "kp",
    "externalNetwork": "ext",
    "masterFlavor": "m2.medium",
    "kubeTag": "v1.31.5-rancher1",
    "autoscalerTag": "v1.28.0",
}


@pytest.mark.parametrize(
    ("stack", "changes", "fragment"),
    [
        ("fix-gke", {"gcp__project": None}, "config.gcp:project: required for a gcp cluster"),
        ("fix-aks", {"azure-native__subscriptionId": None}, "config.azure-native:subscriptionId: required"),
        ("fix-magnum", {"gpu-fleet__magnum": None}, "config.gpu-fleet:magnum: required for a openstack cluster"),
        ("fix-lab", {"gpu-fleet__kubeconfig": "apiVersion: v1"}, "config.gpu-fleet:kubeconfig: must be a secret"),
        ("fix-eks", {"gpu-fleet__subnetIds": "subnet-1,subnet-2"}, "config.gpu-fleet:subnetIds: must be a list"),
        ("fix-eks", {"gpu-fleet__protect": "yes"}, "config.gpu-fleet:protect: must be true or false"),
        ("fix-eks", {"gpu-fleet__federationSourceRanges": ["10.0.0.0/33"]}, "is not a CIDR range"),
        ("fix-eks", {"gpu-fleet__federationSourceRanges": ["192.0.2.0/24"]}, "documentation range"),
        ("fix-gke", {"gpu-fleet__storageClas": "ssd"}, "config.gpu-fleet:storageClas: unknown setting"),
        ("fix-gke", {"gpu-fleet__magnum": {"image": "x"}}, "only for openstack clusters"),
        ("fix-magnum", {"gpu-fleet__storageClass": None}, "gpu-fleet:storageClass: required on fix-magnum"),
        ("fix-magnum", {"gpu-fleet__magnum": {"image": "fcos"}}, "config.gpu-fleet:magnum.kubeTag: missing kubeTag"),
        (
            "fix-magnum",
            {"gpu-fleet__magnum": MISMATCHED_MAGNUM},
            "config.gpu-fleet:magnum.autoscalerTag: v1.28.0 is cluster-autoscaler 1.28, but kubeTag v1.31.5-rancher1",
        ),
        ("fix-gke", {"project": "x"}, "config.project: config keys are namespaced"),
        ("fix-gke", {"gpu-fleet__storageClas": "ssd"}, "(did you mean 'gpu-fleet:storageClass'?)"),
        ("fix-eks", {"pulumi__disable-default-providers": None}, "config.pulumi:disable-default-providers: missing"),
        ("fix-eks", {"pulumi__disable-default-providers": ["aws"]}, 'disable-default-providers: must be ["*"]'),
        ("fix-eks", {"aws__region": "us-east-1"}, "config.aws:region: 'us-east-1' contradicts the policy"),
        ("fix-gke", {"gcp__zone": "europe-west4-b"}, "config.gcp:zone: 'europe-west4-b' contradicts the policy"),
        ("fix-gke", {"gcp__region": "us-central1"}, "which says 'europe-west4' for fix-gke"),
        ("fix-aks", {"azure-native__location": "eastus"}, "config.azure-native:location: 'eastus' contradicts"),
        ("fix-lab", {"gpu-fleet__kubeconfig": {"secure": 123}}, "config.gpu-fleet:kubeconfig.secure: `secure:` holds"),
        ("fix-gke", {"gcp__project": {"secure": ""}}, "config.gcp:project.secure: `secure:` holds the encrypted"),
        (
            "fix-gke",
            {"gpu-fleet__workloadSecrets": {"w": {"K": {"secure": "v1:a", "note": "x"}}}},
            "config.gpu-fleet:workloadSecrets.w.K.secure: `secure:` holds",
        ),
    ],
)
def test_a_bad_stack_file_is_refused_with_its_line(fleet_dir, capsys, stack, changes, fragment):
    path = set_config(fleet_dir, stack, **changes)
    for command in ("validate", "plan"):
        status, err = run(fleet_dir, capsys, command)
        assert status == 2, err
        assert fragment in err and f"{path}:" in err, err


@pytest.mark.parametrize(
    ("top", "fragment"),
    [
        ("configuration", "configuration: unknown top-level key of a stack file (did you mean 'config'?)"),
        ("secretprovider", "(did you mean 'secretsprovider'?)"),
        ("settings", "settings: unknown top-level key of a stack file (Pulumi reads config, secretsprovider"),
    ],
)
def test_a_stack_files_top_level_keys_are_pulumis(fleet_dir, capsys, top, fragment):
    """`configuration:` instead of `config:`: the Pulumi CLI would ignore every setting under it without a word."""
    path = fleet_dir / "stacks" / "Pulumi.fix-gke.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("config:", f"{top}:", 1), encoding="utf-8")
    status, err = run(fleet_dir, capsys)
    assert status == 2 and fragment in err and f"{path}:1: " in err, err


def test_half_plain_workload_secrets_are_refused_without_showing_the_value(fleet_dir, capsys):
    secrets = {"uploader": {"AWS_ACCESS_KEY_ID": {"secure": "v1:abc"}, "AWS_SECRET_ACCESS_KEY": "hunter2-plain"}}
    path = set_config(fleet_dir, "fix-gke", **{"gpu-fleet__workloadSecrets": secrets})
    status, err = run(fleet_dir, capsys)
    assert status == 2
    assert f"{path}:" in err and "config.gpu-fleet:workloadSecrets.uploader.AWS_SECRET_ACCESS_KEY: plain text" in err
    assert "pulumi config set --secret --path 'gpu-fleet:workloadSecrets.uploader.AWS_SECRET_ACCESS_KEY'" in err
    assert "hunter2" not in err and "AWS_ACCESS_KEY_ID: plain" not in err


def test_every_problem_of_every_stack_file_at_once(fleet_dir, capsys):
    set_config(fleet_dir, "fix-gke", gcp__project=None)
    set_config(fleet_dir, "fix-aks", **{"gpu-fleet__protect": "maybe"})
    (fleet_dir / "stacks" / "Pulumi.fix-eks.yaml").write_text("config: [unclosed\n", encoding="utf-8")
    status, err = run(fleet_dir, capsys)
    assert status == 2
    assert "gcp:project: required" in err and "protect: must be true or false" in err
    assert "Pulumi.fix-eks.yaml:" in err


def test_a_stack_file_that_is_not_utf8_is_located(fleet_dir, capsys):
    path = fleet_dir / "stacks" / "Pulumi.fix-eks.yaml"
    path.write_bytes(b"config:\n  gpu-fleet:storageClass: caf\xe9\n")
    status, err = run(fleet_dir, capsys)
    assert status == 2 and f"{path}:2: not UTF-8 text: byte 0xe9" in err


def test_a_stack_file_that_is_a_folder_is_not_called_missing(fleet_dir, capsys):
    path = fleet_dir / "stacks" / "Pulumi.fix-eks.yaml"
    path.unlink()
    path.mkdir()
    status, err = run(fleet_dir, capsys)
    assert status == 2 and f"{path}:1: is a folder, not a file: give the file's path" in err, err
    assert "missing" not in err, err


def test_sample_placeholders_are_warnings_not_errors(fleet_dir, capsys):
    path = set_config(fleet_dir, "fix-gke", gcp__project="my-gcp-project")
    status, err = run(fleet_dir, capsys)
    assert status == 0
    (warning,) = [line for line in err.splitlines() if line.startswith("warning:")]
    assert f"{path}:" in warning and "'my-gcp-project' is the sample's placeholder" in warning


def test_a_missing_stack_file_and_an_orphan_one(fleet_dir, capsys):
    (fleet_dir / "stacks" / "Pulumi.fix-eks.yaml").rename(fleet_dir / "stacks" / "Pulumi.gone.yaml")
    status, err = run(fleet_dir, capsys)
    assert status == 2
    assert "Pulumi.fix-eks.yaml:1: missing: every cluster needs its stack config file" in err
    assert "warning: " in err and "Pulumi.gone.yaml:1: stack 'gone' has no cluster" in err


def test_warnings_are_printed_once_not_per_stack(fleet_dir, capsys):
    set_config(fleet_dir, "fix-gke", gcp__project="my-gcp-project")
    status, err = run(fleet_dir, capsys)
    assert status == 0
    assert err.count("is the sample's placeholder") == 1


def test_the_plan_shows_the_inputs_warnings_once_with_its_findings_at_the_end(fleet_dir, capsys):
    set_config(fleet_dir, "fix-gke", gcp__project="my-gcp-project")
    args = ["plan", "--policy", str(fleet_dir / "fleet.yaml"), "--stacks-dir", str(fleet_dir / "stacks")]
    status = main([*args, "--workloads-dir", str(fleet_dir / "workloads"), "--no-policy-pack"])
    out, err = capsys.readouterr()
    assert status == 0 and "is the sample's placeholder" not in err
    findings = out.split("\nFindings\n", 1)[1]
    assert out.count("is the sample's placeholder") == 1 and "[warning] input: " in findings


# --- the same refusals when the program runs under Pulumi (no `fleet` command in between) -------------------


def test_the_program_refuses_a_plain_kubeconfig(fleet_dir):
    from fleet.model.core.errors import InputError
    from fleet.tools.engine.plan import plan_stack

    set_config(fleet_dir, "fix-lab", **{"gpu-fleet__kubeconfig": "apiVersion: v1\nclusters: []\n"})
    with pytest.raises(InputError) as caught:
        plan_stack("fix-lab", fleet_dir / "fleet.yaml", fleet_dir / "stacks", workloads_dir=fleet_dir / "workloads")
    (problem,) = caught.value.problems
    assert problem.path == "config.gpu-fleet:kubeconfig" and "plain text where a credential belongs" in problem.message
    assert "apiVersion" not in str(caught.value)


def test_the_program_refuses_half_plain_workload_secrets(fleet_dir):
    from fleet.model.core.errors import InputError
    from fleet.tools.engine.plan import plan_stack

    secrets = {"uploader": {"AWS_ACCESS_KEY_ID": {"secure": "v1:abc"}, "AWS_SECRET_ACCESS_KEY": "hunter2-plain"}}
    set_config(fleet_dir, "fix-gke", **{"gpu-fleet__workloadSecrets": secrets})
    with pytest.raises(InputError) as caught:
        plan_stack("fix-gke", fleet_dir / "fleet.yaml", fleet_dir / "stacks", workloads_dir=fleet_dir / "workloads")
    (problem,) = caught.value.problems
    assert problem.path == "config.gpu-fleet:workloadSecrets.uploader.AWS_SECRET_ACCESS_KEY"
    assert "hunter2" not in str(caught.value)


def test_stack_takes_several_names_and_repeats(fleet_dir, capsys):
    args = ["plan", "--no-policy-pack", "--policy", str(fleet_dir / "fleet.yaml"), "--stacks-dir"]
    args += [str(fleet_dir / "stacks"), "--workloads-dir", str(fleet_dir / "workloads")]
    assert main([*args, "--stack", "fix-gke", "fix-aks", "--stack", "fix-eks"]) == 0
    assert "3 stack(s)" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["missing-folder/plan.json", "."])
def test_plan_json_into_a_missing_folder_or_onto_a_folder(fleet_dir, capsys, tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    args = ["plan", "--policy", str(fleet_dir / "fleet.yaml"), "--stacks-dir", str(fleet_dir / "stacks")]
    assert main([*args, "--workloads-dir", str(fleet_dir / "workloads"), "--json", where]) == 2
    out, err = capsys.readouterr()
    assert f"{where}:1: --json: " in err and "Traceback" not in err and "stack(s)" not in out


def test_a_secret_that_is_not_the_expected_json_is_refused_without_echoing_it(fleet_dir):
    """An encrypted gpu-fleet:workloadSecrets whose value is not a mapping: named, its value never shown."""
    from fleet.model.core.errors import InputError
    from fleet.program.stack_config import SECRET_PLACEHOLDER
    from fleet.tools.engine.plan import plan_stack

    set_config(fleet_dir, "fix-gke", **{"gpu-fleet__workloadSecrets": {"secure": "v1:bm90LWpzb24="}})
    with pytest.raises(InputError) as caught:
        plan_stack("fix-gke", fleet_dir / "fleet.yaml", fleet_dir / "stacks", workloads_dir=fleet_dir / "workloads")
    (problem,) = caught.value.problems
    assert problem.path == "config.gpu-fleet:workloadSecrets" and "must map each workload" in problem.message
    assert SECRET_PLACEHOLDER not in str(caught.value)


def test_values_the_program_accepts_are_accepted(fleet_dir, capsys):
    """What `pulumi config set` writes without --path (JSON text), capitalised booleans, a config of nothing but the
    disabled default providers, the region the policy gives, the stack file's other top-level keys."""
    set_config(
        fleet_dir, "fix-eks", **{"gpu-fleet__subnetIds": '["subnet-1", "subnet-2"]', "gpu-fleet__protect": "True"}
    )
    set_config(fleet_dir, "fix-eks", **{"gpu-fleet__federationSourceRanges": '["10.10.0.0/16"]'})
    set_config(fleet_dir, "fix-eks", **{"pulumi__disable-default-providers": '["*"]', "aws__region": "eu-west-1"})
    set_config(fleet_dir, "fix-gke", **{"gcp__region": "europe-west4", "gcp__zone": "europe-west4-a"})
    status, err = run(fleet_dir, capsys)
    assert status == 0, err
    (fleet_dir / "stacks" / "Pulumi.fix-eks.yaml").write_text(
        'encryptionsalt: v1:abc\nconfig:\n  pulumi:disable-default-providers: ["*"]\n', encoding="utf-8"
    )
    status, err = run(fleet_dir, capsys)
    assert status == 0, err
