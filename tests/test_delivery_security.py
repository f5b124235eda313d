"""Least privilege in delivery, read off the workflow files themselves: who holds which identity and secret, which
policy pack judges a preview, and that every Python package CI installs is hash-locked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
LOCK = ROOT / "requirements-dev.lock"
PACK_LOCK = ROOT / "policy" / "requirements.txt"
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)", re.MULTILINE)


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def all_workflows() -> dict[str, dict[str, Any]]:
    return {p.name: workflow(p.name) for p in sorted(WORKFLOWS.glob("*.yml"))}


def stack_calls() -> list[tuple[str, str, dict[str, Any]]]:
    """(workflow, job, job) of every job that calls pulumi-stack.yml."""
    return [
        (name, job_name, job)
        for name, wf in all_workflows().items()
        for job_name, job in wf["jobs"].items()
        if str(job.get("uses", "")).endswith("pulumi-stack.yml")
    ]


def test_no_workflow_inherits_every_secret():
    for name in WORKFLOWS.glob("*.yml"):
        assert "secrets: inherit" not in name.read_text(encoding="utf-8"), name.name


def test_each_operation_runs_in_its_environment_with_only_the_permissions_it_uses():
    calls = stack_calls()
    assert calls
    wanted = {
        "preview": ("preview", {"contents": "read", "id-token": "write", "pull-requests": "write"}),
        "drift": ("preview", {"contents": "read", "id-token": "write", "issues": "write"}),
        "up": ("production", {"contents": "read", "id-token": "write"}),
    }
    for name, job_name, job in calls:
        operation = job["with"]["operation"]
        environment, permissions = wanted[operation]
        assert job["with"]["environment"] == environment, (name, job_name)
        assert job["permissions"] == permissions, (name, job_name)
    # the callee runs its job in that environment, whose identities the clouds trust by subject
    (job,) = workflow("pulumi-stack.yml")["jobs"].values()
    assert job["environment"] == "${{ inputs.environment }}"
    assert workflow("pulumi-stack.yml")[True]["workflow_call"]["inputs"]["environment"]["required"] is True


def test_id_token_only_where_a_job_runs_in_an_environment():
    for name, wf in all_workflows().items():
        assert (wf.get("permissions") or {}).get("id-token") is None, name  # never workflow-wide
        for job_name, job in wf["jobs"].items():
            if (job.get("permissions") or {}).get("id-token") == "write":
                assert str(job.get("uses", "")).endswith("pulumi-stack.yml"), (name, job_name)
                assert job["with"].get("environment"), (name, job_name)


def test_secrets_are_read_by_the_steps_that_use_them_not_by_the_job():
    (job,) = workflow("pulumi-stack.yml")["jobs"].values()
    assert not [k for k, v in (job.get("env") or {}).items() if "secrets." in str(v)]
    users = [s for s in job["steps"] if any("secrets." in str(v) for v in (s.get("env") or {}).values())]
    assert {s["name"].split(" ")[0] for s in users} == {"pulumi", "OpenStack", "preview"}


def test_a_preview_is_judged_by_the_base_branchs_policy_pack_in_a_python_of_its_own():
    previews = [job for _, _, job in stack_calls() if job["with"]["operation"] == "preview"]
    assert len(previews) == 2  # at once, and after the approval gate
    for preview in previews:
        assert preview["with"]["policy-ref"] == "${{ github.event.pull_request.base.sha }}"
        assert preview["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    (job,) = workflow("pulumi-stack.yml")["jobs"].values()
    base = next(s for s in job["steps"] if s.get("name") == "Policy pack of the base branch")
    assert base["with"]["ref"] == "${{ inputs.policy-ref }}" and base["with"]["path"] == "policy-base"
    pulumi = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@"))
    assert "policy-base/policy" in pulumi["with"]["policyPacks"]
    # the pack's python3 is a venv of the base branch's pack lock, not the program's .venv the pull request built
    python = next(s for s in job["steps"] if s.get("name") == "Python of the policy pack")
    assert python["env"]["LOCK"] == "${{ inputs.policy-ref != '' && 'policy-base/policy/requirements.txt' || '' }}"
    assert '"$RUNNER_TEMP/pack/bin" >> "$GITHUB_PATH"' in python["run"]
    program = next(s for s in job["steps"] if str(s.get("name", "")).startswith("Python environment of the program"))
    assert "GITHUB_PATH" not in program["run"]
    # deploys make images-by-digest mandatory
    assert "DEPLOY_POLICY_CONFIG" in pulumi["with"]["policyPackConfigs"]
    config = json.loads((ROOT / "policy" / "deploy-config.json").read_text(encoding="utf-8"))
    assert config == {
        policy: {"enforcementLevel": "mandatory"}
        for policy in ("images-by-digest", "federation-source-ranges", "api-allow-list")
    }


def test_previews_without_a_preview_identity_wait_for_a_maintainer_the_workflow_checks():
    preview = workflow("preview.yml")
    assert list(preview[True]) == ["pull_request_target"]  # the base branch's workflow and gate
    jobs = preview["jobs"]
    assert (
        jobs["select"]["with"]["gate-all"]
        == "${{ github.event.pull_request.head.repo.full_name != github.repository }}"
    )
    approval = jobs["approval"]
    assert approval["environment"] == "preview-approval"
    (checkout, check) = approval["steps"]
    assert "ref" not in (checkout.get("with") or {})  # the base branch's code: pull_request_target's checkout
    assert "python3 -m fleet.tools.delivery.approval" in check["run"]
    assert "${{ github.event.pull_request.head.sha }}" == check["env"]["HEAD"]
    assert jobs["preview-approved"]["needs"] == ["select", "approval"]
    assert "gated" in jobs["preview-approved"]["strategy"]["matrix"]["include"]
    assert "open" in jobs["preview"]["strategy"]["matrix"]["include"]
    # no pull request workflow previews: pull-request.yml runs the offline checks only
    assert list(workflow("pull-request.yml")["jobs"]) == ["offline"]


def test_previews_and_drift_checks_never_hold_the_deploy_key():
    (job,) = workflow("pulumi-stack.yml")["jobs"].values()
    pulumi = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@"))
    passphrase = pulumi["env"]["PULUMI_CONFIG_PASSPHRASE"]
    assert passphrase.strip() == (
        "${{ inputs.operation == 'up' && secrets.PULUMI_CONFIG_PASSPHRASE || secrets.PREVIEW_CONFIG_PASSPHRASE }}"
    )
    assert (
        pulumi["with"]["cloud-url"]
        == "${{ inputs.operation == 'up' && vars.PULUMI_BACKEND_URL || vars.PREVIEW_BACKEND_URL }}"
    )
    stack_file = next(s for s in job["steps"] if s.get("name") == "preview stack file (no deploy secret)")
    assert stack_file["if"] == "inputs.operation != 'up'" and "secrets." not in json.dumps(stack_file)
    # the redacted copy is written by a deploy only
    copy = next(s for s in job["steps"] if s.get("name") == "preview copy of the stack (secrets redacted)")
    assert copy["if"] == "inputs.operation == 'up'"
    assert "preview_state redact" in copy["run"] and "pulumi stack import" in copy["run"]


def test_gitlab_deploys_and_previews_use_separate_environments_and_the_target_branchs_pack():
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text(encoding="utf-8"))
    assert ci[".stack-up"]["environment"]["name"] == "fleet/$STACK"
    for job in (".stack-preview", ".stack-drift"):
        assert ci[job]["environment"] == {"name": "fleet-preview/$STACK", "action": "prepare"}
    preview = "\n".join(ci[".stack-preview"]["script"])
    assert 'git worktree add --detach policy-base "$POLICY_BASE_SHA"' in preview
    assert "--require-hashes -r policy-base/policy/requirements.txt" in preview  # the pack's own Python
    # previews and drift checks run against the redacted copies under the preview key; deploys write them
    for job in (".stack-preview", ".stack-drift"):
        assert ci[job]["variables"]["PREVIEW_COPY"] == "true"
    copy = "\n".join(ci[".stack"]["before_script"])
    assert 'PULUMI_CONFIG_PASSPHRASE="${PREVIEW_CONFIG_PASSPHRASE:-}"' in copy and "preview_state config" in copy
    assert "preview_state redact" in "\n".join(ci[".stack-up"]["script"])
    assert '--policy-pack "$pack"' in preview
    assert "--policy-pack-config policy/deploy-config.json" in " ".join(ci[".stack-up"]["script"])


def test_images_are_pushed_only_from_the_default_branch_with_protected_credentials():
    (job,) = workflow("images.yml")["jobs"].values()
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    assert job["environment"] == "fleet-images"  # the registry token is that environment's secret, not the repo's
    assert "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)" in job["if"]
    assert workflow("images.yml").get("permissions") == {"contents": "read"}  # packages: write in that job only
    for name, wf in all_workflows().items():
        for job_name, other in wf["jobs"].items():
            if (other.get("permissions") or {}).get("packages") == "write":
                assert (name, job_name) == ("images.yml", "push"), (name, job_name)
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text(encoding="utf-8"))
    images = ci["images"]
    assert images["environment"] == {"name": "fleet-images", "action": "prepare"}  # its protected variables' scope
    rules = images["rules"]
    assert {"if": "$CI_COMMIT_BRANCH != $CI_DEFAULT_BRANCH", "when": "never"} in rules
    assert not any("merge_request_event" in str(r.get("if")) and r.get("when") != "never" for r in rules)
    assert "FLEET_REGISTRY_TOKEN" not in json.dumps({k: v for k, v in ci.items() if k != "images"})


def _installs() -> list[str]:
    """Every pip install line of the workflows, the GitLab pipeline and the Makefile."""
    texts = [p.read_text(encoding="utf-8") for p in WORKFLOWS.glob("*.yml")]
    texts += [(ROOT / ".gitlab-ci.yml").read_text(encoding="utf-8"), (ROOT / "Makefile").read_text(encoding="utf-8")]
    return [line for text in texts for line in text.splitlines() if re.search(r"pip install", line)]


def test_every_pip_install_is_hash_locked():
    """Every install comes from the lock, except the project itself (`make`'s `--editable .`, for the `fleet`
    command), which must fetch nothing: no dependencies, and the lock's setuptools to build it."""
    lines = [line for line in _installs() if "pip-tools" not in line]  # `make lock`'s own tool
    assert lines
    for line in lines:
        if line.rstrip().endswith("--editable ."):
            assert "--no-deps" in line and "--no-build-isolation" in line, line
        elif "$LOCK" in line or "policy-base/" in line:  # a preview's pack: the base branch's hash-locked pack lock
            assert (
                '--require-hashes -r "$LOCK"' in line
                or "--require-hashes -r policy-base/policy/requirements.txt" in line
            )
        else:
            assert "--require-hashes -r requirements-dev.lock" in line, line


