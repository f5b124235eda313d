"""The selection written for its readers: JSON, lines, Markdown, a GitLab child pipeline, an explanation."""

from __future__ import annotations

import json
from typing import Any

import yaml

from fleet.tools.delivery.affected.selection import Selection

# --- output formats --------------------------------------------------------------------------------------------


def to_json(selection: Selection) -> str:
    """The selection as one line of JSON (fits ``$GITHUB_OUTPUT``)."""
    return json.dumps(selection.as_dict(), separators=(",", ":"))


def to_lines(selection: Selection) -> str:
    """Stack names, one a line, central last (empty when nothing is touched)."""
    return "".join(f"{name}\n" for name in selection.names)


def to_markdown(selection: Selection) -> str:
    """A short report for a job summary or a merge-request note."""
    out = ["### Stacks this change touches", ""]
    if selection.stacks:
        out += ["| stack | cloud | why |", "|---|---|---|"]
        for s in selection.stacks:
            why = "; ".join(s.reasons).replace("|", "\\|")
            out.append(f"| `{s.stack}`{' (central, last)' if s.central else ''} | {s.cloud} | {why} |")
    else:
        out.append("None: nothing deployed changed.")
    for name in selection.removed:
        out.append(f"\n:warning: cluster `{name}` left the policy: destroy its stack by hand (not planned here).")
    for note in selection.notes:
        if not any(name in note for name in selection.removed):
            out.append(f"\nNote: {note}")
    return "\n".join(out) + "\n"


GITLAB_ACTIONS = ("preview", "up", "drift")


def to_gitlab_child(selection: Selection, action: str) -> str:
    """A GitLab child pipeline with one job per stack extending the hidden ``.stack-<action>`` job of
    ``.gitlab-ci.yml``: leaves in stage ``stacks``, the central stack in stage ``central`` (after them);
    ``up`` jobs hold the ``resource_group`` ``pulumi-<stack>`` so two deploys of a stack never overlap."""
    if action not in GITLAB_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(GITLAB_ACTIONS)}")
    doc: dict[str, Any] = {"include": [{"local": ".gitlab-ci.yml"}]}
    for s in selection.stacks:
        job: dict[str, Any] = {
            "extends": f".stack-{action}",
            "stage": "central" if s.central and action == "up" else "stacks",
            "variables": {"STACK": s.stack, "CLOUD": s.cloud, "REGION": s.region},
        }
        if action == "up":
            job["resource_group"] = f"pulumi-{s.stack}"
        doc[f"{action} {s.stack}"] = job
    if not selection.stacks:
        doc["no stack touched"] = {"extends": ".no-stacks", "stage": "stacks"}
    return yaml.safe_dump(doc, sort_keys=False, width=120)


FORMATS = ("json", "lines", "markdown", *(f"gitlab-{a}" for a in GITLAB_ACTIONS))


def render(selection: Selection, fmt: str) -> str:
    """The selection in one of ``FORMATS``."""
    if fmt == "json":
        return to_json(selection) + "\n"
    if fmt == "lines":
        return to_lines(selection)
    if fmt == "markdown":
        return to_markdown(selection)
    if fmt.startswith("gitlab-"):
        return to_gitlab_child(selection, fmt.removeprefix("gitlab-"))
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def explain(selection: Selection) -> str:
    """Human-readable reasons and notes (for stderr next to a machine-readable stdout)."""
    lines = [f"{s.stack}: {'; '.join(s.reasons)}" for s in selection.stacks] or ["no stack touched"]
    lines += [f"note: {n}" for n in selection.notes]
    return "\n".join(lines) + "\n"
