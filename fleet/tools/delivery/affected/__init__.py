"""Which stacks a change touches: the selection both CI systems use for previews, deploys and drift checks.

The core (``select_stacks``) is pure: it takes the changed paths and the old and new policy, each loaded with
the same ``load_fleet`` the program uses, and answers with the stacks to preview or deploy (non-central first,
the central one last, because it reads the others' outputs), why each one, the clusters that left the policy
(reported for a human to destroy, never planned) and notes. The git layer under it is thin: ``git diff
--name-only`` for the changed paths, ``git show REF:policy/fleet.yaml`` for the old policy, ``git archive`` for
the workload folders the old policy was written against.

When in doubt the selection errs towards more stacks: a preview too many costs minutes, a stack missed leaves
a merged change undeployed.

The package: ``selection.py`` (the pure core), ``git_layer.py`` (git under it), ``formats.py`` (what it writes).
"""

from fleet.tools.delivery.affected.formats import FORMATS, GITLAB_ACTIONS, explain, render
from fleet.tools.delivery.affected.git_layer import (
    GitError,
    changed_files,
    extract_folder,
    file_at,
    merge_base,
    select_from_git,
)
from fleet.tools.delivery.affected.selection import (
    ZERO_SHA,
    LoadedPolicy,
    Selection,
    StackEntry,
    affected,
    classify,
    compare,
    deployed_files,
    load_policy_file,
    load_policy_text,
    select_all,
    select_stacks,
)

__all__ = [
    "FORMATS", "GITLAB_ACTIONS", "ZERO_SHA", "GitError", "LoadedPolicy", "Selection", "StackEntry", "affected",
    "changed_files", "classify", "compare", "deployed_files", "explain", "extract_folder", "file_at",
    "load_policy_file", "load_policy_text", "merge_base", "render", "select_all", "select_from_git", "select_stacks",
]  # fmt: skip
