"""Ctrl-C ends any command with exit status 130 and one line, wherever it lands: in the model, in Pulumi's engine
(whose registrations run on worker threads), in a gRPC call to the policy pack, or in an HTTP request.

The first SIGINT raises ``KeyboardInterrupt`` in the main thread as usual, so ``finally`` blocks clean up (the policy
pack is stopped, a half-rendered folder is put back); the command line then prints one line and leaves at once with
``os._exit``, without waiting for the engine's worker threads. A second SIGINT during that clean-up leaves at once.

Python runs a signal handler wherever the main thread is, also inside a weakref callback or a ``__del__`` run by the
garbage collector, where an exception is printed as "Exception ignored in ..." and dropped: a Ctrl-C landing there
was lost and the command went on to exit 0 (``render``, about one run in six). Such a lost interrupt is raised again
at the main thread's next instruction (``sys.unraisablehook``), and a command that returns although it was
interrupted still ends as interrupted (:func:`interrupted`).

Tests need to interrupt a command at a known point without racing it: with ``GPU_FLEET_PAUSE_AT=<point>`` in the
environment, the process prints ``gpu-fleet: paused at <point>`` on stderr when it reaches the point, waits there
for the signal, then goes on (``command``: the subcommand is about to start; ``engine``: the mock engine registers
the first resource of a stack, with Pulumi's threads running).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import socket
import sys
import threading
from types import FrameType

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command ended by Ctrl-C
PAUSE_ENV = "GPU_FLEET_PAUSE_AT"
PAUSE_SECONDS = 120.0  # a test that never sends the signal fails on its own timeout long before this

_interrupted = threading.Event()
_wakeup: tuple[socket.socket, socket.socket] | None = None  # with GPU_FLEET_PAUSE_AT: signal.set_wakeup_fd's pair


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _interrupted.is_set():  # the second Ctrl-C: the clean-up of the first one takes too long
        leave("interrupted again")
    _interrupted.set()
    raise KeyboardInterrupt


def _raise_lost_interrupt_again(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: our ``KeyboardInterrupt``, dropped where exceptions cannot propagate (a weakref
    callback, a ``__del__``), is raised again in the code the garbage collector interrupted, at its next line
    (through that frame's trace function, as a debugger stops a program); anything else is reported as before."""
    if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _interrupted.is_set()):
        sys.__unraisablehook__(unraisable)
        return
    try:
        frame = sys._getframe(1)  # the code that was running when the collector called the callback
    except ValueError:  # none: the command line sees the interrupt when the command returns (interrupted())
        return

    def stop(frame: FrameType, event: str, arg: object) -> None:
        sys.settrace(None)
        frame.f_trace = None
        raise KeyboardInterrupt

    frame.f_trace = stop
    frame.f_trace_lines = True
    sys.settrace(lambda *args: None)  # tracing on in this thread, so the frame's own trace function is called


def finished(status: int) -> None:
    """The command's work is done and said, with exit ``status``: a Ctrl-C from now on ends the process at once with
    that status, and once Python has joined the threads, while it tears the rest down, is ignored.

    Python waits for the engine's idle worker threads, then takes seconds to free a large plan; from the moment it
    restores SIGINT's default there, a Ctrl-C killed the process without a line (2 of 11 renders interrupted near
    their end). The work and its exit status stand; an ignored SIGINT stays ignored through the teardown."""

    def leave_with_the_status(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)

    signal.signal(signal.SIGINT, leave_with_the_status)
    atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)  # after the threads' join, before the teardown


def interrupted() -> bool:
    """Whether a Ctrl-C came (and, when the command returned anyway, was swallowed on the way)."""
    return _interrupted.is_set()


def _block_sigint_in_this_thread(frame: FrameType, event: str, arg: object) -> None:
    """Run once in each new thread (as its profile hook, then removed): SIGINT is for the main thread only."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    sys.setprofile(None)


def install() -> None:
    """Handle SIGINT as described above (only the main thread can install a handler; elsewhere nothing changes).

    Threads started afterwards block SIGINT: the kernel hands a process's signal to any thread that does not block
    it, and when a worker thread of Pulumi's engine got it, the main thread, asleep in the engine's event loop, did
    not wake up to raise ``KeyboardInterrupt`` until something else woke it (seen in about half of the runs)."""
    global _wakeup
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _raise_lost_interrupt_again
        threading.setprofile(_block_sigint_in_this_thread)
        if os.environ.get(PAUSE_ENV):
            # the C-level handler writes each signal here at once, whichever thread runs Python then
            _wakeup = socket.socketpair()
            for end in _wakeup:
                end.setblocking(False)
            signal.set_wakeup_fd(_wakeup[1].fileno(), warn_on_full_buffer=False)


def leave(what: str) -> None:
    """Print ``what`` as the one line, flush, and end the process with 130 without waiting for other threads."""
    try:
        print(f"{what}: stopped by Ctrl-C (exit {EXIT_INTERRUPTED})", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


def pause_for_tests(point: str) -> None:
    """Wait at ``point`` for SIGINT when a test asked for it (``GPU_FLEET_PAUSE_AT``); nothing otherwise."""
    if os.environ.get(PAUSE_ENV) != point:
        return
    print(f"gpu-fleet: paused at {point}", file=sys.stderr, flush=True)
    # Until the signal came, then on: Pulumi's engine finishes the calls under way before it lets the interrupt go
    # up (pulumi/runtime/stack.py run_pulumi_func waits for the outstanding RPCs), as after a real Ctrl-C. The wait
    # ends on the signal itself (the wakeup socket), not on the Python handler: a signal that lands just before the
    # main thread goes to sleep in the engine's event loop runs its handler only when the loop wakes up again.
    if _wakeup is None:
        _interrupted.wait(PAUSE_SECONDS)
    else:
        select.select([_wakeup[0]], [], [], PAUSE_SECONDS)
