"""``python -m fleet report`` against a misbehaving Prometheus: a fake HTTP server on 127.0.0.1 that answers
garbage, cuts answers short, sends malformed JSON or results of the wrong shape, drips, or never stops sending.

Every such answer ends the report with one line on stderr that names the request, exit status 1, no traceback
and nothing written, within a bounded time; credentials given in the URL are used and never shown.
"""

from __future__ import annotations

import base64
import io
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from fleet.report.command import ReportError, ReportRequest, build
from fleet.report.prometheus_api import DEFAULT_MAX_BYTES, PrometheusClient, PrometheusError, redact_url
from fleet.tools.cli import build_parser, main
from tests.conftest import FIXTURES, ROOT

LIFETIME_S = 120.0  # the fake server stops by itself after this long, whatever the test does (a leak's bound only)
# The report's per-request timeout where a test is not about it: an upper bound a healthy answer never nears, however
# loaded the machine (the server answers from a thread of the test's own process, which may wait for a core).
PATIENT_TIMEOUT = "60"
NOW = 1_772_443_800.0  # 2026-03-02 09:30 UTC: the samples the fake server answers are stamped with a fixed instant
# The report runs on the tests' own fleet and its workload `fitter` (tests/fixtures/fleet), whatever the shipped one is.
FLEET = FIXTURES / "fleet"
WORKLOAD = "fitter"
CARD = {"cluster": "fix-eks", "cloud": "aws", "gpu": "t4", "namespace": "benchmarks", "pod": "fitter-t4-x7k2p"}
VECTOR = {"resultType": "vector", "result": [{"metric": CARD, "value": [NOW, "2.5"]}]}
MATRIX = {"resultType": "matrix", "result": [{"metric": CARD, "values": [[NOW - 60, "2.5"], [NOW, "2.4"]]}]}
RESULT_QUERY = "the query 'avg by (cluster, cloud, gpu) (last_over_time(fitter_duration_seconds"
RANGE_QUERY = "the range query 'max by (cluster, cloud, gpu) (fitter_duration_seconds"

Reply = Iterable[bytes | float]  # what the server does, in order: bytes are sent, a number is a pause in seconds
Route = Callable[[], Reply]


class FakePrometheus:
    """An HTTP server on 127.0.0.1 (a free port) that answers each request with ``reply(target)`` (the request's
    path and query string), one thread per
    connection, and records each request's path and headers. It stops by itself ``lifetime`` seconds after
    it started (``stop()`` stops it sooner), cutting off whatever it is still sending."""

    def __init__(self, reply: Callable[[str], Reply], lifetime: float = LIFETIME_S):
        self._reply = reply
        self._until = time.monotonic() + lifetime
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _running(self) -> bool:
        return not self._stopped.is_set() and time.monotonic() < self._until

    def _serve(self) -> None:
        with self._listener:
            while self._running():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30.0)
            try:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    data = conn.recv(4096)
                    if not data:
                        return
                    head += data
                request_line, *fields = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
                target = request_line.split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
                self.requests.append((urlsplit(target).path, headers))
                for step in self._reply(target):
                    if not self._running():
                        return
                    if isinstance(step, bytes):
                        conn.sendall(step)
                    else:
                        self._stopped.wait(step)
            except OSError:
                pass  # the client gave up (reset, broken pipe) or went silent

    def stop(self) -> None:
        """Stop accepting and cut every answer off."""
        self._stopped.set()
        self._thread.join(timeout=5)


def http(body: bytes | str, status: str = "200 OK", *, length: int | None = None, headers: str = "") -> bytes:
    """A whole HTTP/1.1 answer; ``length`` overrides the Content-Length announced."""
    data = body.encode() if isinstance(body, str) else body
    announced = len(data) if length is None else length
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {announced}\r\n"
    return (head + f"Connection: close\r\n{headers}\r\n").encode() + data


def api(data: Any) -> bytes:
    """A successful API answer with ``data``."""
    return http(json.dumps({"status": "success", "data": data}))


