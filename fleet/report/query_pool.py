"""The report's requests sent a few at a time: each query of a long window costs the central reads that one request
keeps on one core (it reads its series and evaluates one step), so queries sent side by side use the central's
other cores and overlap the report's own waiting and JSON parsing with the central's work.

The threads are daemon threads: a Ctrl-C, a failed query or the end of the command never waits for a request still
under way (each is bounded anyway by the client's timeout and deadline, fleet/report/prometheus_api.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

#: Requests in flight at a time unless the command line says otherwise. Prometheus runs up to 20 queries at once
#: (``--query.max-concurrency``), but each long-window query holds its series in the central's memory while it runs:
#: the 180-day report at 200 leaves (docs/performance.md, run P) took 48.6 s one at a time, 39.1 s two at a time and
#: 38.8 s four at a time on the 2-core machine, the central resident after it at 2.1, 2.3 and 4.7 GiB.
DEFAULT_CONCURRENCY = 2
MAX_CONCURRENCY = 16


class QueryPool:
    """Runs submitted calls on ``workers`` daemon threads, in the order submitted; a call's outcome is its
    :class:`concurrent.futures.Future`. :meth:`close` (or leaving the ``with`` block) cancels the calls not yet
    begun and lets the threads go without waiting for those under way."""

    def __init__(self, workers: int):
        if not 1 <= workers <= MAX_CONCURRENCY:
            raise ValueError(f"workers must be from 1 to {MAX_CONCURRENCY} (got {workers})")
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._pending: list[Future[Any]] = []
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"report-query-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``call(*args)``; its future holds what it returns or raises."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        future: Future[T] = Future()
        self._pending.append(future)
        self._queue.put((future, call, args))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, call, args = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled by close() before it began
            try:
                future.set_result(call(*args))
            except BaseException as exc:  # handed to whoever reads the future
                future.set_exception(exc)

    def close(self) -> None:
        """Cancel what has not begun and stop the threads once their current call ends (not waited for)."""
        if self._closed:
            return
        self._closed = True
        for future in self._pending:
            future.cancel()
        for _ in self._threads:
            self._queue.put(None)

    def __enter__(self) -> QueryPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
