"""How the doctor reaches a cluster: the kubeconfig (given, or the stack's output in a private temporary file), the
API client made from it, and the ``kubectl`` command the fixes name."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes.client import ApiClient, Configuration
from kubernetes.config import new_client_from_config
from kubernetes.config.config_exception import ConfigException

from fleet.model.core.errors import InputError, Problem
from fleet.model.loader import ROOT
from fleet.tools.checks.kubeconfig_checks import check_kubeconfig


@contextmanager
def kubeconfig_file(stack: str, given: Path | None, timeout: float = 120.0) -> Iterator[Path]:
    """The kubeconfig to use: ``given``, else ``pulumi stack output kubeconfig --show-secrets --stack <stack>`` in a
    private temporary file (mode 0600), deleted afterwards. ``InputError`` when neither can be had."""
    if given is not None:
        if not given.is_file() or not os.access(given, os.R_OK):
            why = "no such file" if not given.exists() else "not a readable file"
            raise InputError([Problem(str(given), 1, "--kubeconfig", f"cannot read the kubeconfig: {why}")])
        yield given
        return
    pulumi = shutil.which("pulumi")
    command = ["pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack]
    shown = " ".join(command)
    if pulumi is None:
        raise InputError(
            [
                Problem(
                    "pulumi",
                    1,
                    "--stack",
                    f"the Pulumi CLI is not installed, so `{shown}` cannot run: install it "
                    "(https://www.pulumi.com/docs/install/) or give --kubeconfig FILE",
                )
            ]
        )
    try:
        done = subprocess.run(
            [pulumi, *command[1:]], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError([Problem("pulumi", 1, "--stack", f"`{shown}` did not run: {exc}")]) from None
    if done.returncode != 0 or not done.stdout.strip():
        said = " ".join((done.stderr or done.stdout or "no output").split())[-300:]
        raise InputError(
            [
                Problem(
                    "pulumi",
                    1,
                    "--stack",
                    f"`{shown}` failed (exit {done.returncode}): {said}; log in to the stack's backend (pulumi "
                    "login), or give --kubeconfig FILE",
                )
            ]
        )
    handle, name = tempfile.mkstemp(prefix="gpu-fleet-kubeconfig-", suffix=".yaml")  # created with mode 0600
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(done.stdout)
        os.chmod(path, 0o600)
        yield path
    finally:
        path.unlink(missing_ok=True)


def api_client(path: Path) -> ApiClient:
    """An API client from a kubeconfig file, which is never written back; ``InputError`` if it is unusable."""
    check_kubeconfig(path)  # bounded, and each problem at its line: the client would fail with a traceback
    configuration = Configuration()
    configuration.retries = 1
    try:
        return new_client_from_config(config_file=str(path), persist_config=False, client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        message = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise InputError([Problem(str(path), 1, "--kubeconfig", f"not a usable kubeconfig: {message}")]) from None


def kubectl_for_stack(stack: str, kubeconfig: Path | None) -> str:
    """``kubectl`` with the kubeconfig of ``stack``: the given file, else the stack output read in place (bash/zsh
    process substitution: the credentials never touch the disk)."""
    if kubeconfig is not None:
        return f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))}"
    return f"kubectl --kubeconfig <(pulumi stack output kubeconfig --show-secrets --stack {stack})"