def _pins(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("-r "):
            out.update(_pins(path.parent / raw.split(None, 1)[1]))
        match = PIN.match(raw)
        if match:
            out[match.group(1).lower().replace("_", "-")] = match.group(2)
    return out


@pytest.mark.parametrize(("source", "lock"), [("requirements-dev.txt", LOCK), ("policy/requirements.in", PACK_LOCK)])
def test_locks_are_current_and_every_package_has_hashes(source: str, lock: Path):
    """A pin edited in a requirements file without `make lock` fails here (offline: no resolver run)."""
    wanted = _pins(ROOT / source)
    locked = _pins(lock)
    assert wanted, source
    stale = {name: (version, locked.get(name)) for name, version in wanted.items() if locked.get(name) != version}
    assert not stale, f"{lock.name} is stale (run make lock): {stale}"
    text = lock.read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n\n", 1)[1])
    for block in blocks:
        if PIN.match(block):
            assert "--hash=sha256:" in block, block.splitlines()[0]


# --- every image and CLI the pipelines fetch is pinned ------------------------------------------------------------

DIGEST_PINNED = re.compile(r"^[^\s@]+:[^\s@]+@sha256:[0-9a-f]{64}$")
EXACT_TAG = re.compile(r":v?\d+\.\d+\.\d+(?:-[a-z0-9.]+)?$")
ACTION_BY_SHA = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
INSTALLERS = sorted((ROOT / ".ci").glob("install-*"))

# What the pipelines fetch without a digest or checksum, each with its reason (docs/security.md, "Pinned images and
# CLIs"); everything else fails the tests below.
NOT_VERIFIED = {
    "pulumi/pulumi:3.272.0": "GitLab's Pulumi image: no digest of this tag found in an upstream or reputable source; "
    "its exact release tag",
    "pulumi CLI 3.272.0": "pulumi/actions downloads the CLI and checks no checksum, and no published checksum of "
    "3.272.0 was found; its exact version",
    "setup-python 3.11": "actions/setup-python takes the runner image's tool cache (or actions/python-versions) and "
    "checks no checksum; the project's packages are hash-locked on top of it",
    "apt-get install": "Debian's and Ubuntu's archives: apt checks every package against the archive's signed index",
    "gke-gcloud-auth-plugin": "a component of the pinned gcloud release, fetched by its component manager",
}


def _gitlab() -> dict[str, Any]:
    return yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text(encoding="utf-8"))


