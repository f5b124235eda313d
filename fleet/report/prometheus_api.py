"""A small client of the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``), on the standard library.

Every failure becomes a :class:`PrometheusError` with a one-line message that names the request and says what
to check (the address, the query, the answer), so the command line can print it instead of a traceback:

* :class:`PrometheusUnreachableError`: no complete HTTP answer (refused, DNS, TLS, the connection closed or cut
  short, no complete answer in time);
* :class:`PrometheusQueryError`: Prometheus answered and refused the query (``status: error``);
* :class:`PrometheusError` itself: an answer that is not the Prometheus API (not HTTP, not JSON, a result of the
  wrong shape, larger than the client accepts, a proxy page, a wrong path).

Every request is bounded in time and size, whatever the server does: its whole answer must arrive within
``timeout`` seconds (a server that drips one byte at a time is cut off, not only one that goes silent), no request
runs past the client's ``deadline`` (one instant for all of them), and an answer larger than ``max_bytes`` is
refused as soon as its ``Content-Length`` or the bytes read so far say so, without reading the rest.

Credentials in the URL (``http://user:password@host:9090``) are sent as HTTP basic authentication, never along a
redirect, and never shown: :attr:`PrometheusClient.display_url` and every message carry ``***@`` instead. A
redirect is followed only within the server's own origin (scheme, host and port): one to another host is refused,
so the report never uses another server's answers as the Prometheus it was given.

A range query is refused here, before it is sent, when it would exceed Prometheus' limit of 11,000 points
per series (the server would answer 400 "exceeded maximum resolution").
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

#: Prometheus refuses range queries of more points per series than this.
MAX_POINTS_PER_SERIES = 11_000
#: The largest answer read, in bytes, unless the client is given another limit.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

_CHUNK = 64 * 1024
_QUOTED = 200  # at most this many characters of what a server said go into a message
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?.*@", re.DOTALL)


class PrometheusError(Exception):
    """The Prometheus API could not answer a request; the message says what to check."""


class PrometheusUnreachableError(PrometheusError):
    """No complete HTTP answer from the Prometheus address."""


class PrometheusQueryError(PrometheusError):
    """Prometheus answered with ``status: error`` for a query."""


def redact_url(url: str) -> str:
    """``url`` with its user information (``user:password@``) replaced by ``***@``, for messages and reports.

    Everything up to the last ``@`` is hidden, even in a URL that does not parse, so a password never shows.
    """
    return _USERINFO.sub(lambda m: f"{m.group(1) or ''}***@", url)


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; ``ValueError`` (credentials redacted) unless it is an http(s)
    URL with a host and a valid port, and nothing else."""
    shown = redact_url(url)
    try:
        parsed = urllib.parse.urlsplit(url)
        _ = parsed.port  # ValueError for a port that is not a number from 0 to 65535
    except ValueError:
        raise ValueError(f"{shown!r} is not a valid URL (its host or port)") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{shown!r} is not an http:// or https:// URL of a Prometheus server")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise ValueError(f"{shown!r}: a URL cannot contain spaces or control characters")
    if parsed.query or parsed.fragment:
        raise ValueError(f"{shown!r}: give the server's base URL, without a query or fragment")
    return url.rstrip("/")


