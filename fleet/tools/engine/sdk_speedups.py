"""Faster, behaviour-identical stand-ins for three hot spots of Pulumi's Python SDK, used while the plan runs.

A plan runs the real program under the mock engine, so most of its time is spent in the SDK. Two pieces of that
time are pure recomputation that the SDK does not cache, and one is work for an engine older than ours:

- **Type introspection.** Serialising every input and translating every output asks ``pulumi._types`` the same
  questions about the same annotation objects again and again (``unwrap_type``, ``unwrap_optional_type``,
  ``_is_union_type``, ``_is_optional_type``: is this ``Optional[Input[T]]``, what is ``T``?). The answers depend
  only on the annotation, so :func:`_memo_by_identity` remembers them per annotation object. The SDK itself
  caches its other per-class answers with ``functools.cache``; identity is used here because hashing a
  ``Union`` rebuilds a frozenset of its arguments on every call.
- **Stack-trace capture.** Every resource registration captures the program's call stack for the engine's
  diagnostics with ``traceback.extract_stack()``, which reads the source line of every frame through
  ``linecache`` (a ``stat`` per file per resource) and builds a ``file://`` URI with ``pathlib`` per frame.
  :func:`stack_trace` builds the very same ``StackTrace`` message from the frames directly, with each frame's
  message made once per (file, line).
- **Alias URNs nobody reads.** ``Resource.__init__`` turns every alias of every resource into a URN Output
  (``collapse_alias_to_urn``: an Output, a task and a ``create_urn`` each) and keeps them in ``Resource._aliases``,
  which the SDK reads in one place only: ``all_aliases``, the path for an engine without alias specs, where the
  SDK computes its children's inherited aliases itself. An engine with alias specs receives the aliases as declared
  and derives the URNs, children's included, itself. The Pulumi CLI the fleet pins answers ``aliasSpecs`` true
  (pulumi/pulumi pkg/v3 v3.274.0, ``pkg/resource/deploy/source_eval.go``, ``resmon.supportsFeatureID``: ``case
  "aliasSpecs": return true``), and so does the mock engine (``RecordingMonitor``, as the CLI). This matters on
  AKS: ``pulumi_azure_native`` 3.29.0 declares an alias per past API version on its classes (113 on
  ``ManagedCluster``, 110 on ``AgentPool``). :func:`alias_urn_when_read` keeps the alias as declared where the
  monitor takes alias specs, and defers to the SDK otherwise.

:func:`faster_sdk` installs all three for the duration of a ``with`` block and restores the originals afterwards.
``tests/tools/test_plan_speedups.py`` checks that every stand-in answers exactly as the SDK function it replaces (so an
SDK upgrade that changes them fails there), and the plan of every shipped stack is the same with and without.
"""

from __future__ import annotations

import contextlib
import functools
import pathlib
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

from pulumi import _types
from pulumi import resource as sdk_resource
from pulumi.runtime import resource as runtime_resource
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2, source_pb2

F = TypeVar("F", bound=Callable[[Any], Any])
_SDK_STACK_TRACE = runtime_resource._get_stack_trace
_SDK_COLLAPSE_ALIAS = sdk_resource.collapse_alias_to_urn

MEMOIZED_TYPE_FUNCTIONS = ("unwrap_type", "unwrap_optional_type", "_is_union_type", "_is_optional_type")


def _memo_by_identity(function: F) -> F:
    """``function`` (one argument, pure) remembering its answer per argument object.

    The cache keeps each argument alive, so an ``id`` can never be reused for another object while it is cached;
    the arguments are type annotations, which live as long as the classes that hold them anyway.
    """
    cache: dict[int, tuple[Any, Any]] = {}

    @functools.wraps(function)
    def memoized(argument: Any) -> Any:
        hit = cache.get(id(argument))
        if hit is not None and hit[0] is argument:
            return hit[1]
        answer = function(argument)
        cache[id(argument)] = (argument, answer)
        return answer

    return memoized  # type: ignore[return-value]


@functools.cache
def _stack_frame(filename: str, lineno: int | None) -> source_pb2.StackFrame:
    """The engine's message for one frame: its source position, or none when the frame has no usable file."""
    if filename == "" or lineno is None:
        return source_pb2.StackFrame(pc=None)
    try:
        uri = pathlib.Path(filename).as_uri()
    except ValueError:  # a relative path (``<string>``, ``<frozen runpy>``) has no file URI
        return source_pb2.StackFrame(pc=None)
    return source_pb2.StackFrame(pc=source_pb2.SourcePosition(uri=uri, line=lineno))


def stack_trace() -> source_pb2.StackTrace:
    """The ``StackTrace`` that ``pulumi.runtime.resource._get_stack_trace`` sends with a registration.

    Like the SDK: walk up from the caller to the third ``__init__`` (``Resource``, then ``CustomResource`` or
    ``ComponentResource``, then the concrete resource class), and return every frame above it, innermost first;
    an empty trace when there is no frame above a third ``__init__``. Under ``sys.tracebacklimit`` (which
    trims ``extract_stack``) it defers to the SDK's own function.
    """
    if getattr(sys, "tracebacklimit", None) is not None:
        return _SDK_STACK_TRACE()
    current: FrameType | None = sys._getframe(1)
    seen = 0
    while current is not None:
        if current.f_code.co_name == "__init__":
            seen += 1
            if seen == 3:
                break
        current = current.f_back
    if current is None or current.f_back is None:
        return source_pb2.StackTrace()
    frames = []
    current = current.f_back
    while current is not None:
        frames.append(_stack_frame(current.f_code.co_filename, current.f_lineno))
        current = current.f_back
    return source_pb2.StackTrace(frames=frames)


def alias_urn_when_read(alias: Any, name: str, type_: str, parent: Any) -> Any:
    """What ``Resource.__init__`` keeps in ``Resource._aliases`` for one alias: the SDK's URN Output
    (``collapse_alias_to_urn``) where the monitor takes no alias specs (``all_aliases`` then reads it), else the
    alias as declared, unread (the engine derives every alias URN from the specs it receives)."""
    if settings.monitor_supports_feature(resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS):
        return alias
    return _SDK_COLLAPSE_ALIAS(alias, name, type_, parent)


@contextlib.contextmanager
def faster_sdk() -> Iterator[None]:
    """Install the stand-ins above in the SDK for the duration of the block (nesting is harmless)."""
    originals: list[tuple[Any, str, Any]] = [(_types, name, getattr(_types, name)) for name in MEMOIZED_TYPE_FUNCTIONS]
    originals.append((runtime_resource, "_get_stack_trace", runtime_resource._get_stack_trace))
    originals.append((sdk_resource, "collapse_alias_to_urn", sdk_resource.collapse_alias_to_urn))
    try:
        for name in MEMOIZED_TYPE_FUNCTIONS:
            setattr(_types, name, _memo_by_identity(getattr(_types, name)))
        runtime_resource._get_stack_trace = stack_trace
        sdk_resource.collapse_alias_to_urn = alias_urn_when_read  # type: ignore[assignment]
        yield
    finally:
        for module, name, original in reversed(originals):
            setattr(module, name, original)