def _gitlab_images() -> dict[str, str]:
    """Every job's image (``$VARIABLE`` resolved from the pipeline's variables), by job."""
    ci = _gitlab()
    variables = ci.get("variables") or {}
    out = {}
    for name, job in ci.items():
        image = job.get("image") if isinstance(job, dict) else None
        if image is None:
            continue
        ref = image["name"] if isinstance(image, dict) else image
        out[name] = re.sub(r"^\$(\w+)$", lambda m: str(variables[m.group(1)]), ref)
    return out


def _shell_blocks() -> dict[str, str]:
    """Every shell text the pipelines run: GitHub steps' ``run``, GitLab jobs' scripts, and the .ci scripts."""
    out: dict[str, str] = {}
    for name, wf in all_workflows().items():
        for job_name, job in wf["jobs"].items():
            for i, step in enumerate(job.get("steps") or []):
                if "run" in step:
                    out[f"{name}:{job_name}:{step.get('name', i)}"] = step["run"]
    for name, job in _gitlab().items():
        if isinstance(job, dict):
            for key in ("before_script", "script", "after_script"):
                lines = job.get(key) or []
                out[f".gitlab-ci.yml:{name}:{key}"] = "\n".join(lines if isinstance(lines, list) else [lines])
    for path in (*INSTALLERS, ROOT / ".ci" / "run", ROOT / "Makefile"):
        out[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return out


def test_every_gitlab_image_is_pinned_by_digest_or_a_named_exception_by_its_exact_version():
    images = _gitlab_images()
    assert images
    for job, image in images.items():
        if not DIGEST_PINNED.match(image):
            assert image in NOT_VERIFIED, (job, image, "pin it as image:tag@sha256:<digest>")
            assert EXACT_TAG.search(image), (job, image, "at least an exact version tag")


def test_every_action_is_pinned_by_commit():
    for name, wf in all_workflows().items():
        for job_name, job in wf["jobs"].items():
            for step in job.get("steps") or []:
                uses = step.get("uses")
                if uses and not uses.startswith("./"):
                    assert ACTION_BY_SHA.match(uses), (name, job_name, uses)
                    assert not uses.startswith("docker://"), (name, job_name, uses)


def test_the_actions_that_install_tools_install_exact_versions():
    """pulumi/actions installs the CLI of ``pulumi-version`` (exactly that version, never a range or latest: it then
    matches the locked SDK); setup-python the job's Python. Both are named exceptions (no checksum)."""
    (job,) = workflow("pulumi-stack.yml")["jobs"].values()
    pulumi = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@"))
    version = str(pulumi["with"]["pulumi-version"])
    assert SEMVER.match(version) and f"pulumi CLI {version}" in NOT_VERIFIED
    assert f"pulumi=={version}" in LOCK.read_text(encoding="utf-8")  # the CLI of the SDK the program runs on
    for name, wf in all_workflows().items():
        for other in wf["jobs"].values():
            for step in other.get("steps") or []:
                if str(step.get("uses", "")).startswith("actions/setup-python@"):
                    assert f"setup-python {step['with']['python-version']}" in NOT_VERIFIED, name
                # setup-gcloud installs the latest gcloud unchecked: .ci/install-gcloud pins and verifies it
                assert "setup-gcloud" not in str(step.get("uses", "")), name


def test_nothing_is_downloaded_in_a_pipeline_but_by_a_checksum_verifying_installer():
    """A CLI fetched over the network comes through a .ci/install-* script that checks its SHA-256; no
    ``curl | sh``, no ``az aks install-cli`` (it fetches the newest kubectl and kubelogin unchecked). The GitLab
    jobs' curl calls to GitLab's own API (``$CI_API_V4_URL``) fetch no program."""
    fetch = re.compile(r"\b(curl|wget)\b[^\n]*https://")
    for where, script in _shell_blocks().items():
        text = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\|\s*(sudo\s+)?(ba)?sh\b", text), where
        assert "install-cli" not in text, where
        if fetch.search(text):
            assert where.startswith(".ci/install-"), (where, fetch.search(text).group(0))
    assert "bash .ci/install-kubelogin" in "\n".join(_shell_blocks().values())


@pytest.mark.parametrize("installer", INSTALLERS, ids=lambda p: p.name)
def test_each_installer_pins_a_version_and_checks_a_cited_sha256_before_running_anything(installer: Path):
    text = installer.read_text(encoding="utf-8")
    versions = re.findall(r'^[A-Z]+_VERSION="([^"]+)"$', text, re.MULTILINE)
    sums = re.findall(r'^[A-Z]+_SHA256="([0-9a-f]{64})"$', text, re.MULTILINE)
    assert len(versions) == 1 and SEMVER.match(versions[0]), installer.name
    assert len(sums) == 1, installer.name
    assert re.search(r"^# source: .+", text, re.MULTILINE), f"{installer.name}: cite where the checksum comes from"
    check = text.index("sha256sum --check --strict")
    assert text.index("curl ") < check < min(text.index(w) for w in ("tar -x", "zipfile -e") if w in text)


def test_the_docs_allow_no_instance_wide_gpu_runner():
    text = (ROOT / "docs" / "runners.md").read_text(encoding="utf-8")
    assert "project, group or instance runner" not in text
    assert "never an\ninstance runner" in text or "never an instance runner" in text