def _split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user information, and the ``Authorization`` header value its credentials make."""
    parsed = urllib.parse.urlsplit(url)
    if "@" not in parsed.netloc:
        return url, None
    userinfo, _, host = parsed.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode())
    return urllib.parse.urlunsplit(parsed._replace(netloc=host)), f"Basic {token.decode('ascii')}"


def _quoted(text: object) -> str:
    """What a server said, on one line and at most ``_QUOTED`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= _QUOTED else line[: _QUOTED - 1] + "…"


class _TooLargeError(Exception):
    def __init__(self, size: int | None):
        super().__init__(size)
        self.size = size  # the announced Content-Length, None when the bytes read went past the limit


class _OtherOriginError(Exception):
    def __init__(self, target: str):
        super().__init__(target)
        self.target = target


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the request's origin only (RFC 6454: scheme, host, port), noting each URL it is
    sent to (a failure past a redirect names that URL)."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        """The standard redirect within the origin; ``_OtherOriginError`` for another origin; ``newurl`` noted."""
        target = urllib.parse.urljoin(req.full_url, newurl)
        if _origin(target) != _origin(req.full_url):
            raise _OtherOriginError(target)
        self.seen.append(target)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Exchange(threading.Thread):
    """One GET in a daemon thread, so the caller can give up at a deadline whatever the socket is doing."""

    def __init__(self, request: urllib.request.Request, timeout: float, max_bytes: int):
        super().__init__(name="prometheus-request", daemon=True)
        self.request, self.timeout, self.max_bytes = request, timeout, max_bytes
        self.cancelled = threading.Event()
        self.status: tuple[int, str] | None = None  # an HTTP error status (code, reason); None for 2xx
        self.body = b""
        self.error: BaseException | None = None
        self.redirects: list[str] = []  # where the server sent the request, in turn

    @property
    def via(self) -> str:
        """`` (redirected to URL)`` when the server redirected the request, else empty: what failed is there."""
        return f" (redirected to {redact_url(self.redirects[-1])})" if self.redirects else ""

    def run(self) -> None:
        try:
            try:
                opener = urllib.request.build_opener(_SameOriginRedirects(self.redirects))
                response = opener.open(self.request, timeout=self.timeout)
            except urllib.error.HTTPError as exc:  # the API answers 400/422/503 with a JSON error body
                response, self.status = exc, (exc.code, str(exc.reason))
            with response:
                self.body = self._read(response)
        except BaseException as exc:  # handed to the caller, which names the request
            self.error = exc

    def _read(self, response: Any) -> bytes:
        chunked = "chunked" in str(response.headers.get("Transfer-Encoding") or "").lower()
        announced = "" if chunked else str(response.headers.get("Content-Length") or "").strip()
        if announced.isdigit() and int(announced) > self.max_bytes:
            raise _TooLargeError(int(announced))
        body = bytearray()
        while not self.cancelled.is_set():
            chunk = response.read1(_CHUNK)  # at most one read from the socket: returns as soon as bytes come
            if not chunk:
                break
            body += chunk
            if len(body) > self.max_bytes:
                raise _TooLargeError(None)
        if announced.isdigit() and len(body) < int(announced):
            raise http.client.IncompleteRead(bytes(body), int(announced) - len(body))
        return bytes(body)


@dataclass
class PrometheusClient:
    """Queries one Prometheus server; ``requests`` counts the HTTP requests made (for progress and tests).

    ``timeout``: seconds for each whole request; ``deadline``: a ``time.monotonic()`` instant no request may
    run past (None: none); ``max_bytes``: the largest answer read. ``base_url`` loses any credentials, which
    go into an ``Authorization`` header; ``display_url`` is the URL to show.
    """

    base_url: str
    timeout: float = 30.0
    max_bytes: int = DEFAULT_MAX_BYTES
    deadline: float | None = None
    requests: int = field(default=0, init=False)
    display_url: str = field(default="", init=False)
    _authorization: str | None = field(default=None, init=False, repr=False)
    _counting: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        url = check_base_url(self.base_url)
        self.display_url = redact_url(url)
        self.base_url, self._authorization = _split_credentials(url)

    def _fetch(self, url: str, what: str) -> _Exchange:
        """The finished exchange of one GET; ``PrometheusError`` when it failed or did not finish in time."""
        allowed, limit = self.timeout, f"within the timeout of {self.timeout:g} s"
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise PrometheusUnreachableError(f"the deadline of all requests passed before {what}")
            if left < allowed:
                allowed, limit = left, "before the deadline of all requests"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._authorization:
            request.add_unredirected_header("Authorization", self._authorization)
        with self._counting:  # requests may be sent from several threads (fleet/report/query_pool.py)
            self.requests += 1
        exchange = _Exchange(request, allowed, self.max_bytes)
        exchange.start()
        exchange.join(allowed)
        if exchange.is_alive():
            exchange.cancelled.set()  # the thread stops at its next read; the process need not wait for it
            raise PrometheusUnreachableError(
                f"{self.display_url}{exchange.via} gave no complete answer to {what} {limit}"
            )
        if isinstance(exchange.error, Exception):
            failure = self._failure(exchange.error, what, limit)
            if exchange.redirects:
                failure = type(failure)(f"{failure}{exchange.via}")
            raise failure from None
        if exchange.error is not None:
            raise exchange.error  # KeyboardInterrupt, SystemExit: not a failure of the request
        return exchange

    def _failure(self, error: Exception, what: str, limit: str) -> PrometheusError:
        """The error to raise for what went wrong in an exchange."""
        at = self.display_url
        reason = getattr(error, "reason", error)  # urllib wraps what went wrong while connecting
        if isinstance(error, _OtherOriginError):
            return PrometheusError(
                f"{at} redirected {what} to another server, {redact_url(error.target)}: refused (the report reads "
                "only the Prometheus it is given); pass that server's base URL if it is the right one"
            )
        if isinstance(error, _TooLargeError):
            size = (
                f"announced {error.size:,} bytes"
                if error.size is not None
                else f"sent more than {self.max_bytes:,} bytes"
            )
            return PrometheusError(
                f"{at} {size} for {what}, more than the {self.max_bytes:,} bytes accepted: is it a Prometheus "
                "server, and does the query ask for too much?"
            )
        if isinstance(error, http.client.IncompleteRead):
            missing = f", {error.expected:,} more announced" if error.expected is not None else ""
            return PrometheusUnreachableError(
                f"{at} cut its answer to {what} short ({len(error.partial):,} bytes read{missing})"
            )
        if isinstance(error, http.client.RemoteDisconnected):
            return PrometheusUnreachableError(f"{at} closed the connection without answering {what}")
        if isinstance(error, http.client.HTTPException):
            return PrometheusError(
                f"{at} answered {what} with something that is not HTTP ({type(error).__name__}: {_quoted(error)})"
            )
        if isinstance(reason, TimeoutError):
            return PrometheusUnreachableError(f"{at} did not answer {what} {limit}")
        if isinstance(error, OSError):
            return PrometheusUnreachableError(f"cannot reach Prometheus at {at} for {what}: {_quoted(reason)}")
        return PrometheusError(f"the request for {what} to {at} failed: {type(error).__name__}: {_quoted(error)}")

    def _get(self, path: str, params: dict[str, str], what: str) -> Any:
        """The ``data`` of a successful API answer to ``GET path?params``."""
        url = f"{self.base_url}{path}?{urllib.parse.urlencode(params)}" if params else f"{self.base_url}{path}"
        where = f"{self.display_url}{path}"
        exchange = self._fetch(url, what)
        if exchange.status is not None:
            error = _api_error(exchange.body)
            if error is not None:
                raise PrometheusQueryError(f"Prometheus refused {what}: {error}")
            code, reason = exchange.status
            raise PrometheusError(
                f"{where}{exchange.via} answered HTTP {code} {_quoted(reason)} for {what}, not the Prometheus API: "
                "check the URL (it should be the server's base URL, e.g. http://prometheus:9090)"
            )
        try:
            document = json.loads(exchange.body)
        except (ValueError, RecursionError):
            raise PrometheusError(
                f"{where} did not answer JSON for {what}: is {self.display_url} a Prometheus server?"
            ) from None
        if isinstance(document, dict) and document.get("status") == "error":
            raise PrometheusQueryError(f"Prometheus refused {what}: {_api_error(exchange.body)}")
        if not isinstance(document, dict) or document.get("status") != "success" or "data" not in document:
            raise PrometheusError(
                f"{where} answered {what} with JSON that is not the Prometheus API "
                '(not an object with "status": "success" and "data")'
            )
        return document["data"]

    def build_info(self) -> dict[str, Any]:
        """``/api/v1/status/buildinfo`` (version etc.): a cheap check that the server is there and is Prometheus."""
        data = self._get("/api/v1/status/buildinfo", {}, "the build information request")
        return data if isinstance(data, dict) else {}

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        """An instant query evaluated at Unix time ``at``: the result vector (``metric`` and ``value`` per series),
        each sample checked to be ``{"metric": {label: str}, "value": [time, "number"]}``."""
        what = f"the query {promql!r}"
        data = self._get("/api/v1/query", {"query": promql, "time": _timestamp(at)}, what)
        return self._result(data, what, "vector")

    def query_samples(self, promql: str, at: float) -> list[dict[str, Any]]:
        """An instant query of a range selector (``metric[1h]``) at Unix time ``at``: its raw samples, as a matrix
        (``metric`` and ``values`` per series, checked like :meth:`query_range`'s)."""
        what = f"the query {promql!r}"
        data = self._get("/api/v1/query", {"query": promql, "time": _timestamp(at)}, what)
        return self._result(data, what, "matrix")

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query: the result matrix (``metric``, ``values`` per series, each checked like :meth:`query`'s);
        ``ValueError`` past the point limit."""
        if step <= 0 or end < start:
            raise ValueError(f"a range query needs start <= end and a positive step (got {start}, {end}, {step})")
        points = math.floor((end - start) / step) + 1
        if points > MAX_POINTS_PER_SERIES:
            raise ValueError(
                f"{points} points per series from a {end - start:.0f} s range at a {step:g} s step: Prometheus "
                f"allows {MAX_POINTS_PER_SERIES}; use a larger step"
            )
        what = f"the range query {promql!r}"
        params = {"query": promql, "start": _timestamp(start), "end": _timestamp(end), "step": f"{step:g}"}
        return self._result(self._get("/api/v1/query_range", params, what), what, "matrix")

    def _result(self, data: Any, what: str, kind: str) -> list[dict[str, Any]]:
        """``data.result`` of a query answer, every sample of the expected shape; ``PrometheusError`` otherwise."""
        if not isinstance(data, dict):
            raise PrometheusError(f"{self.display_url} answered {what} with data {_quoted(json.dumps(data))}")
        if data.get("resultType") != kind:
            raise PrometheusQueryError(f"{what} gave a {_quoted(data.get('resultType'))}, not a {kind}")
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusError(f"{self.display_url} answered {what} with a result that is not a list")
        for i, sample in enumerate(result):
            problem = _sample_problem(sample, kind)
            if problem:
                raise PrometheusError(f"{self.display_url} answered {what} with a malformed result[{i}]: {problem}")
        return list(result)


def _timestamp(seconds: float) -> str:
    return f"{seconds:.3f}"


def _point_problem(point: Any, where: str) -> str | None:
    """Why ``point`` is not ``[time, "number"]`` (Prometheus' sample), or None."""
    if (
        isinstance(point, list)
        and len(point) == 2
        and isinstance(point[0], int | float)
        and not isinstance(point[0], bool)
        and isinstance(point[1], str)
    ):
        try:
            float(point[1])
            return None
        except ValueError:
            pass
    return f'{where} is not [time, "number"] but {_quoted(json.dumps(point))}'


def _sample_problem(sample: Any, kind: str) -> str | None:
    """Why a result sample is not ``{"metric": {...}, "value": point}`` (vector) or ``"values": [point, ...]``
    (matrix), or None."""
    if not isinstance(sample, dict):
        return f"not an object but {_quoted(json.dumps(sample))}"
    metric = sample.get("metric")
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        return f"metric is not an object of label values but {_quoted(json.dumps(metric))}"
    if kind == "vector":
        return _point_problem(sample.get("value"), "value")
    values = sample.get("values")
    if not isinstance(values, list):
        return f"values is not a list but {_quoted(json.dumps(values))}"
    return next((p for j, point in enumerate(values) if (p := _point_problem(point, f"values[{j}]"))), None)


def _api_error(body: bytes) -> str | None:
    """``errorType: error`` from an API error body, or None if the body is not the API's JSON."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("status") != "error":
        return None
    return _quoted(f"{document.get('errorType', 'error')}: {document.get('error', '(no message)')}")
