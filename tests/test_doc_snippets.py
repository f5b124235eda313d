"""Every YAML snippet of README.md and docs/ is checked as what it shows, so the docs cannot drift from the code.

The line before a ```yaml fence (blank lines aside) says what the snippet is:

- ``<!-- snippet: policy -->``: a whole policy file, loaded by the real loader with the shipped workloads; it must
  load without a problem or a warning;
- ``<!-- snippet: policy-part -->``: sections of a policy file, each checked by the policy file's model (keys, types,
  patterns), the cross-key rules left out;
- ``<!-- snippet: stack CLOUD -->``: a stack file, checked by the stack checks as the file of the tests' own fixture
  cluster of that cloud (tests/fixtures/fleet): no problem, warnings allowed (sample placeholders);
- ``<!-- snippet: workload -->``: a workload.yaml, checked by the workload loader's model;
- ``<!-- snippet: example PATH -->``: lines copied from a file of the repository (an example fleet), which must hold
  them as they are;
- ``<!-- snippet: partial -->``: deliberately partial; it must parse as YAML.

A YAML snippet without a marker fails, with the markers to choose from.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pydantic
import pytest
import yaml

from fleet.model.core.errors import InputError
from fleet.model.core.validation import validate_document
from fleet.model.core.workloads import WORKLOADS_DIR, WorkloadSpec
from fleet.model.core.yaml_source import read_yaml
from fleet.model.loader import load_fleet
from fleet.model.policy_file.schema import FleetFile
from tests.conftest import FIXTURES, ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^\s*```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*snippet:\s*(\S+)(?:\s+(\S+))?\s*-->$")
KINDS = ("policy", "policy-part", "stack", "workload", "example", "partial")


@dataclass(frozen=True)
class Snippet:
    """One fenced YAML block of a Markdown page: where it is, its marker and its text."""

    page: Path
    line: int  # of the opening fence, 1-based
    kind: str | None
    argument: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page}:{self.line}"


def yaml_snippets(page: Path, text: str | None = None) -> list[Snippet]:
    """The ```yaml (or ```yml) blocks of a page, each with the marker on the line before it."""
    lines = (page.read_text(encoding="utf-8") if text is None else text).split("\n")
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        if fence.group(1) in ("yaml", "yml"):
            before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(before)
            found.append(
                Snippet(
                    page,
                    i + 1,
                    marker.group(1) if marker else None,
                    marker.group(2) if marker else None,
                    "\n".join(lines[i + 1 : end]) + "\n",
                )
            )
        i = end + 1
    return found


def snippet_problems(snippet: Snippet, tmp_path: Path) -> list[str]:
    """What is wrong with a snippet, checked as its marker says ([] when nothing)."""
    if snippet.kind not in KINDS:
        return [f"mark it with one of <!-- snippet: {' | '.join(KINDS)} --> on the line before the fence"]
    if snippet.kind == "example":  # an excerpt, which may not parse alone
        source = ROOT / (snippet.argument or "")
        if not snippet.argument or not source.is_file():
            return [f"<!-- snippet: example PATH -->: no file {snippet.argument!r} in the repository"]
        return [] if snippet.text in source.read_text(encoding="utf-8") else [f"not as it is in {source}"]
    try:
        data = yaml.safe_load(snippet.text)
    except yaml.YAMLError as exc:
        return [f"not YAML: {exc}"]
    path = tmp_path / "snippet.yaml"
    path.write_text(snippet.text, encoding="utf-8")
    try:
        if snippet.kind == "policy":
            named = set((data or {}).get("workloads") or {}) if isinstance(data, dict) else set()
            if named <= {p.name for p in WORKLOADS_DIR.iterdir() if p.is_dir()}:
                fleet = load_fleet(path, WORKLOADS_DIR)
                return [f"warning: {w}" for w in fleet.warnings]
            # the docs show the sample's workloads, which a team that replaced them no longer has: the model only
            FleetFile.model_validate(data)
            return []
        if snippet.kind == "policy-part":
            if not isinstance(data, dict) or not set(data) <= set(FleetFile.model_fields):
                return [f"a policy-part holds sections of a policy file ({', '.join(FleetFile.model_fields)})"]
            FleetFile.model_validate({"clusters": {}, **data})
            return []
        if snippet.kind == "stack":
            return _stack_problems(snippet, tmp_path)
        if snippet.kind == "workload":
            validate_document(WorkloadSpec, read_yaml(path))
            return []
    except InputError as exc:
        return [str(p) for p in exc.problems]
    except pydantic.ValidationError as exc:
        return [str(exc)]
    return []  # partial: parsed above


def _stack_problems(snippet: Snippet, tmp_path: Path) -> list[str]:
    """The stack checks' problems with the snippet as the stack file of the fixture fleet's cluster of its cloud."""
    from fleet.tools.checks.stack_checks import check_stacks

    fixture = tmp_path / "fleet"
    shutil.copytree(FIXTURES / "fleet", fixture)
    fleet = load_fleet(fixture / "fleet.yaml", fixture / "workloads")
    names = [c.name for c in fleet.clusters.values() if c.cloud == snippet.argument]
    if not names:
        clouds = sorted({c.cloud for c in fleet.clusters.values()})
        return [f"<!-- snippet: stack CLOUD -->: name a cloud ({', '.join(clouds)})"]
    (fixture / "stacks" / f"Pulumi.{names[0]}.yaml").write_text(snippet.text, encoding="utf-8")
    return [str(p) for p in check_stacks(fleet, fixture / "stacks").problems]


SNIPPETS = [s for page in DOCS for s in yaml_snippets(page)]


def test_the_docs_have_yaml_snippets():
    assert len(SNIPPETS) >= 5
    assert {s.kind for s in SNIPPETS} >= {"policy", "policy-part", "stack"}


@pytest.mark.parametrize("snippet", SNIPPETS, ids=str)
def test_the_snippet_is_what_it_says(snippet: Snippet, tmp_path: Path):
    assert snippet_problems(snippet, tmp_path) == [], str(snippet)


# --- the checks can fail ---------------------------------------------------------------------------------------


def _page(marker: str, body: str) -> Snippet:
    text = f"Text.\n\n{marker}\n\n```yaml\n{body}```\n\n```sh\nnot: checked\n```\n"
    (snippet,) = yaml_snippets(Path("/page.md"), text)
    return snippet


@pytest.mark.parametrize(
    ("marker", "body", "fragment"),
    [
        ("", "a: 1\n", "mark it with one of"),
        ("<!-- snippet: partial -->", "a: [1\n", "not YAML"),
        ("<!-- snippet: policy -->", "clusters:\n  gcp:\n    g: {zone: us-central1-a, gpus: [t4]}\n", "central"),
        (
            "<!-- snippet: policy -->",
            "clusters:\n  gcp:\n    g: {zone: us-central1-a, central: true, gpus: [t44]}\n",
            "t44",
        ),
        ("<!-- snippet: policy-part -->", "runners:\n  clusters: {a: {t4: {concurency: 2}}}\n", "concurency"),
        ("<!-- snippet: policy-part -->", "runner: {}\n", "sections of a policy file"),
        ("<!-- snippet: stack gcp -->", "config:\n  gcp:project: p\n", "disable-default-providers: missing"),
        ("<!-- snippet: stack mars -->", "config: {}\n", "name a cloud"),
        ("<!-- snippet: workload -->", "name: w\n", "required key is missing"),
        ("<!-- snippet: example tests/fixtures/fleet/fleet.yaml -->", "not: in it\n", "not as it is in"),
    ],
)
def test_a_wrong_snippet_is_found(marker: str, body: str, fragment: str, tmp_path: Path):
    problems = snippet_problems(_page(marker, body), tmp_path)
    assert any(fragment in p for p in problems), problems


def test_a_right_snippet_of_each_kind_passes(tmp_path: Path):
    example = (ROOT / "tests" / "fixtures" / "fleet" / "fleet.yaml").read_text(encoding="utf-8").split("\n")
    copied = "\n".join(example[-4:-1]) + "\n"
    page = _page("<!-- snippet: example tests/fixtures/fleet/fleet.yaml -->", copied)
    assert snippet_problems(page, tmp_path) == []
    assert snippet_problems(_page("<!-- snippet: partial -->", "a: {b: 1}\n"), tmp_path) == []
    stack = 'config:\n  pulumi:disable-default-providers: ["*"]\n  gcp:project: lab-project\n'
    assert snippet_problems(_page("<!-- snippet: stack gcp -->", stack), tmp_path) == []
