"""Problems found in user input, reported as ``FILE:LINE: key.path: what is wrong``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with an input file, located by file, line and key path."""

    file: str
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}: {where}{self.message}"


class InputError(Exception):
    """Raised with every problem found in one or more input files, never just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


def format_path(path: tuple[object, ...]) -> str:
    """Dotted key path as users write it: ``clusters.gcp.gke-a.gpus[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def did_you_mean(word: object, choices: Iterable[object], prefix: str = "") -> str:
    """`` (did you mean 'config'?)`` when ``word`` is a near miss of one of ``choices``, else empty."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""
