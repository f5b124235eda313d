"""Problems found in user input, reported as ``FILE:LINE: key.path: what is wrong``."""

from __future__ import annotations

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
