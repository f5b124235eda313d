"""fleet/tools/delivery/preview_state.py: the preview stacks' redacted state and config hold no deploy secret."""

from __future__ import annotations

import io
import json

import yaml

from fleet.program.stack_config import SECRET_PLACEHOLDER
from fleet.tools.delivery import preview_state
from fleet.tools.delivery.preview_state import SECRET_SIG, SECRET_VALUE, preview_config, redact_deployment

KEY = "-----BEGIN PRIVATE KEY-----deploy-grade"


def _export() -> dict:
    """A `pulumi stack export --show-secrets` document with a secret output and a secret input."""
    secret = {SECRET_SIG: SECRET_VALUE, "plaintext": json.dumps(KEY)}
    return {
        "version": 3,
        "deployment": {
            "manifest": {"time": "2026-01-01T00:00:00Z"},
            "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:deploy"}},
            "resources": [
                {
                    "urn": "urn:pulumi:leaf::gpu-fleet::tls:index/privateKey:PrivateKey::client",
                    "inputs": {"algorithm": "ECDSA"},
                    "outputs": {"privateKeyPem": secret, "publicKeyPem": "PUBLIC"},
                },
                {"urn": "urn:pulumi:leaf::gpu-fleet::pulumi:pulumi:Stack::gpu-fleet-leaf", "outputs": {"k": [secret]}},
            ],
        },
    }


def test_every_secret_of_the_state_is_the_placeholder_and_the_rest_is_kept():
    redacted = redact_deployment(_export())
    text = json.dumps(redacted)
    assert "deploy-grade" not in text and "secrets_providers" not in text
    client, stack = redacted["deployment"]["resources"]
    assert client["outputs"]["privateKeyPem"] == {SECRET_SIG: SECRET_VALUE, "plaintext": json.dumps(SECRET_PLACEHOLDER)}
    assert client["outputs"]["publicKeyPem"] == "PUBLIC" and client["inputs"] == {"algorithm": "ECDSA"}
    assert stack["outputs"]["k"][0]["plaintext"] == json.dumps(SECRET_PLACEHOLDER)  # still a secret, in a list too


def test_the_preview_stack_file_has_no_deploy_ciphertext_and_its_own_salt():
    stack_file = {
        "encryptionsalt": "v1:deploy-salt",
        "config": {
            "gcp:project": "p",
            "gpu-fleet:grafanaAdminPassword": {"secure": "v1:deploy"},
            "gpu-fleet:workloadSecrets": {"3dgan": {"KEY": {"secure": "v1:deploy-a"}, "BUCKET": "plain"}},
            "gpu-fleet:apiAllowedCidrs": ["10.0.0.0/8"],
        },
    }
    out = preview_config(stack_file, "v1:preview-salt", "v1:placeholder", "org/gpu-fleet-preview")
    assert "deploy" not in yaml.safe_dump(out)
    assert out["encryptionsalt"] == "v1:preview-salt"
    assert out["config"] == {
        "gcp:project": "p",
        "gpu-fleet:grafanaAdminPassword": {"secure": "v1:placeholder"},
        "gpu-fleet:workloadSecrets": {"3dgan": {"KEY": {"secure": "v1:placeholder"}, "BUCKET": "plain"}},
        "gpu-fleet:apiAllowedCidrs": ["10.0.0.0/8"],
        "gpu-fleet:stackReferencePrefix": "org/gpu-fleet-preview",
    }


def test_the_command_line_writes_the_preview_stack_file(tmp_path, capsys):
    source = tmp_path / "Pulumi.leaf.yaml"
    source.write_text("encryptionsalt: v1:deploy\nconfig:\n  gpu-fleet:alertReceiver: {secure: v1:deploy}\n")
    assert preview_state.main(["config", str(source), "--salt", "v1:s", "--placeholder", "v1:p"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {
        "encryptionsalt": "v1:s",
        "config": {"gpu-fleet:alertReceiver": {"secure": "v1:p"}},
    }


def test_the_command_line_redacts_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(_export())))
    assert preview_state.main(["redact"]) == 0
    assert "deploy-grade" not in capsys.readouterr().out
