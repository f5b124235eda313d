"""The real engine: the Pulumi CLI built from ``receivers/pulumi`` and the Kubernetes provider built from
``receivers/pulumi-kubernetes``, with a local backend in a temporary folder.

The Python language host (``pulumi-language-python``) is not served by this machine's Go module proxy, so the CLI
runs the program the way Pulumi's Automation API runs an inline program: the SDK serves the language protocol from
this process (``pulumi.automation``, ``--client``) and the CLI drives it exactly as it drives a language host. A
policy pack folder, too, the CLI 3.274 runs only through its language's plugin; given an executable instead, it runs
that as a binary analyzer plugin with the engine's address (pulumi/pulumi pkg/v3 v3.274.0
resource/plugin/analyzer_plugin.go NewPolicyAnalyzer), so ``policy_pack`` is a two-line launcher that runs the pack
folder with ``python -m pulumi.policy`` (the SDK's own policy runner), which serves the analyzer protocol.

Each stack's config starts as the fleet's own stack file, copied: the committed files are never written. The copy
leaves out the file's encrypted values (``secure:``), which only the team's own secrets provider decrypts (the CLI
refuses the whole file otherwise: "validating stack config: bad value"); the tier sets its own values for the
settings it needs (the stand-in cluster's kubeconfig in place of an existing cluster's).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from pulumi import automation as auto

from tests.real import toolchain

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "gpu-fleet"
POLICY_PACK = ROOT / "policy"
PASSPHRASE = "the real tier's own, for its temporary stacks"
#: How the program names another stack (gpu-fleet:stackReferencePrefix): a local backend's organization is this.
STACK_REFERENCE_PREFIX = f"organization/{PROJECT}"


def without_encrypted_values(stack_file: Path) -> dict:
    """The stack file's content without the config values encrypted by another secrets provider (``secure:``)."""
    content = yaml.safe_load(stack_file.read_text()) or {}
    config = content.get("config") or {}
    content["config"] = {
        key: value for key, value in config.items() if not (isinstance(value, dict) and set(value) == {"secure"})
    }
    return content


def _program() -> None:
    from fleet.program.stack import main

    main()


@dataclass
class RealEngine:
    """A local backend and workspace under ``folder`` for the fleet at ``fleet_root`` (its Pulumi.yaml and stacks/)."""

    folder: Path
    fleet_root: Path = ROOT

    def __post_init__(self) -> None:
        self.project = self.folder / "project"
        (self.project / "stacks").mkdir(parents=True, exist_ok=True)
        shutil.copy(self.fleet_root / "Pulumi.yaml", self.project / "Pulumi.yaml")
        # The provider runs a Release's post-renderer by its path from the project's folder, as in the repository
        # (components/kubernetes/postrender): the program's own components, where that path finds them.
        components = self.project / "components"
        if not components.is_symlink():
            components.symlink_to(ROOT / "components", target_is_directory=True)
        self.home = self.folder / "pulumi-home"
        self.state = self.folder / "state"
        self.launchers = self.folder / "bin"
        for folder in (self.home, self.state, self.launchers):
            folder.mkdir(parents=True, exist_ok=True)
        self.policy_pack = self.launchers / "gpu-fleet-policy-pack"
        self.policy_pack.write_text(
            f'#!/bin/sh\ncd "{POLICY_PACK}" && exec "{sys.executable}" -u -m pulumi.policy "$1" .\n'
        )
        self.policy_pack.chmod(0o755)

    def env(self) -> dict[str, str]:
        """The CLI's environment: the built receivers first on PATH, no plugin downloads, no update check."""
        path = os.pathsep.join([*map(str, toolchain.path_entries()), str(self.launchers), os.environ.get("PATH", "")])
        return {
            "PATH": path,
            "PULUMI_BACKEND_URL": self.state.as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_HOME": str(self.home),
            "KUBECONFIG": os.devnull,  # nothing but the stack's own provider configuration reaches a cluster
        }

    def stack(
        self,
        name: str,
        plain: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> auto.Stack:
        """Stack ``name`` with the fleet's stack file and, on top, the ``plain`` and ``secret`` config values (keys
        with a dot below ``gpu-fleet:`` are paths, as ``pulumi config set --path`` takes them)."""
        copy = self.project / "stacks" / f"Pulumi.{name}.yaml"
        if not copy.exists():
            original = self.fleet_root / "stacks" / f"Pulumi.{name}.yaml"
            copy.write_text(yaml.safe_dump(without_encrypted_values(original)))
        os.environ.update({k: v for k, v in self.env().items() if k == "PULUMI_CONFIG_PASSPHRASE"})
        workspace = auto.LocalWorkspaceOptions(
            work_dir=str(self.project),
            pulumi_home=str(self.home),
            env_vars=self.env(),
            secrets_provider="passphrase",
            pulumi_command=auto.PulumiCommand(
                root=str(toolchain.binary("pulumi").parent.parent), skip_version_check=True
            ),
        )
        stack = auto.create_or_select_stack(name, project_name=PROJECT, program=_program, opts=workspace)
        values = {
            "gpu-fleet:stackFile": (str(copy), False),
            "gpu-fleet:stackReferencePrefix": (STACK_REFERENCE_PREFIX, False),
            **{key: (value, False) for key, value in (plain or {}).items()},
            **{key: (value, True) for key, value in (secrets or {}).items()},
        }
        for key, (value, secret) in values.items():
            stack.set_config(key, auto.ConfigValue(value=value, secret=secret), path="." in key.split(":", 1)[1])
        return stack
