"""Bad policy input: every class of problem is reported as FILE:LINE: key.path: message, exit 2, no traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fleet.tools.cli import main
from tests.conftest import FIXTURES, ROOT
from tests.helpers import GOOD


def run_validate(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], workloads: Path | None = None
) -> tuple[int, str]:
    """``validate`` of ``text`` with no stack files and ``workloads`` (default: an empty folder); (status, stderr)."""
    policy = tmp_path / "fleet.yaml"
    policy.write_text(textwrap.dedent(text), encoding="utf-8")
    empty = tmp_path / "stacks"
    empty.mkdir(exist_ok=True)
    if workloads is None:
        workloads = tmp_path / "workloads"
        workloads.mkdir(exist_ok=True)
    code = main(["validate", "--policy", str(policy), "--stacks-dir", str(empty), "--workloads-dir", str(workloads)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.err


def bad(tmp_path, capsys, text: str, *expected: str) -> str:
    code, err = run_validate(tmp_path, text, capsys)
    assert code == 2, err
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    return err


def test_good_policy_passes(tmp_path, capsys):
    code, err = run_validate(tmp_path, GOOD, capsys)
    # no stack files in the temp dir: a missing stack file is the only complaint
    assert code == 2 and "missing: every cluster needs its stack config file" in err
    assert err.count("missing") == 3


def test_yaml_syntax_error_names_the_line(tmp_path, capsys):
    bad(tmp_path, capsys, GOOD.replace("gpus: [t4, l4]", "gpus: [t4, l4"), "fleet.yaml:13:", "YAML syntax error")


def test_unknown_key_is_a_typo(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("      central: true", "      centrl: true"),
        "fleet.yaml:7: clusters.openstack.cern-main.centrl: unknown key",
    )


def test_wrong_type(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("{max_nodes: 3}", "{max_nodes: many}"),
        "fleet.yaml:17: clusters.aws.eks-a.gpus.t4.max_nodes:",
        "expected a whole number, such as 2, not 'many'",
    )


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "gpu_pool: {min_nodes: 0",
            "gpu_pool: {scale_down_after: 5 minutes, min_nodes: 0",
            "defaults.gpu_pool.scale_down_after: expected whole minutes, such as 5m, not '5 minutes'",
        ),
        ("    gke-a:\n", "    gke-b: 5\n    gke-a:\n", "clusters.gcp.gke-b: expected a mapping of keys to values"),
        ("      central: true", "      central: yes please", "central: expected true or false, not 'yes please'"),
        ("gpu_pool: {", "kubernetes_version: 1.33\n  gpu_pool: {", "kubernetes_version: expected text, such as a name"),
        (
            "gpu_pool: {",
            "kubernetes_version: '1.3'\n  gpu_pool: {",
            'expected a Kubernetes minor version in quotes, such as "1.33"',
        ),
    ],
    ids=["pattern", "class-name", "bool", "number-for-text", "version"],
)
def test_messages_speak_the_users_words(tmp_path, capsys, old, new, expected):
    """No regular expression and no class name (`instance of ClusterSettings`) reaches the user."""
    err = bad(tmp_path, capsys, GOOD.replace(old, new, 1), expected)
    assert "pattern" not in err and "instance of" not in err and "Settings" not in err and "^" not in err, err


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("{max_nodes: 3}", "{max_nodes: true}", "gpus.t4.max_nodes: expected a whole number, such as 2, not true"),
        ("spot: true}", "spot: 1}", "defaults.gpu_pool.spot: expected true or false, not 1"),
        ("      central: true", "      central: 1", "cern-main.central: expected true or false, not 1"),
        (
            "clusters:\n",
            "monitoring: {scrape_interval: 0s}\nclusters:\n",
            "monitoring.scrape_interval: expected a whole number of seconds, minutes or hours above zero, such as 30s",
        ),
        ("clusters:\n", "monitoring: {leaf_retention: 0d}\nclusters:\n", "leaf_retention: expected a whole number"),
        ("clusters:\n", "monitoring: {central_storage: 0Gi}\nclusters:\n", "above zero, such as 100Gi, not '0Gi'"),
        ("clusters:\n", "monitoring: {leaf_storage: 0Gi}\nclusters:\n", "above zero, such as 10Gi, not '0Gi'"),
        (
            "gpu_pool: {",
            "probe: {scale_up_alert_after: 0m}\n  gpu_pool: {",
            "defaults.probe.scale_up_alert_after: expected a whole number of seconds, minutes or hours above zero",
        ),
    ],
    ids=["true-as-count", "one-as-bool", "one-as-central", "zero-scrape", "zero-retention", "zero-volume",
         "zero-leaf-disk", "zero-alert"],
)  # fmt: skip
def test_a_value_that_would_silently_mean_another_is_refused(tmp_path, capsys, old, new, expected):
    """pydantic's lax mode took `true` for 1 and 1 for `true` (`max_nodes: true` planned one node), and `0s`, `0d`,
    `0Gi` passed (`promtool check config` 2.42 passes `scrape_interval: 0s` too): each planned without a word."""
    bad(tmp_path, capsys, GOOD.replace(old, new, 1), expected)


def test_negative_node_count(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("{max_nodes: 3}", "{min_nodes: -1}"),
        "clusters.aws.eks-a.gpus.t4.min_nodes: expected 0 or more, not -1",
    )


def test_inverted_node_counts(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("{max_nodes: 3}", "{min_nodes: 5, max_nodes: 3}"),
        "fleet.yaml:17: clusters.aws.eks-a.gpus.t4: min_nodes 5 is above max_nodes 3",
    )


def test_duplicate_cluster_names_across_providers(tmp_path, capsys):
    text = GOOD.replace("    eks-a:", "    gke-a:")
    bad(
        tmp_path,
        capsys,
        text,
        "fleet.yaml:14: clusters.aws.gke-a: cluster name 'gke-a' is used twice (also under clusters.gcp)",
    )


def test_duplicate_key_in_one_mapping(tmp_path, capsys):
    text = GOOD.replace("      zone: us-central1-a\n", "      zone: us-central1-a\n      zone: us-central1-b\n")
    bad(tmp_path, capsys, text, "fleet.yaml:12: clusters.gcp.gke-a.zone: duplicate key (first given on line 11)")


@pytest.mark.parametrize("name", ["GKE-A", "gke_a", "-gke", "a" * 41, "9gke"])
def test_cluster_name_must_be_a_dns_label(tmp_path, capsys, name):
    bad(tmp_path, capsys, GOOD.replace("    gke-a:", f"    {name}:"), f"clusters.gcp.{name}: cluster name", "DNS-1123")


def test_no_central_cluster(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("      central: true\n", ""),
        "fleet.yaml:3: clusters: no cluster is marked 'central: true'",
    )


def test_two_central_clusters(tmp_path, capsys):
    text = GOOD.replace("      zone: us-central1-a\n", "      zone: us-central1-a\n      central: true\n")
    bad(tmp_path, capsys, text, "fleet.yaml:12: clusters.gcp.gke-a.central: a second central cluster")


def test_workload_names_unknown_card(tmp_path, capsys):
    text = GOOD.replace("workloads: {}", "workloads:\n  demo: [t4, x100]\n")
    bad(
        tmp_path,
        capsys,
        text,
        "fleet.yaml:19: workloads.demo[1]: unknown card 'x100'",
        "fleet.yaml:19: workloads.demo: no workload definition",
    )


def test_unknown_workload_definition(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("workloads: {}", "workloads:\n  nosuch: all\n"),
        "fleet.yaml:19: workloads.nosuch: no workload definition 'nosuch'",
    )


def test_card_the_cloud_does_not_have(tmp_path, capsys):
    bad(
        tmp_path,
        capsys,
        GOOD.replace("gpus: [t4, l4]", "gpus: [t4, a10g]"),
        "fleet.yaml:12: clusters.gcp.gke-a.gpus[1]: gcp has no a10g",
        "cards on gcp: p4",
    )


def test_retired_card_names_cloud_date_and_alternatives(tmp_path, capsys):
    text = GOOD.replace("        t4: {max_nodes: 3}", "        k80: {max_nodes: 3}")
    err = bad(
        tmp_path,
        capsys,
        text,
        "fleet.yaml:17: clusters.aws.eks-a.gpus.k80: k80 (NVIDIA Tesla K80) was retired on aws on 2023-12-31",
    )
    assert "use one of: t4, a10g, l4" in err


def test_location_rules(tmp_path, capsys):
    text = GOOD.replace("      zone: us-central1-a\n", "").replace("      region: us-east-1\n", "")
    bad(
        tmp_path,
        capsys,
        text,
        "clusters.gcp.gke-a: a GKE cluster needs a zone",
        "clusters.aws.eks-a: an aws cluster needs a region",
    )


def test_every_problem_is_reported_at_once(tmp_path, capsys):
    text = (
        GOOD.replace("      central: true\n", "")
        .replace("gpus: [t4, l4]", "gpus: [t4, k80]")
        .replace("{max_nodes: 3}", "{min_nodes: 4, max_nodes: 3}")
    )
    err = bad(
        tmp_path,
        capsys,
        text,
        "no cluster is marked",
        "k80 (NVIDIA Tesla K80) was retired on gcp",
        "min_nodes 4 is above max_nodes 3",
    )
    assert "3 problem(s) found" in err


def test_schema_errors_and_workload_folder_errors_come_together(tmp_path, capsys):
    wl = tmp_path / "workloads" / "demo"
    wl.mkdir(parents=True)
    (wl / "workload.yaml").write_text("name: demo\nimage: x:latest\n", encoding="utf-8")
    policy = tmp_path / "fleet.yaml"
    policy.write_text(GOOD.replace("      central: true", "      centrl: true"), encoding="utf-8")
    from fleet.model.core.errors import InputError
    from fleet.model.loader import load_fleet

    with pytest.raises(InputError) as exc:
        load_fleet(policy, tmp_path / "workloads")
    text = str(exc.value)
    assert "centrl: unknown key" in text and "workload.yaml" in text


def test_missing_policy_file(tmp_path, capsys):
    code = main(["validate", "--policy", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.yaml:1: cannot read file" in err


# --- inputs read with a bound: size, file kind, YAML aliases and nesting -----------------------------------


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: Path("/dev/zero"), "/dev/zero:1: is not a regular file (a device, pipe or socket)"),
        (lambda tmp: tmp, ":1: is a folder, not a file: give the file's path"),
        (lambda tmp: write(tmp, "x: " + "y" * (1024 * 1024) + "\n"), "more than the 1 MiB an input may have"),
        (lambda tmp: write(tmp, BILLION_LAUGHS), ":1: more than 100,000 values once the aliases (*name) are expanded"),
        (lambda tmp: write(tmp, "a: &a [*a]\n"), ":1: nested more than 64 levels deep"),
        (lambda tmp: write(tmp, "[" * 100_000), ":1: nested more than 64 levels deep"),
        (lambda tmp: write(tmp, "x:\n" + "".join(" " * i + "- \n" for i in range(0, 200, 2))), "levels deep"),
    ],
    ids=["dev-zero", "folder", "huge", "alias-bomb", "recursive-alias", "deep-flow", "deep-block"],
)
def test_an_input_that_could_eat_the_machine_is_refused_at_once(tmp_path, capsys, make, expected):
    """/dev/zero as the policy filled 23 GB, an alias bomb never finished: both are refused before they are read."""
    code = main(["validate", "--policy", str(make(tmp_path))])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err, err


def write(tmp: Path, text: str) -> Path:
    path = tmp / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_named_pipe_as_the_policy_does_not_block(tmp_path, capsys):
    import os

    fifo = tmp_path / "fleet.yaml"
    os.mkfifo(fifo)
    assert main(["validate", "--policy", str(fifo)]) == 2  # no writer: reading it would wait for ever
    assert f"{fifo}:1: is not a regular file" in capsys.readouterr().err


def test_anchors_and_merge_keys_a_policy_may_use_still_work(tmp_path, capsys):
    text = GOOD.replace("gpu_pool: {", "gpu_pool: &pool {").replace("t4: {max_nodes: 3}", "t4: {<<: *pool}")
    code, err = run_validate(tmp_path, text, capsys)
    # only the stack files are missing (the test gives none): the alias and the merge key were read
    assert code == 2 and err.count("missing: every cluster needs its stack config file") == 3, err
    assert "aliases" not in err and "levels deep" not in err and "unknown key" not in err


def test_cli_entry_point_exits_2_without_traceback(tmp_path):
    import subprocess
    import sys

    policy = tmp_path / "fleet.yaml"
    policy.write_text("clusters: [", encoding="utf-8")
    root = ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "fleet", "validate", "--policy", str(policy)], cwd=root, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "YAML syntax error" in proc.stderr and "Traceback" not in proc.stderr


# --- sizes, accelerator kinds, what a machine holds, placements nobody can run -----------------------------


def with_workload(tmp_path: Path, accelerators: int = 1, kinds: list[str] | None = None) -> Path:
    """A workloads folder holding the fixture workload `tracker`, changed as asked."""
    import shutil

    import yaml

    folder = tmp_path / f"workloads-{accelerators}-{'-'.join(kinds or []).replace('/', '_')}"
    shutil.copytree(FIXTURES / "fleet" / "workloads" / "tracker", folder / "tracker")
    spec_file = folder / "tracker" / "workload.yaml"
    spec = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    spec["accelerators"] = accelerators
    if kinds is not None:
        spec["accelerator_kinds"] = kinds
    spec_file.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return folder


def test_an_absurd_pool_size_is_refused(tmp_path, capsys):
    text = GOOD.replace("t4: {max_nodes: 3}", "t4: {max_nodes: 100000000000000000000}")
    bad(
        tmp_path,
        capsys,
        text,
        "clusters.aws.eks-a.gpus.t4.max_nodes",
        "expected at most 1000, not 100000000000000000000",
    )


def test_a_cuda_workload_on_a_tpu_card_is_refused(tmp_path, capsys):
    text = GOOD.replace("workloads: {}", "workloads:\n  tracker: [t4, tpu-v5e]\n")
    status, err = run_validate(tmp_path, text, capsys, with_workload(tmp_path))
    assert status == 2
    assert "workloads.tracker[1]: tracker runs on nvidia.com/gpu" in err and "tpu-v5e is a google.com/tpu card" in err


def test_all_means_the_workloads_own_kind(tmp_path, capsys):
    from fleet.model.loader import load_fleet

    policy = tmp_path / "fleet.yaml"
    policy.write_text(GOOD.replace("workloads: {}", "workloads:\n  tracker: all\n"), encoding="utf-8")
    cuda = load_fleet(policy, with_workload(tmp_path)).placements["tracker"]
    assert "t4" in cuda and "tpu-v5e" not in cuda and "trn1" not in cuda
    tpu = load_fleet(policy, with_workload(tmp_path, kinds=["google.com/tpu"])).placements["tracker"]
    assert tpu == ("tpu-v5e",)
    status, err = run_validate(tmp_path, GOOD, capsys, with_workload(tmp_path, kinds=["nvidia.com/gpus"]))
    assert status == 2 and "accelerator_kinds: unknown kind(s) nvidia.com/gpus" in err


def test_a_pod_asking_for_more_cards_than_the_machine_has(tmp_path, capsys):
    text = GOOD.replace("workloads: {}", "workloads:\n  tracker: [t4]\n")
    status, err = run_validate(tmp_path, text, capsys, with_workload(tmp_path, accelerators=2))
    assert status == 2
    assert "workloads.tracker[0]: tracker asks for 2 t4 per pod" in err and "has 1" in err


def test_all_leaves_out_machines_too_small_for_the_pod(tmp_path):
    from fleet.model.loader import load_fleet

    policy = tmp_path / "fleet.yaml"
    policy.write_text(GOOD.replace("workloads: {}", "workloads:\n  tracker: all\n"), encoding="utf-8")
    fleet = load_fleet(policy, with_workload(tmp_path, accelerators=2))
    assert all(not fleet.benchmarks(c) for c in fleet.clusters.values())  # every t4/l4 machine here has one card


def test_a_placement_no_cluster_offers_is_a_warning(tmp_path, capsys):
    text = GOOD.replace("workloads: {}", "workloads:\n  tracker: [a100]\n")
    status, err = run_validate(tmp_path, text, capsys, with_workload(tmp_path))
    assert "warning: " in err and "workloads.tracker: no cluster offers any of its cards (a100)" in err
    assert status == 2  # only because the temp dir has no stack files


def test_an_existing_clusters_machines_are_unknown_so_an_explicit_placement_stays(tmp_path):
    """The fleet does not know an existing cluster's machines: a 2-card pod placed there explicitly is a pair."""
    from fleet.model.loader import load_fleet

    policy = tmp_path / "fleet.yaml"
    policy.write_text(
        "clusters:\n  existing:\n    lab: {central: true, gpus: [a100]}\nworkloads:\n  tracker: [a100]\n",
        encoding="utf-8",
    )
    fleet = load_fleet(policy, with_workload(tmp_path, accelerators=2))
    assert [(b.workload.name, b.pool.card) for b in fleet.benchmarks(fleet.cluster("lab"))] == [("tracker", "a100")]
