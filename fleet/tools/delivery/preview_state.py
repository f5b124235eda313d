"""Preview stacks that hold no deploy-grade secret: a redacted copy of each deployed stack, for pull-request previews.

A Pulumi stack has one secrets provider for its config and its state, and a preview decrypts both (the engine reads
the whole checkpoint), so a preview of the deployed stack needs the key that decrypts every deploy secret: the
federation client keys, the Magnum and existing clusters' admin kubeconfigs, runner tokens, workload credentials. So
previews never open the deployed stack. After each ``pulumi up`` the deploy job exports the stack, replaces every
secret value with ``SECRET_PLACEHOLDER`` (``redact_deployment``) and imports it into the stack of the same name in the
**preview backend** (``PREVIEW_BACKEND_URL``), encrypted with the preview passphrase; a preview runs against that copy
with a stack file whose secrets are the placeholder too, encrypted with the preview key (``preview_config``), which the
program already takes as a value it cannot read (``fleet.program.stack_config.SECRET_PLACEHOLDER``). The preview key
decrypts placeholders only.

Pulumi facts (pulumi/pulumi sdk/go/common/resource/sig: a secret is an object with the key ``SECRET_SIG`` whose value
is ``SECRET_VALUE``; ``pulumi stack export --show-secrets`` writes it with ``plaintext``, the JSON of the value;
``stack import`` encrypts each such value with the target stack's provider).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from fleet.program.stack_config import SECRET_PLACEHOLDER, is_secure

SECRET_SIG = "4dabf18193072939515e22adb298388d"
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"
# the stack file keys of the deployed stack's own secrets provider, never copied into a preview stack's file
PROVIDER_KEYS = ("encryptionsalt", "secretsprovider", "encryptedkey")
REFERENCE_PREFIX = "gpu-fleet:stackReferencePrefix"


def redact_deployment(value: Any) -> Any:
    """``value`` (a ``pulumi stack export --show-secrets`` document) with every secret's value the placeholder and
    the stack's secrets provider state left out (the import sets the target's own)."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == SECRET_VALUE:
            return {SECRET_SIG: SECRET_VALUE, "plaintext": json.dumps(SECRET_PLACEHOLDER)}
        return {k: redact_deployment(v) for k, v in value.items() if k != "secrets_providers"}
    if isinstance(value, list):
        return [redact_deployment(v) for v in value]
    return value


def _replaced(value: Any, placeholder: str) -> Any:
    """``value`` with each encrypted part replaced by ``{secure: placeholder}``."""
    if is_secure(value):
        return {"secure": placeholder}
    if isinstance(value, dict):
        return {k: _replaced(v, placeholder) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, placeholder) for v in value]
    return value


def preview_config(
    stack_file: dict[str, Any], salt: str, placeholder: str, reference_prefix: str = ""
) -> dict[str, Any]:
    """The preview stack's file: the stack's config with every encrypted value replaced by ``placeholder`` (the
    preview key's encryption of ``SECRET_PLACEHOLDER``: with one salt and passphrase, one ciphertext serves every
    preview stack), the preview stacks' ``salt`` and, when given, a stack reference prefix naming the preview stacks
    (the central then reads its leaves' redacted copies). Nothing of the deployed stack's key is kept."""
    config = {k: _replaced(v, placeholder) for k, v in (stack_file.get("config") or {}).items()}
    if reference_prefix:
        config[REFERENCE_PREFIX] = reference_prefix
    out = {k: v for k, v in stack_file.items() if k not in (*PROVIDER_KEYS, "config")}
    return {**out, "encryptionsalt": salt, "config": config}


def main(argv: list[str] | None = None) -> int:
    """``redact`` (stdin to stdout), or ``config FILE --salt S --placeholder C`` (the preview stack's file)."""
    parser = argparse.ArgumentParser(prog="python -m fleet.tools.delivery.preview_state", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("redact", help="redact a `pulumi stack export --show-secrets` document (stdin to stdout)")
    config = sub.add_parser("config", help="the preview stack's file made from a stack file")
    config.add_argument("file", type=Path)
    config.add_argument("--salt", required=True)
    config.add_argument("--placeholder", required=True, help="the preview key's ciphertext of the placeholder")
    config.add_argument("--stack-reference-prefix", default="")
    args = parser.parse_args(argv)
    if args.command == "redact":
        json.dump(redact_deployment(json.load(sys.stdin)), sys.stdout)
        return 0
    data = yaml.safe_load(args.file.read_text(encoding="utf-8")) or {}
    made = preview_config(data, args.salt, args.placeholder, args.stack_reference_prefix)
    print(yaml.safe_dump(made, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
