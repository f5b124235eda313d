"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``), on the standard library.

Every failure becomes a :class:`PrometheusError` whose message says what to check (the address, the query,
the answer), so the command line can print it instead of a traceback:

* :class:`PrometheusUnreachableError`: no HTTP answer at all (refused, DNS, timeout, TLS);
* :class:`PrometheusQueryError`: Prometheus answered and refused the query (``status: error``);
* :class:`PrometheusError` itself: an answer that is not the Prometheus API (a proxy page, a wrong path).

A range query is refused here, before it is sent, when it would exceed Prometheus' limit of 11,000 points
per series (the server would answer 400 "exceeded maximum resolution").
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

#: Prometheus refuses range queries of more points per series than this.
MAX_POINTS_PER_SERIES = 11_000


class PrometheusError(Exception):
    """The Prometheus API could not answer a request; the message says what to check."""


class PrometheusUnreachableError(PrometheusError):
    """No HTTP answer from the Prometheus address."""


class PrometheusQueryError(PrometheusError):
    """Prometheus answered with ``status: error`` for a query."""


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; ``ValueError`` unless it is an http(s) URL with a host."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{url!r} is not an http:// or https:// URL of a Prometheus server")
    if parsed.query or parsed.fragment:
        raise ValueError(f"{url!r}: give the server's base URL, without a query or fragment")
    return url.rstrip("/")


@dataclass
class PrometheusClient:
    """Queries one Prometheus server; ``requests`` counts the HTTP requests made (for progress and tests)."""

    base_url: str
    timeout: float = 30.0
    requests: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.base_url = check_base_url(self.base_url)

    def _get(self, path: str, params: dict[str, str], what: str) -> Any:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}" if params else f"{self.base_url}{path}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        self.requests += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            # The API answers 400/422/503 with a JSON error body; anything else is not the API.
            body = exc.read()
            error = _api_error(body)
            if error is not None:
                raise PrometheusQueryError(f"Prometheus refused {what}: {error}") from None
            raise PrometheusError(
                f"{self.base_url}{path} answered HTTP {exc.code} {exc.reason} for {what}, not the Prometheus API: "
                "check the URL (it should be the server's base URL, e.g. http://prometheus:9090)"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusUnreachableError(f"cannot reach Prometheus at {self.base_url}: {reason}") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise PrometheusError(
                f"{self.base_url}{path} did not answer JSON for {what}: is {self.base_url} a Prometheus server?"
            ) from None
        if not isinstance(document, dict) or document.get("status") != "success" or "data" not in document:
            error = _api_error(body)
            raise PrometheusQueryError(f"Prometheus refused {what}: {error or 'unexpected answer'}")
        return document["data"]

    def build_info(self) -> dict[str, Any]:
        """``/api/v1/status/buildinfo`` (version etc.): a cheap check that the server is there and is Prometheus."""
        data = self._get("/api/v1/status/buildinfo", {}, "the build information request")
        return data if isinstance(data, dict) else {}

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        """An instant query evaluated at Unix time ``at``: the result vector (``metric`` and ``value`` per series)."""
        data = self._get("/api/v1/query", {"query": promql, "time": _timestamp(at)}, f"the query {promql!r}")
        return _vector(data, promql, "vector")

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query: the result matrix (``metric``, ``values`` per series); ``ValueError`` past the point limit."""
        if step <= 0 or end < start:
            raise ValueError(f"a range query needs start <= end and a positive step (got {start}, {end}, {step})")
        points = math.floor((end - start) / step) + 1
        if points > MAX_POINTS_PER_SERIES:
            raise ValueError(
                f"{points} points per series from a {end - start:.0f} s range at a {step:g} s step: Prometheus "
                f"allows {MAX_POINTS_PER_SERIES}; use a larger step"
            )
        params = {"query": promql, "start": _timestamp(start), "end": _timestamp(end), "step": f"{step:g}"}
        data = self._get("/api/v1/query_range", params, f"the range query {promql!r}")
        return _vector(data, promql, "matrix")


def _timestamp(seconds: float) -> str:
    return f"{seconds:.3f}"


def _vector(data: Any, promql: str, kind: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != kind or not isinstance(data.get("result"), list):
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusQueryError(f"the query {promql!r} gave a {got}, not a {kind}")
    return list(data["result"])


def _api_error(body: bytes) -> str | None:
    """``errorType: error`` from an API error body, or None if the body is not the API's JSON."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("status") != "error":
        return None
    return f"{document.get('errorType', 'error')}: {document.get('error', '(no message)')}"