def healthy(query: Route | None = None, query_range: Route | None = None) -> Callable[[str], Reply]:
    """A Prometheus that answers well, except ``query`` and ``query_range`` when given."""

    def reply(target: str) -> Reply:
        path = urlsplit(target).path
        if path == "/api/v1/status/buildinfo":
            return [api({"version": "3.0.0-fake"})]
        if path == "/api/v1/query":
            if query:
                return query()
            promql = parse_qs(urlsplit(target).query).get("query", [""])[0]
            return [api(MATRIX if promql.endswith("]") else VECTOR)]  # raw samples of a range selector: a matrix
        if path == "/api/v1/query_range":
            return query_range() if query_range else [api(MATRIX)]
        return [http("404 page not found\n", "404 Not Found")]

    return reply


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str], Reply]], FakePrometheus]]:
    """Start fake servers; every one is stopped after the test."""
    servers: list[FakePrometheus] = []

    def start(reply: Callable[[str], Reply]) -> FakePrometheus:
        servers.append(FakePrometheus(reply))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def report(url: str, out: Path, *extra: str) -> int:
    """``python -m fleet report`` (in this process) for the fixture fleet's ``fitter`` over the last hour; its exit
    status. No test times it: which bound cut an answer off is told by the one line it prints, whatever the load.
    Each request may take ``PATIENT_TIMEOUT`` seconds unless ``extra`` gives another ``--timeout``."""
    args = ["report", "--prometheus", url, "--since", "1h", "--workload", WORKLOAD, "--out", str(out)]
    args += ["--policy", str(FLEET / "fleet.yaml"), "--workloads-dir", str(FLEET / "workloads")]
    return main([*args, "--timeout", PATIENT_TIMEOUT, *extra])


