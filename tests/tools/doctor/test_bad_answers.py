"""The doctor against something that answers like no API server (fleet/tools/doctor/bounded_reads.py,
cluster_read.py): bytes that are not text, JSON of another shape, a body that never ends, one too large. Each ends
in the API server's row, failed, naming what came back and what to check, exit 1, no traceback and no hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.tools.cli import main
from fleet.tools.doctor.bounded_reads import AnswerError, read_bounded
from tests.tools.doctor.fake_kube_api import write_kubeconfig
from tests.tools.doctor.support import BASE, leaf_of, row_of


class _Answers(BaseHTTPRequestHandler):
    """Every GET answered with the server's ``body`` (bytes, or "endless" for a body that keeps coming)."""

    def do_GET(self) -> None:
        body = self.server.body  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if body == "endless":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while not self.server.stopping.is_set():  # type: ignore[attr-defined]
                    chunk = b'{"items": [' + b" " * 4096
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    time.sleep(0.01)
            except OSError:
                pass  # the doctor hung up
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def answering(tmp_path: Path) -> Iterator[object]:
    servers: list[ThreadingHTTPServer] = []

    def serve(body: bytes | str) -> Path:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
        server.daemon_threads = True
        server.body, server.stopping = body, threading.Event()  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return write_kubeconfig(tmp_path / "kubeconfig.yaml", f"http://127.0.0.1:{server.server_address[1]}")

    yield serve
    for server in servers:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


CASES = {
    "latin-1 bytes": (b'{"items": [], "kind": "caf\xe9"}', "answered bytes that are not text"),
    "a JSON list": (b"[1, 2, 3]", "answered something that is not a Kubernetes list"),
    "items not a list": (b'{"items": 5}', "answered something that is not a Kubernetes list"),
    "endless": ("endless", "did not finish its answer within 2 s"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_answer_no_api_server_gives_is_named_in_the_table(fleet, answering, capsys, case):
    body, expected = CASES[case]
    kubeconfig = answering(body)
    status = main([*BASE, "--stack", leaf_of(fleet).name, "--kubeconfig", str(kubeconfig), "--timeout", "0.5"])
    out, err = capsys.readouterr()
    assert status == 1, out + err
    row = row_of(out, "Kubernetes API server")
    assert "FAIL" in row and expected in row, out
    assert "kubectl get --raw /version" in out and "your network" not in row
    assert "Traceback" not in out + err


class _Chunks:
    """An unread urllib3 response of the given chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.closed = chunks, False

    def stream(self, size: int, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        self.closed = True


def test_a_body_past_the_bound_is_refused_and_one_within_it_read_whole():
    assert read_bounded(_Chunks([b"ab", b"cd"]), 4, 10) == b"abcd"
    response = _Chunks([b"ab", b"cd", b"e"])
    with pytest.raises(AnswerError, match="more than 4 bytes"):
        read_bounded(response, 4, 10)
    assert response.closed
    ticks = iter([0.0, 1.0, 5.0, 11.0])
    with pytest.raises(AnswerError, match="within 10 s"):
        read_bounded(_Chunks([b"a", b"b", b"c"]), 100, 10, clock=lambda: next(ticks))
