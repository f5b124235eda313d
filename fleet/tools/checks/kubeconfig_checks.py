"""The shape of a kubeconfig file, checked before the Kubernetes client reads it, so that ``doctor`` says which line
is wrong instead of failing with the YAML library's or the client's traceback.

The format is client-go's (k8s.io/client-go tools/clientcmd/api/v1 types.go ``Config``): ``clusters``,
``contexts`` and ``users`` are lists of ``{name, cluster|context|user}``; a context names its ``cluster`` and
``user``; ``current-context`` names a context.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

from fleet.model.core.errors import InputError, Problem, did_you_mean
from fleet.model.core.yaml_source import YamlDocument, read_yaml

SECTIONS = {"clusters": "cluster", "contexts": "context", "users": "user"}
EXAMPLE = (
    "a kubeconfig such as `pulumi stack output kubeconfig --show-secrets` prints (apiVersion: v1, kind: Config, "
    "clusters, contexts, users, current-context)"
)


def _named(doc: YamlDocument, section: str, problems: list[Problem]) -> dict[str, object]:
    """The entries of ``clusters``, ``contexts`` or ``users`` by name; each malformed one is a problem."""
    entries = doc.data.get(section)
    inner = SECTIONS[section]
    if entries is None:
        return {}
    if not isinstance(entries, list):
        problems.append(doc.problem((section,), f"must be a list of {{name, {inner}}} entries"))
        return {}
    out: dict[str, object] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            problems.append(doc.problem((section, i), f"must be a mapping with a name and a {inner}"))
        elif not isinstance(entry.get(inner), dict):
            problems.append(doc.problem((section, i, inner), f"must be a mapping (the {inner}'s settings)"))
        else:
            out[entry["name"]] = entry[inner]
    return out


def kubeconfig_problems(doc: YamlDocument) -> list[Problem]:
    """What is wrong with the kubeconfig in ``doc``, each problem located ([] when the client can read it)."""
    if not isinstance(doc.data, dict):
        return [doc.problem((), f"is not a kubeconfig: expected {EXAMPLE}")]
    problems: list[Problem] = []
    clusters, contexts, users = (_named(doc, s, problems) for s in SECTIONS)
    for i, (name, context) in enumerate(contexts.items()):
        assert isinstance(context, dict)
        for key, known in (("cluster", clusters), ("user", users)):
            wanted = context.get(key)
            if wanted not in known:
                problems.append(
                    doc.problem(
                        ("contexts", i, "context", key),
                        f"context {name!r} names {key} {wanted!r}, which the file does not define"
                        f"{did_you_mean(wanted, known)} (its {key}s: {', '.join(map(str, known)) or 'none'})",
                    )
                )
    current = doc.data.get("current-context")
    if not contexts and not problems:
        problems.append(doc.problem(("contexts",), f"no context: expected {EXAMPLE}"))
    elif current is None and contexts:
        problems.append(
            doc.problem(("current-context",), f"missing: set it to one of the contexts ({', '.join(contexts)})")
        )
    elif current is not None and current not in contexts:
        problems.append(
            doc.problem(
                ("current-context",),
                f"{current!r} is not a context of the file{did_you_mean(current, contexts)} (its contexts: "
                f"{', '.join(contexts) or 'none'})",
            )
        )
    return problems


# The settings whose values are base64 of a PEM file (client-go clientcmd/api/v1 types.go: []byte fields, which JSON
# and YAML carry as base64).
BASE64_KEYS = {
    "clusters": ("certificate-authority-data",),
    "users": ("client-certificate-data", "client-key-data"),
}


def data_problems(doc: YamlDocument) -> list[Problem]:
    """The ``*-data`` settings that are not base64 (the client would fail on them with a traceback), and the current
    context's exec plugin when the machine lacks it (the client would log the failure and go on without credentials,
    and the doctor blame the network)."""
    problems: list[Problem] = []
    contexts = doc.data.get("contexts")
    current = doc.data.get("current-context")
    context = (
        next(
            (e.get("context") for e in contexts if isinstance(e, dict) and e.get("name") == current),
            None,
        )
        if isinstance(contexts, list)
        else None
    )
    user = context.get("user") if isinstance(context, dict) else None
    for section, keys in BASE64_KEYS.items():
        entries = doc.data.get(section)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            inner = entry.get(SECTIONS[section]) if isinstance(entry, dict) else None
            if not isinstance(inner, dict):
                continue
            for key in keys:
                value = inner.get(key)
                if value is None:
                    continue
                try:
                    base64.b64decode(str(value).encode("ascii"), validate=True)
                    ok = isinstance(value, str)
                except (ValueError, UnicodeEncodeError):
                    ok = False
                if not ok:
                    problems.append(
                        doc.problem(
                            (section, i, SECTIONS[section], key),
                            "is not base64: give the PEM file's content in base64, such as `base64 -w0 ca.crt` "
                            "prints (or the file's path under the key without -data)",
                        )
                    )
            command = inner.get("exec", {}).get("command") if isinstance(inner.get("exec"), dict) else None
            in_use = section == "users" and entry.get("name") == user
            if in_use and isinstance(command, str) and command and shutil.which(command) is None:
                problems.append(
                    doc.problem(
                        (section, i, "user", "exec", "command"),
                        f"the exec plugin {command!r} is not installed (not on PATH), so the user has no credentials: "
                        "install it (GKE: gcloud components install gke-gcloud-auth-plugin; EKS: the aws CLI; AKS: "
                        "kubelogin), or give a kubeconfig with a token or certificate",
                    )
                )
    return problems


def check_kubeconfig(path: Path) -> None:
    """Read the kubeconfig at ``path`` with a bound and check its shape; an ``InputError`` with every problem."""
    try:
        doc = read_yaml(path)
    except InputError as exc:
        raise InputError([Problem(p.file, p.line, p.path or "--kubeconfig", p.message) for p in exc.problems]) from None
    if doc.data is None:
        raise InputError([doc.problem((), f"is empty: expected {EXAMPLE}")])
    problems = kubeconfig_problems(doc)
    if isinstance(doc.data, dict):
        problems += data_problems(doc)
    if problems:
        raise InputError(problems)