def failure_line(capsys: pytest.CaptureFixture[str], out: Path) -> str:
    """The one line that says why the report failed (after the progress lines), checked to be the only other
    line, without a traceback and with nothing written."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and not out.exists(), err
    lines = err.splitlines()
    assert lines and all(line.startswith("report: ") for line in lines), err
    assert [line for line in lines if not line.startswith("report: [")] == lines[-1:], err
    assert lines[-1].endswith("; no report written"), err
    return lines[-1]


def drip(head: bytes, body: bytes, every: float) -> Reply:
    """``head`` at once, then ``body`` one byte every ``every`` seconds."""
    yield head
    for byte in body:
        yield every
        yield bytes([byte])


# --- answers that are not HTTP, or not whole --------------------------------------------------------------------

TRANSPORT = {
    "garbage status line": ([b"garbage\r\n\r\n"], "with something that is not HTTP (BadStatusLine: garbage)"),
    "header line too long": ([b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n"], "(LineTooLong: "),
    "short body": ([http('{"status": "success"}', length=1000)], "short (21 bytes read, 979 more announced)"),
    "short chunked body": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{}"],
        "cut its answer to " + RESULT_QUERY,
    ),
    "closed without answer": ([], "closed the connection without answering " + RESULT_QUERY),
    "HTML error page": (
        [http("<html>\n<body>proxy\nerror</body></html>", "502 Bad Gateway")],
        f"answered HTTP 502 Bad Gateway for {RESULT_QUERY}",
    ),
}


@pytest.mark.parametrize(("reply", "message"), TRANSPORT.values(), ids=TRANSPORT.keys())
def test_an_answer_that_is_not_whole_http_is_one_line_naming_the_query(
    serve: Callable[..., FakePrometheus],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reply: list[bytes],
    message: str,
) -> None:
    server = serve(healthy(query=lambda: reply))
    code = report(server.url, tmp_path / "out")
    line = failure_line(capsys, tmp_path / "out")
    assert code == 1
    assert message in line and RESULT_QUERY in line


def test_garbage_from_the_first_request_names_it(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(lambda path: [b"SSH-2.0-OpenSSH_9.6\r\n"])
    assert report(server.url, tmp_path / "out") == 1
    line = failure_line(capsys, tmp_path / "out")
    assert f"{server.url} answered the build information request with something that is not HTTP" in line


# --- HTTP answers that are not the API, or results of the wrong shape -------------------------------------------

BODIES = {
    "not JSON": ("<html>Grafana</html>", "did not answer JSON for " + RESULT_QUERY),
    "truncated JSON": ('{"status": "success", "data": {"resultType": "vector", "res', "did not answer JSON"),
    "deeply nested JSON": ("[" * 100_000 + "]" * 100_000, "did not answer JSON"),
    "not UTF-8": (b'{"status": "success", "data": "\xff\xfe"}', "did not answer JSON"),
    "a list": ("[]", "with JSON that is not the Prometheus API"),
    "no data": ('{"status": "success"}', "with JSON that is not the Prometheus API"),
    "no status": ('{"data": {"resultType": "vector", "result": []}}', "with JSON that is not the Prometheus API"),
    "data null": ('{"status": "success", "data": null}', "[3600s]))' with data null"),
    "a matrix": (json.dumps({"status": "success", "data": MATRIX}), "gave a matrix, not a vector"),
    "multi-line API error": (
        '{"status": "error", "errorType": "bad_data", "error": "parse error:\\nunexpected\\n\\tthing"}',
        "[3600s]))': bad_data: parse error: unexpected thing; no report written",
    ),
}
SAMPLES = {
    "result not a list": ({"resultType": "vector", "result": {}}, "with a result that is not a list"),
    "sample not an object": ([1], "malformed result[0]: not an object but 1"),
    "metric missing": ([{"value": [NOW, "1"]}], "malformed result[0]: metric is not an object of label values"),
    "metric a list": ([{"metric": [], "value": [NOW, "1"]}], "metric is not an object of label values but []"),
    "label not a string": ([{"metric": {"gpu": 4}, "value": [NOW, "1"]}], 'but {"gpu": 4}'),
    "value missing": ([{"metric": CARD}], 'malformed result[0]: value is not [time, "number"] but null'),
    "value a number": ([{"metric": CARD, "value": [1, 2.5]}], 'value is not [time, "number"] but [1, 2.5]'),
    "value too short": ([{"metric": CARD, "value": [1]}], 'value is not [time, "number"] but [1]'),
    "time a string": ([{"metric": CARD, "value": ["now", "1"]}], 'but ["now", "1"]'),
    "time a boolean": ([{"metric": CARD, "value": [True, "1"]}], 'but [true, "1"]'),
    "value not a number": ([{"metric": CARD, "value": [1, "fast"]}], 'but [1, "fast"]'),
    "second sample bad": ([VECTOR["result"][0], {"metric": CARD, "value": {}}], "malformed result[1]: value"),
}


def _vector(result: Any) -> str:
    data = result if isinstance(result, dict) else {"resultType": "vector", "result": result}
    return json.dumps({"status": "success", "data": data})


@pytest.mark.parametrize(
    ("body", "message"),
    [*BODIES.values(), *((_vector(r), m) for r, m in SAMPLES.values())],
    ids=[*BODIES, *SAMPLES],
)
def test_a_malformed_answer_to_a_query_is_one_line_naming_the_query(
    serve: Callable[..., FakePrometheus],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    body: str | bytes,
    message: str,
) -> None:
    server = serve(healthy(query=lambda: [http(body)]))
    assert report(server.url, tmp_path / "out") == 1
    line = failure_line(capsys, tmp_path / "out")
    assert message in line and RESULT_QUERY in line


MATRICES = {
    "values missing": ([{"metric": CARD}], "malformed result[0]: values is not a list but null"),
    "values an object": ([{"metric": CARD, "values": {}}], "values is not a list but {}"),
    "point bad": ([{"metric": CARD, "values": [[NOW, "1"], [NOW, 1]]}], 'values[1] is not [time, "number"]'),
    "a vector": (VECTOR, "gave a vector, not a matrix"),
}


@pytest.mark.parametrize(("result", "message"), MATRICES.values(), ids=MATRICES.keys())
def test_a_malformed_range_answer_names_the_range_query(
    serve: Callable[..., FakePrometheus],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    result: Any,
    message: str,
) -> None:
    data = result if isinstance(result, dict) else {"resultType": "matrix", "result": result}
    server = serve(healthy(query_range=lambda: [api(data)]))
    assert report(server.url, tmp_path / "out") == 1
    line = failure_line(capsys, tmp_path / "out")
    assert message in line and RANGE_QUERY in line


# --- time and size bounds ---------------------------------------------------------------------------------------

DRIPS = {
    # One byte every 0.25 s: a socket timeout (1 s between two bytes) would never fire.
    "body": lambda: drip(http(b"", length=4000), json.dumps({"status": "success", "data": VECTOR}).encode(), 0.25),
    "status line": lambda: drip(b"", api(VECTOR), 0.25),
}


@pytest.mark.parametrize("reply", DRIPS.values(), ids=DRIPS.keys())
def test_a_dripping_answer_is_cut_off_at_the_timeout(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str], reply: Route
) -> None:
    server = serve(healthy(query=reply))
    code = report(server.url, tmp_path / "out", "--timeout", "1")
    line = failure_line(capsys, tmp_path / "out")
    # the drips outlast the server's lifetime: an answer cut off by the server, or read whole, says something else
    assert code == 1
    assert f"{server.url} gave no complete answer to {RESULT_QUERY}" in line
    assert line.endswith("within the timeout of 1 s; no report written")


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_whole_report_ends_by_its_deadline(
    serve: Callable[..., FakePrometheus], tmp_path: Path, concurrency: int
) -> None:
    """Each answer comes within the timeout, but the requests together run past the report's budget, whether they are
    sent one after the other or several at a time."""
    server = serve(lambda path: [0.4, *healthy()(path)])
    fleet = ["--policy", str(FLEET / "fleet.yaml"), "--workloads-dir", str(FLEET / "workloads")]
    args = build_parser().parse_args(
        [
            "report",
            "--prometheus",
            server.url,
            "--since",
            "1h",
            "--out",
            str(tmp_path / "out"),
            "--timeout",
            "1",
            "--concurrency",
            str(concurrency),
            *fleet,
        ]
    )
    # cut off under way ("... before the deadline of all requests") or not begun ("the deadline ... passed before")
    with pytest.raises(ReportError, match="the deadline of all requests") as failed:
        build(ReportRequest.from_namespace(args), stream=io.StringIO(), budget=1.0)
    # all requests would take 12 s one after the other; in the 1 s budget at 0.4 s an answer, the build information
    # and at most 3 rounds of ``concurrency`` queries begin (fewer on a slow machine)
    assert not failed.value.bad_input and len(server.requests) <= 1 + 3 * concurrency


def test_an_announced_huge_answer_is_refused_unread(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(healthy(query=lambda: [http(b"[", length=10 * 2**30), 30.0]))
    code = report(server.url, tmp_path / "out", "--timeout", "1")
    line = failure_line(capsys, tmp_path / "out")
    assert code == 1  # read, the body would end in the 1 s timeout after its first byte: another message
    assert f"announced 10,737,418,240 bytes for {RESULT_QUERY}" in line
    assert f"more than the {DEFAULT_MAX_BYTES:,} bytes accepted" in line


def test_an_endless_answer_is_cut_off_at_the_size_limit(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Content-Length and no end: the client stops reading past 64 MiB instead of filling its memory."""
    mebibyte = b" " * 2**20

    def endless() -> Reply:
        yield b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        while True:
            yield mebibyte

    server = serve(healthy(query=endless))
    code = report(server.url, tmp_path / "out")  # 64 MiB cut off by size, however slowly they come
    line = failure_line(capsys, tmp_path / "out")
    assert code == 1
    assert f"sent more than {DEFAULT_MAX_BYTES:,} bytes for {RESULT_QUERY}" in line


