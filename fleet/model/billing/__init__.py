"""Billing and accounting: the accounts card-hours go to, the accounting rules that count them, and prices."""
