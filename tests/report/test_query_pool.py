"""The pool that sends the report's queries a few at a time (fleet/report/query_pool.py): never more calls under way
than it has workers, every outcome handed back by its future, and closing it cancels what has not begun."""

from __future__ import annotations

import threading

import pytest

from fleet.report.query_pool import DEFAULT_CONCURRENCY, MAX_CONCURRENCY, QueryPool
from fleet.tools.cli import build_parser

PATIENCE_S = 120  # only a hang reaches it


class Gate:
    """Calls that announce they began and wait to be let through; counts how many were under way at most."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.running = 0
        self.began = 0
        self.most = 0
        self.open = threading.Event()

    def call(self, value: int) -> int:
        with self.condition:
            self.running += 1
            self.began += 1
            self.most = max(self.most, self.running)
            self.condition.notify_all()
        assert self.open.wait(PATIENCE_S)
        with self.condition:
            self.running -= 1
        return value * 10

    def wait_began(self, count: int) -> None:
        with self.condition:
            assert self.condition.wait_for(lambda: self.began >= count, PATIENCE_S)


def test_no_more_calls_run_at_once_than_the_pool_has_workers() -> None:
    gate = Gate()
    with QueryPool(3) as pool:
        futures = [pool.submit(gate.call, i) for i in range(7)]
        gate.wait_began(3)
        with gate.condition:
            assert gate.began == 3  # the other four wait for a worker: three threads, each in a call
        gate.open.set()
        assert [f.result(PATIENCE_S) for f in futures] == [i * 10 for i in range(7)]
    assert gate.most == 3 and gate.began == 7


def test_an_exception_comes_back_through_its_future_and_the_others_still_run() -> None:
    def fail() -> None:
        raise ValueError("refused")

    with QueryPool(2) as pool:
        failed, fine = pool.submit(fail), pool.submit(lambda: "answer")
        with pytest.raises(ValueError, match="refused"):
            failed.result(PATIENCE_S)
        assert fine.result(PATIENCE_S) == "answer"


def test_closing_cancels_the_calls_not_begun_and_does_not_wait_for_those_under_way() -> None:
    gate = Gate()
    pool = QueryPool(1)
    under_way = pool.submit(gate.call, 1)
    waiting = pool.submit(gate.call, 2)
    gate.wait_began(1)
    pool.close()  # returns although a call is still under way
    assert waiting.cancelled() and not under_way.done()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(gate.call, 3)
    gate.open.set()
    assert under_way.result(PATIENCE_S) == 10
    assert gate.began == 1


@pytest.mark.parametrize("workers", [0, MAX_CONCURRENCY + 1])
def test_a_pool_needs_from_one_to_the_most_workers(workers: int) -> None:
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CONCURRENCY}"):
        QueryPool(workers)


def test_the_command_lines_default_is_the_pools() -> None:
    args = build_parser().parse_args(["report", "--prometheus", "http://p:9090", "--out", "out"])
    assert args.concurrency == DEFAULT_CONCURRENCY
