"""The API server's answers read with bounds: at most ``MAX_BODY`` bytes each, and whole within a deadline, so a
server (or something in its place) that sends an endless or huge body cannot hang the doctor or fill its memory.

The official client reads every answer whole with ``preload_content=False`` then ``response.data``
(kubernetes-client/python v37 ``kubernetes/client/rest.py``, ``RESTClientObject.request`` and ``RESTResponse.read``);
its only timeout is urllib3's, per socket read, which a body that keeps coming never trips. The pool manager's
``request`` is wrapped here to read the body itself, in chunks, and hand the client the bytes (urllib3 2.x
``HTTPResponse.data`` returns ``_body`` once it is set).
"""

from __future__ import annotations

import time
from typing import Any

import urllib3
from kubernetes.client import ApiClient

# A list of 5,000 nodes or pods with their status is a few tens of MiB; a larger answer is not the API server's.
MAX_BODY = 64 << 20
CHUNK = 1 << 16


class AnswerError(urllib3.exceptions.HTTPError):
    """An answer the doctor stopped reading: too large, or not finished in time; ``str`` says which."""


def read_bounded(response: Any, limit: int, deadline_s: float, clock: Any = time.monotonic) -> bytes:
    """The body of an unread urllib3 response, refused past ``limit`` bytes or ``deadline_s`` seconds."""
    start = clock()
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in response.stream(CHUNK, decode_content=True):
            total += len(chunk)
            if total > limit:
                raise AnswerError(f"sent more than {limit:,} bytes in one answer (an API server's list is smaller)")
            if clock() - start > deadline_s:
                raise AnswerError(f"did not finish its answer within {deadline_s:g} s (the body kept coming)")
            chunks.append(chunk)
    except AnswerError:
        response.close()  # not back to the pool: the rest of the body is unread
        raise
    return b"".join(chunks)


def bound_answers(api: ApiClient, deadline_s: float, limit: int = MAX_BODY) -> ApiClient:
    """``api``, its every answer read with ``read_bounded`` (``deadline_s`` for a whole answer)."""
    pool = api.rest_client.pool_manager
    request = pool.request

    def bounded(*args: Any, **kwargs: Any) -> Any:
        response = request(*args, **kwargs)
        if kwargs.get("preload_content", True) is False:
            response._body = read_bounded(response, limit, deadline_s)
        return response

    pool.request = bounded
    return api
