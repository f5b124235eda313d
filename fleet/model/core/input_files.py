"""Reading an input file with a bound: only a regular file, and at most a given number of bytes.

Every file a user hands the fleet (the policy, stack files, workload folders, a kubeconfig, an old policy) is read
here, so ``/dev/zero``, a named pipe or a multi-gigabyte file is refused at once with a located error instead of
filling the memory or blocking for ever.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fleet.model.core.errors import InputError, Problem

# An input file larger than this is refused: the shipped policy is a few KiB, a stack file less. A ConfigMap (a
# workload's files/) holds 1 MiB at most (kubernetes/kubernetes pkg/apis/core/validation: MaxSecretSize, the same
# limit for ConfigMaps, 1 MiB).
MAX_INPUT_BYTES = 1024 * 1024
# A sample log the mtail programs are checked on may be longer than a configuration file.
MAX_LOG_BYTES = 16 * 1024 * 1024


def shown_path(path: Path | str) -> str:
    """The path as messages show it: relative to the working directory when under it, else as given."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def read_input_bytes(path: Path | str, limit: int = MAX_INPUT_BYTES, what: str = "file") -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; an ``InputError`` located at the file when it
    is missing, unreadable, not a regular file (a device, a pipe, a folder) or larger than ``limit``."""
    shown = shown_path(path)
    named = "file" if what == "file" else f"the {what}"

    def refuse(message: str) -> InputError:
        return InputError([Problem(shown, 1, "", message)])

    try:
        info = os.stat(path)
    except OSError as exc:
        raise refuse(f"cannot read {named}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise refuse(f"is a folder, not a {what}: give the file's path")
    if not stat.S_ISREG(info.st_mode):
        raise refuse(f"is not a regular file (a device, pipe or socket): give the {what}'s path")
    if info.st_size > limit:
        raise refuse(f"the {what} is {info.st_size:,} bytes, more than the {_size(limit)} an input may have")
    try:
        # O_NONBLOCK: a file replaced by a pipe after the check above still cannot block the read
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise refuse(f"cannot read {named}: {exc.strerror}") from None
    if len(data) > limit:
        raise refuse(f"the {what} is more than the {_size(limit)} an input may have")
    return data


def decode_text(data: bytes, shown: str) -> str:
    """``data`` as UTF-8 text; an ``InputError`` naming the line and byte of the first invalid byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            [Problem(shown, line, "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}")]
        ) from None


def read_input_text(path: Path | str, limit: int = MAX_INPUT_BYTES, what: str = "file") -> str:
    """``read_input_bytes`` decoded as UTF-8 (an ``InputError`` naming the line of an invalid byte)."""
    return decode_text(read_input_bytes(path, limit, what), shown_path(path))
