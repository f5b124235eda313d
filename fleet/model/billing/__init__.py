"""Billing and accounting: the accounts card-hours go to, the accounting rules that count them, and prices."""

# benchmarks/ read ``account_of`` here, by the module's old name, until their split (issue 47) moves them to
# fleet.model.billing.accounts; no other module does (tests/test_layout.py)
from fleet.model.billing.accounts import account_of

__all__ = ["account_of"]
