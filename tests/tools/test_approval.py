"""fleet/tools/delivery/approval.py: a gated preview runs only on a maintainer's approval of its exact commit."""

from __future__ import annotations

import pytest

from fleet.tools.delivery.approval import approved_by


def _review(login: str, state: str = "APPROVED", commit: str = "head", association: str = "MEMBER") -> dict:
    return {"user": {"login": login}, "state": state, "commit_id": commit, "author_association": association}


@pytest.mark.parametrize(
    ("reviews", "approver"),
    [
        ([_review("maint")], "maint"),
        ([_review("maint", association="OWNER")], "maint"),
        ([_review("maint", commit="older")], None),  # pushed since: the approval was of another commit
        ([_review("stranger", association="CONTRIBUTOR")], None),
        ([_review("stranger", association="NONE")], None),
        ([_review("Author")], None),  # the author approves nothing of their own
        ([_review("maint"), _review("maint", state="CHANGES_REQUESTED")], None),
        ([_review("maint", state="CHANGES_REQUESTED"), _review("maint")], "maint"),
        ([_review("maint", state="COMMENTED")], None),
        ([], None),
    ],
)
def test_only_a_maintainers_approval_of_the_head_counts(reviews, approver):
    assert approved_by(reviews, "head", "author") == approver
