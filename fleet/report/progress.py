"""The report's progress line on stderr, one step per query."""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class Progress:
    """``report: [n/total] what`` on stderr for every query: one updated line on a terminal, lines otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._width = 0
        self._lock = threading.Lock()  # the report's queries run on several threads
        self._finished = False

    def step(self, what: str) -> None:
        """Announce the next query."""
        with self._lock:
            if self._finished:  # a query begun as the report ended (a failure, a Ctrl-C): nothing more is said
                return
            self.done += 1
            line = f"report: [{self.done}/{self.total}] {what}"
            if self.tty:
                self.stream.write("\r" + line.ljust(self._width))
                self._width = max(self._width, len(line))
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def finish(self) -> None:
        """End the progress line on a terminal; later steps are not shown."""
        with self._lock:
            self._finished = True
            if self.tty and self.done:
                self.stream.write("\n")
                self.stream.flush()