def test_the_size_limit_is_the_clients(serve: Callable[..., FakePrometheus]) -> None:
    server = serve(healthy(query=lambda: [api(VECTOR)]))
    client = PrometheusClient(server.url, timeout=float(PATIENT_TIMEOUT), max_bytes=100)
    assert client.build_info() == {"version": "3.0.0-fake"}
    with pytest.raises(PrometheusError, match=r"announced [\d,]+ bytes for the query 'up', more than the 100 bytes"):
        client.query("up", NOW)


# --- credentials in the URL -------------------------------------------------------------------------------------

USER, PASSWORD = "alice-ro", "s3cret-pw"


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_shown(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(healthy())
    url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@")
    out = tmp_path / "out"
    code = report(url, out)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert {headers.get("authorization") for _, headers in server.requests} == {f"Basic {token}"}
    shown = server.url.replace("http://", "http://***@")
    assert "report: [1/" in captured.err and f"connecting to {shown}" in captured.err
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"index.html", "report.md"} <= set(written)
    assert f"Prometheus {shown}, window".encode() in written["report.md"]
    for text in (captured.out, captured.err, *(data.decode("latin-1") for data in written.values())):
        assert PASSWORD not in text and USER not in text and token not in text


def test_credentials_are_not_shown_when_the_request_fails(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(healthy(query=lambda: [b"garbage\r\n\r\n"]))
    assert report(server.url.replace("http://", f"http://{USER}:{PASSWORD}@"), tmp_path / "out") == 1
    line = failure_line(capsys, tmp_path / "out")
    assert line.startswith(f"report: {server.url.replace('http://', 'http://***@')} answered")
    assert PASSWORD not in line and USER not in line


def test_a_redirect_to_another_server_is_refused_and_takes_no_credentials(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another origin (here another port) is another server: its answers are never the report's (issue 44)."""
    elsewhere = serve(healthy())
    redirect = serve(lambda path: [http("", "302 Found", headers=f"Location: {elsewhere.url}{path}\r\n")])
    assert report(redirect.url.replace("http://", f"http://{USER}:{PASSWORD}@"), tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "to another server" in err and "refused" in err
    assert PASSWORD not in err and "Traceback" not in err
    assert redirect.requests and all("authorization" in headers for _, headers in redirect.requests)
    assert not elsewhere.requests


def test_a_redirect_within_the_server_is_followed_without_credentials(
    serve: Callable[..., FakePrometheus], tmp_path: Path
) -> None:
    answer = healthy()

    def moved(path: str) -> Reply:
        if path.startswith("/moved/"):
            return answer(path[len("/moved") :])
        return [http("", "301 Moved Permanently", headers=f"Location: /moved{path}\r\n")]

    server = serve(moved)
    assert report(server.url.replace("http://", f"http://{USER}:{PASSWORD}@"), tmp_path / "out") == 0
    moved_requests = [headers for path, headers in server.requests if path.startswith("/moved/")]
    assert moved_requests and not any("authorization" in headers for headers in moved_requests)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"ftp://{USER}:{PASSWORD}@prometheus:21", "'ftp://***@prometheus:21' is not an http:// or https:// URL"),
        (f"{USER}:{PASSWORD}@prometheus:9090", "'***@prometheus:9090' is not an http:// or https:// URL"),
        (f"http://{USER}:{PASSWORD}@prometheus:99999", "'http://***@prometheus:99999' is not a valid URL"),
        (f"http://{USER}:pa/ss@prometheus", "'http://***@prometheus' is not a valid URL"),
        (f"http://{USER}:{PASSWORD}@prometheus:9090/?x=1", "without a query or fragment"),
        (f"http://{USER}:{PASSWORD}@prom etheus:9090", "cannot contain spaces or control characters"),
    ],
)
def test_a_bad_url_with_credentials_is_bad_input_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, message: str
) -> None:
    assert report(url, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert PASSWORD not in err and USER not in err and "pa/ss" not in err


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://prometheus:9090", "http://prometheus:9090"),
        ("https://u:p@prometheus:9090/prom", "https://***@prometheus:9090/prom"),
        ("http://u:p@ss@prometheus", "http://***@prometheus"),
        ("u:p@prometheus", "***@prometheus"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    assert report("http://127.0.0.1:9", tmp_path / "out", "--timeout", timeout) == 2
    assert "--timeout must be a positive number of seconds" in capsys.readouterr().err


# --- queries side by side ----------------------------------------------------------------------------------------


def test_ctrl_c_with_queries_under_way_ends_the_report_at_once(
    serve: Callable[..., FakePrometheus], tmp_path: Path
) -> None:
    """Four queries in flight on the pool's threads, none answered: a Ctrl-C ends ``fleet report`` with one line and
    130, without waiting for them (each would wait for its whole timeout)."""
    in_flight = threading.Semaphore(0)

    def held(target: str) -> Reply:
        if urlsplit(target).path == "/api/v1/status/buildinfo":
            return [api({"version": "3.0.0-fake"})]
        in_flight.release()
        return [LIFETIME_S]  # never answers while the test runs

    server = serve(held)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet", "report", "--prometheus", server.url, "--since", "1h", "--out", str(out),
         "--policy", str(FLEET / "fleet.yaml"), "--workloads-dir", str(FLEET / "workloads"), "--timeout", "100",
         "--concurrency", "4"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(4):
            assert in_flight.acquire(timeout=LIFETIME_S), "the report never had four queries in flight"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=LIFETIME_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert [line for line in stderr.splitlines() if not line.startswith("report: [")] == [
        "fleet report: stopped by Ctrl-C (exit 130)"
    ], stderr
    assert stdout == "" and not out.exists()


def test_a_failure_past_a_redirect_names_where_it_was_sent(
    serve: Callable[..., FakePrometheus], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first URL answered with a redirect (within its origin: another is refused, above); what failed was the
    address it sent the request to, so that is named."""

    def answer(path: str) -> list[bytes]:
        if path.startswith("/moved/"):
            return [http("not here", "404 Not Found")]
        return [http("", "302 Found", headers=f"Location: /moved{path}\r\n")]

    server = serve(answer)
    assert report(server.url, tmp_path / "out") == 1
    line = failure_line(capsys, tmp_path / "out")
    assert f"(redirected to {server.url}/moved/api/v1/" in line and "HTTP 404" in line, line
