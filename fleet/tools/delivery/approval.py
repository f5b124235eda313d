"""The approval gate of pull-request previews (.github/workflows/preview.yml): a preview of a stack without a preview
identity (the central, the queues' manager, Magnum, any stack without ``gpu-fleet:previewPrincipal``) runs only
once a maintainer approved the exact commit it would run.

GitHub facts (REST "List reviews for a pull request"): each review has ``state`` (``APPROVED``...), ``commit_id`` (the
head it was given on) and ``author_association`` (``OWNER``, ``MEMBER``, ``COLLABORATOR``, ``CONTRIBUTOR``, ``NONE``
...); a new push makes the head another commit, so an earlier approval no longer counts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

MAINTAINERS = ("OWNER", "MEMBER", "COLLABORATOR")


def approved_by(reviews: Iterable[Mapping[str, Any]], head: str, author: str) -> str | None:
    """The login of a maintainer other than the author who approved ``head`` and has not since asked for changes on
    it, or None."""
    latest: dict[str, Mapping[str, Any]] = {}
    for review in reviews:  # in the order GitHub gives them: oldest first
        login = str((review.get("user") or {}).get("login", ""))
        if review.get("state") in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[login] = review
    for login, review in latest.items():
        if (
            review.get("state") == "APPROVED"
            and review.get("commit_id") == head
            and review.get("author_association") in MAINTAINERS
            and login.lower() != author.lower()
        ):
            return login
    return None


def main(argv: list[str]) -> int:
    """``python -m fleet.tools.delivery.approval HEAD AUTHOR < reviews.json``: exit 0 when approved, else 1."""
    head, author = argv
    login = approved_by(json.load(sys.stdin), head, author)
    if login is None:
        print(
            f"no maintainer (other than {author}) has approved commit {head}: a maintainer reviews the change, "
            "approves it, and re-runs this workflow (or adds a label)",
            file=sys.stderr,
        )
        return 1
    print(f"approved by {login} on {head}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
