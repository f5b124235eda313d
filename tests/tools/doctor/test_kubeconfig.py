"""Where the doctor's kubeconfig comes from (fleet/tools/doctor/kubeconfig.py): the stack's output in a private
file deleted afterwards, and a clear exit 2 without the Pulumi CLI."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from fleet.tools.cli import main
from fleet.tools.doctor import kubeconfig as doctor_kubeconfig
from tests.tools.doctor.fake_kube_api import ApiServer, write_kubeconfig
from tests.tools.doctor.support import BASE, doctor_at, leaf_of
from tests.tools.doctor.world import healthy


def fake_pulumi(directory: Path, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "pulumi"
    exe.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    exe.chmod(0o755)
    return directory


def test_the_kubeconfig_comes_from_the_stack_output_in_a_private_file_deleted_afterwards(
    fleet, tmp_path, capsys, monkeypatch
):
    cluster = leaf_of(fleet)
    with ApiServer(healthy(fleet, cluster)) as api:
        kubeconfig = write_kubeconfig(tmp_path / "source.yaml", api.url)
        calls = tmp_path / "calls.txt"
        bin_dir = fake_pulumi(tmp_path / "bin", f'echo "$@" > {calls}\ncat {kubeconfig}\n')
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        monkeypatch.setattr("tempfile.tempdir", str(scratch))
        modes = []
        real = doctor_kubeconfig.new_client_from_config

        def spy(config_file: str, **kwargs: Any) -> Any:
            modes.append(stat.S_IMODE(Path(config_file).stat().st_mode))
            assert kwargs.get("persist_config") is False  # the kubeconfig is never written back
            return real(config_file=config_file, **kwargs)

        monkeypatch.setattr(doctor_kubeconfig, "new_client_from_config", spy)
        status = doctor_at([*BASE, "--stack", cluster.name])
    out = capsys.readouterr().out
    assert status == 0, out
    assert calls.read_text().split() == ["stack", "output", "kubeconfig", "--show-secrets", "--stack", cluster.name]
    assert modes == [0o600]
    assert list(scratch.iterdir()) == []  # the temporary kubeconfig is gone
    assert f"--kubeconfig <(pulumi stack output kubeconfig --show-secrets --stack {cluster.name})" in out


def test_pulumi_missing_or_failing_exits_2_with_a_clear_message(fleet, tmp_path, capsys, monkeypatch):
    cluster = leaf_of(fleet)
    base = [*BASE, "--stack", cluster.name]
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "the Pulumi CLI is not installed" in err and "--kubeconfig FILE" in err and "Traceback" not in err
    bin_dir = fake_pulumi(tmp_path / "bin", f"echo \"error: no stack named '{cluster.name}' found\" >&2\nexit 255\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "failed (exit 255)" in err and f"no stack named '{cluster.name}' found" in err and "Traceback" not in err
