"""The real tier's copy of a stack file leaves out values another secrets provider encrypted (the CLI refuses the
whole file with "validating stack config: bad value" otherwise, as it did on the lab fleet's existing cluster)."""

from __future__ import annotations

from pathlib import Path

from tests.real.engine import without_encrypted_values


def test_the_copy_drops_encrypted_values_and_keeps_the_rest(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.site.yaml"
    stack_file.write_text(
        "config:\n"
        '  pulumi:disable-default-providers: ["*"]\n'
        "  gpu-fleet:federationSourceRanges: [10.20.0.0/16]\n"
        "  gpu-fleet:kubeconfig:\n"
        "    secure: v1:bGFiLXBsYWNlaG9sZGVy\n"
        "  gpu-fleet:magnum: {secure: not-only-secure, flavor: x}\n"
    )
    assert without_encrypted_values(stack_file)["config"] == {
        "pulumi:disable-default-providers": ["*"],
        "gpu-fleet:federationSourceRanges": ["10.20.0.0/16"],
        "gpu-fleet:magnum": {"secure": "not-only-secure", "flavor": "x"},
    }


def test_an_empty_stack_file_gives_an_empty_config(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.empty.yaml"
    stack_file.write_text("")
    assert without_encrypted_values(stack_file) == {"config": {}}
