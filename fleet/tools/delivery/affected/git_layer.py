"""The git layer under the selection: changed paths, a file or folder at a commit, the merge base."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

from fleet.model.core.workloads import WORKLOADS_DIR
from fleet.model.loader import POLICY_FILE, ROOT
from fleet.tools.delivery.affected.selection import (
    COMMIT_ID,
    POLICY_PATH,
    ZERO_SHA,
    Selection,
    compare,
    load_policy_file,
    load_policy_text,
    select_all,
)

# --- the git layer ---------------------------------------------------------------------------------------------


class GitError(Exception):
    """A git command failed; the message names the command and git's own words."""


def _run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GitError(f"cannot run git {' '.join(args)}: {exc.strerror or exc}") from None


def git(repo: Path, *args: str) -> str:
    """Run ``git -C repo args`` and return its stdout (``GitError`` on failure)."""
    proc = _run_git(repo, *args)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {proc.stderr.strip() or f'exit status {proc.returncode}'}")
    return proc.stdout


def merge_base(repo: Path, base: str, head: str | None, *, labels: tuple[str, str] | None = None) -> str:
    """The merge base of commits ``base`` and ``head`` (default: ``HEAD``).

    ``GitError`` when git finds none, naming the refs (``labels``, as the user gave them) and saying how to get
    the history it needs: a shallow clone lacks the common ancestor, unrelated histories have none.
    """
    proc = _run_git(repo, "merge-base", base, head or "HEAD")
    found = proc.stdout.strip()
    if proc.returncode == 0 and found:
        return found
    base_label, head_label = labels or (base, head or "HEAD")
    if is_shallow(repo):
        why = "this clone is shallow and lacks their common ancestor"
    elif proc.returncode == 1:
        why = "their histories are unrelated, or this clone lacks their common ancestor"
    else:
        why = proc.stderr.strip().replace("\n", " ") or f"git merge-base exit status {proc.returncode}"
    raise GitError(
        f"no merge base of {base_label} and {head_label} in {repo}: {why}; fetch the whole history "
        "(git fetch --unshallow; fetch-depth: 0 in actions/checkout, GIT_DEPTH: 0 in GitLab CI) and try again"
    )


def is_shallow(repo: Path) -> bool:
    """Whether ``repo`` is a shallow clone (``git clone --depth``: part of the history only)."""
    return git(repo, "rev-parse", "--is-shallow-repository").strip() == "true"


def resolve(repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or ``None`` (all-zero SHA of a new branch, or not in this clone)."""
    if not ref or ref == ZERO_SHA:
        return None
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip() or None
    except GitError:
        return None


def changed_files(repo: Path, base: str, head: str | None = None) -> list[str]:
    """Paths changed from ``base`` to ``head`` (a commit), or to the working tree incl. untracked files."""
    args = ["diff", "--name-only", "--no-renames", base] + ([head] if head else [])
    paths = git(repo, *args).splitlines()
    if head is None:
        paths += git(repo, "ls-files", "--others", "--exclude-standard").splitlines()
    return sorted({p for p in paths if p})


def file_at(repo: Path, ref: str, path: str) -> str | None:
    """The text of ``path`` at ``ref`` (``git show REF:path``), or ``None`` if it does not exist there."""
    try:
        return git(repo, "show", f"{ref}:{path}")
    except GitError:
        return None


def extract_folder(repo: Path, ref: str, folder: str, dest: Path) -> Path:
    """Write ``folder`` as it was at ``ref`` under ``dest`` (``git archive``); returns ``dest/folder``."""
    target = dest / folder
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", ref, "--", folder], capture_output=True, check=False
    )
    if proc.returncode == 0:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            tar.extractall(dest, filter="data")
    return target


def select_from_git(
    base: str,
    head: str | None = None,
    *,
    repo: Path = ROOT,
    policy_file: Path = POLICY_FILE,
    workloads_dir: Path = WORKLOADS_DIR,
) -> Selection:
    """The stacks changed between ``base`` and ``head`` (default: the working tree).

    The comparison starts at the merge base of the two, so a pull request is judged by its own changes only.
    A commit id this clone does not have (a new branch's all-zero SHA, a shallow clone) selects every stack, a
    name that is no commit id and no ref of the clone is a ``GitError``; a base
    it has but without a merge base (a shallow clone, unrelated histories) is a ``GitError``: diffing against
    the base's tip instead would count the base branch's own changes as the change's.
    """
    git(repo, "rev-parse", "--git-dir")  # a clear error outside a git repository
    head_commit = resolve(repo, head) if head else None
    if head and head_commit is None:
        raise GitError(
            f"--head {head}: no branch, tag or commit of that name in {repo}; give one git knows, such as HEAD, "
            "a branch or a commit id (git branch -a, git log --oneline), or leave --head out for the working tree"
        )
    if head_commit:
        text = file_at(repo, head_commit, POLICY_PATH)
        if text is None:
            raise GitError(f"{POLICY_PATH} does not exist at {head}")
        with tempfile.TemporaryDirectory(prefix="gpu-fleet-head-") as tmp:
            wl = extract_folder(repo, head_commit, "workloads", Path(tmp))
            new = load_policy_text(text, f"{POLICY_PATH}@{head}", wl)
    else:
        new = load_policy_file(policy_file, workloads_dir)
    base_commit = resolve(repo, base)
    shallow = is_shallow(repo)
    if base_commit is None and not COMMIT_ID.match(base):
        if shallow:
            raise GitError(
                f"--base {base}: no branch, tag or commit of that name in {repo}, which is a shallow clone (git "
                f"clone --depth) holding little history: fetch it, such as git fetch --unshallow origin {base} "
                "(fetch-depth: 0 in actions/checkout, GIT_DEPTH: 0 in GitLab CI), and try again"
            )
        raise GitError(
            f"--base {base}: no branch, tag or commit of that name in {repo}; give one git knows, such as main, "
            "origin/main or a commit id (git branch -a, git tag, git log --oneline)"
        )
    if base_commit is None:
        why = f"base {base!r} is not in this clone" + (" (a shallow clone: git fetch --unshallow)" if shallow else "")
        return _with_note(select_all(new, why), f"every stack: no commit {base!r}")
    start = merge_base(repo, base_commit, head_commit, labels=(base, head or "HEAD"))
    changed = changed_files(repo, start, head_commit)
    with tempfile.TemporaryDirectory(prefix="gpu-fleet-base-") as tmp:
        old_wl = extract_folder(repo, start, "workloads", Path(tmp))
        old_text = file_at(repo, start, POLICY_PATH)
        return compare(changed, new, old_text, label=f"{POLICY_PATH}@{base}", old_workloads_dir=old_wl)


def _with_note(selection: Selection, note: str) -> Selection:
    return Selection(selection.stacks, selection.removed, (*selection.notes, note))
