"""``affected``: the stacks a change touches, central last (what CI previews and deploys)."""

from __future__ import annotations

import argparse
import sys

from fleet.model.core.input_files import read_input_text
from fleet.tools.commands import EXIT_BAD_INPUT, EXIT_OK


def cmd_affected(args: argparse.Namespace) -> int:
    """Print the stacks a change touches, non-central first and central last (fleet/tools/delivery/affected/)."""
    from fleet.tools.delivery import affected as sel

    try:
        if args.all:
            selection = sel.select_all(sel.load_policy_file(args.policy, args.workloads_dir))
        elif args.files is not None:
            old_text = None
            if args.old_policy is not None:
                old_text = read_input_text(args.old_policy, what="old policy")
            new = sel.load_policy_file(args.policy, args.workloads_dir)
            selection = sel.compare(
                args.files, new, old_text, label=str(args.old_policy), old_workloads_dir=args.workloads_dir
            )
        else:
            selection = sel.select_from_git(
                args.base, args.head, repo=args.repo, policy_file=args.policy, workloads_dir=args.workloads_dir
            )
    except sel.GitError as exc:
        print(f"affected: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(sel.render(selection, args.format))
    if args.format != "json":
        sys.stderr.write(sel.explain(selection))
    return EXIT_OK
