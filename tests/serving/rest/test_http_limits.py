"""Connection-level limits of the REST listener, against the real daemon over raw sockets:
oversized heads, slow or silent clients, and the connection cap."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.config import ServerOptions
from serving.rest.http_server import HttpLimits, connection_cap
from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess, free_port
from tests.serving.support import HALF_PLUS_TWO

MODEL = "half_plus_two"
HEADER_TIMEOUT_S = 0.5
BODY_TIMEOUT_S = 0.5
IDLE_TIMEOUT_S = 3.0
MAX_CONNECTIONS = 8
# Upper bound on how late the server may act on a timeout (slow, shared machines).
SLACK_S = 20.0
PREDICT_BODY = b'{"instances": [1.0, 2.0, 5.0]}'


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    server = ServerProcess(
        [
            f"--model_name={MODEL}", f"--model_base_path={HALF_PLUS_TWO}", "--port=0",
            f"--rest_api_header_timeout_in_ms={int(HEADER_TIMEOUT_S * 1000)}",
            f"--rest_api_body_timeout_in_ms={int(BODY_TIMEOUT_S * 1000)}",
            f"--rest_api_idle_timeout_in_ms={int(IDLE_TIMEOUT_S * 1000)}",
            f"--rest_api_max_connections={MAX_CONNECTIONS}",
        ],
        [MODEL],
    )
    # Its pooled keep-alive connection would count towards the cap; the tests use raw sockets.
    server.client.close()
    yield server
    assert server.stop() == 0, server.output()


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=SLACK_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send(sock: socket.socket, data: bytes) -> None:
    """Send, tolerating a server that has already answered and stopped reading."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def read_until_closed(sock: socket.socket, limit_s: float = SLACK_S) -> bytes:
    """Everything the server sends until it closes the connection (within ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    chunks: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"connection still open after {limit_s} s: {b''.join(chunks)!r}"
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def read_response(
    sock: socket.socket, allow_close: bool = False
) -> tuple[int, dict[str, str], bytes]:
    """One response (with a Content-Length); with ``allow_close``, status 0 when the server
    closes without one."""
    sock.settimeout(SLACK_S)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk and allow_close and not data:
            return 0, {}, b""
        assert chunk, f"closed before a complete response head: {data!r}"
        data += chunk
        assert len(data) < 1 << 20
    head, _, body = data.partition(b"\r\n\r\n")
    status, headers = parse_head(head)
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the end of the response body"
        body += chunk
    assert len(body) == length
    return status, headers, body


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def error_answer(data: bytes) -> tuple[int, dict[str, str], str]:
    """Status, headers and error message of a complete JSON error answer."""
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no complete response: {data!r}"
    status, headers = parse_head(head)
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    message = json.loads(body)["error"]
    assert isinstance(message, str)
    return status, headers, message


def request(method: str, path: str, body: bytes = b"", extra: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: test\r\n".encode() + extra
    if body or method == "POST":
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def predict_request() -> bytes:
    return request("POST", f"/v1/models/{MODEL}:predict", PREDICT_BODY)


def assert_predicts(sock: socket.socket) -> None:
    send(sock, predict_request())
    status, _, body = read_response(sock)
    assert status == 200, body
    assert json.loads(body) == {"predictions": [2.5, 3.0, 4.5]}


def test_a_head_over_the_byte_limit_is_answered_431(server: ServerProcess) -> None:
    with connect(server) as sock:
        send(sock, request("GET", "/healthz", extra=b"X-Big: " + b"a" * 100_000 + b"\r\n"))
        status, _, message = error_answer(read_until_closed(sock))
    assert status == 431
    assert message == "Request header fields are larger than 65536 bytes."


def test_a_head_over_the_byte_limit_in_many_writes_is_answered_431(
    server: ServerProcess,
) -> None:
    with connect(server) as sock:
        send(sock, b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: ")
        for _ in range(40):  # 160 KB in 4 KB writes, none of them over the limit alone
            send(sock, b"a" * 4096)
        status, _, _ = error_answer(read_until_closed(sock))
    assert status == 431


def test_an_oversized_head_pipelined_behind_a_request_is_answered_431_after_it(
    server: ServerProcess,
) -> None:
    big = request("GET", "/healthz", extra=b"X-Big: " + b"a" * 100_000 + b"\r\n")
    with connect(server) as sock:
        send(sock, predict_request() + big)
        data = read_until_closed(sock)
    first, _, rest = data.partition(b"\r\n\r\n")
    assert parse_head(first)[0] == 200
    status, _, _ = error_answer(rest[rest.index(b"HTTP/1.1 "):])
    assert status == 431


def test_a_head_under_the_byte_limit_is_served(server: ServerProcess) -> None:
    with connect(server) as sock:
        send(sock, request("GET", "/healthz", extra=b"X-Big: " + b"a" * 60_000 + b"\r\n"))
        status, _, body = read_response(sock)
    assert status == 200, body


def test_too_many_headers_are_answered_431(server: ServerProcess) -> None:
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    with connect(server) as sock:
        send(sock, request("GET", "/healthz", extra=many))
        status, _, message = error_answer(read_until_closed(sock))
    assert status == 431
    assert message == "Request has more than 100 header fields."


def test_a_connection_that_sends_nothing_is_closed_when_idle(server: ServerProcess) -> None:
    start = time.monotonic()
    with connect(server) as sock:
        assert read_until_closed(sock, IDLE_TIMEOUT_S + SLACK_S) == b""
    assert time.monotonic() - start >= IDLE_TIMEOUT_S * 0.8


def test_a_half_sent_head_is_answered_408(server: ServerProcess) -> None:
    start = time.monotonic()
    with connect(server) as sock:
        send(sock, b"GET /healthz HTTP/1.1\r\nHost: te")
        status, _, message = error_answer(read_until_closed(sock))
    assert status == 408
    assert message == "Timed out waiting for the request headers."
    assert time.monotonic() - start >= HEADER_TIMEOUT_S * 0.8


def test_a_trickled_head_is_answered_408(server: ServerProcess) -> None:
    """The header timeout is a deadline for the whole head, not for each piece of it."""
    with connect(server) as sock:
        send(sock, b"GET /healthz HTTP/1.1\r\n")
        data = b""
        for i in range(int(4 * HEADER_TIMEOUT_S / 0.1)):
            send(sock, b"X-%d: v\r\n" % i)
            time.sleep(0.1)
            sock.setblocking(False)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            finally:
                sock.setblocking(True)
            break
        data += read_until_closed(sock)
        status, _, _ = error_answer(data)
    assert status == 408


def test_a_missing_body_is_answered_408(server: ServerProcess) -> None:
    start = time.monotonic()
    head = (f"POST /v1/models/{MODEL}:predict HTTP/1.1\r\nHost: test\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode()
    with connect(server) as sock:
        send(sock, head + b'{"instances": ')
        status, _, message = error_answer(read_until_closed(sock))
    assert status == 408
    assert message == "Timed out waiting for the request body."
    assert time.monotonic() - start >= BODY_TIMEOUT_S * 0.8


def test_a_keep_alive_client_is_unaffected_until_idle(server: ServerProcess) -> None:
    with connect(server) as sock:
        for _ in range(5):
            assert_predicts(sock)
            send(sock, request("GET", f"/v1/models/{MODEL}"))
            status, _, body = read_response(sock)
            assert status == 200, body
            # Pauses between requests longer than the header and body timeouts.
            time.sleep(2 * HEADER_TIMEOUT_S)
        # A body sent in a second write, after a pause shorter than the body timeout.
        send(sock, request("POST", f"/v1/models/{MODEL}:predict", PREDICT_BODY)[:-10])
        time.sleep(BODY_TIMEOUT_S / 5)
        send(sock, PREDICT_BODY[-10:])
        status, _, body = read_response(sock)
        assert status == 200, body
        start = time.monotonic()
        assert read_until_closed(sock, IDLE_TIMEOUT_S + SLACK_S) == b""
    assert time.monotonic() - start >= IDLE_TIMEOUT_S * 0.8


def test_an_upgrade_request_is_served_as_http_1_1(server: ServerProcess) -> None:
    """What ``curl --http2`` sends to an http:// URL."""
    upgrade = (b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
               b"HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n")
    with connect(server) as sock:
        send(sock, request("GET", f"/v1/models/{MODEL}", extra=upgrade))
        status, _, body = read_response(sock)
    assert status == 200, body


def test_connections_over_the_cap_are_answered_503(server: ServerProcess) -> None:
    held: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS):
            sock = connect(server)
            held.append(sock)
            send(sock, request("GET", "/healthz"))  # answered: the server has counted it
            status, _, body = read_response(sock)
            assert status == 200, body
        with connect(server) as extra:
            send(extra, request("GET", "/healthz"))
            answer = read_until_closed(extra)
        status, _, message = error_answer(answer)
        assert status == 503
        assert message == "Too many open connections; retry later."
        # Held connections keep being served.
        assert_predicts(held[0])
        for sock in held[:2]:
            sock.close()
        held = held[2:]
        # Once the server has seen the closes, a new connection is served again.
        deadline = time.monotonic() + SLACK_S
        while True:
            with connect(server) as sock:
                send(sock, predict_request())
                status, _, body = read_response(sock, allow_close=True)
            if status == 200:
                assert json.loads(body) == {"predictions": [2.5, 3.0, 4.5]}
                break
            assert status in (0, 503), body
            assert time.monotonic() < deadline, f"still refused: {status} {body!r}"
            time.sleep(0.05)
    finally:
        for sock in held:
            sock.close()


def test_limits_from_flags() -> None:
    assert HttpLimits.from_server_options(ServerOptions()) == HttpLimits()
    limits = HttpLimits.from_server_options(ServerOptions(
        rest_api_max_header_bytes=1000, rest_api_max_headers=5,
        rest_api_header_timeout_in_ms=250, rest_api_body_timeout_in_ms=1500,
        rest_api_idle_timeout_in_ms=2000, rest_api_max_connections=7,
    ))
    assert limits == HttpLimits(1000, 5, 0.25, 1.5, 2.0, 7)


def test_the_derived_cap_leaves_descriptors_for_the_rest() -> None:
    assert connection_cap(1024) == 768
    assert connection_cap(256) == 128
    assert connection_cap(65536) == 49152


def test_an_invalid_limit_stops_start_up(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(GRAPHSERVE), f"--rest_api_port={free_port()}", "--rest_api_host=127.0.0.1",
         "--port=0", "--model_name=m", f"--model_base_path={tmp_path}",
         "--rest_api_max_headers=0"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 255
    assert "Failed to start server. Error: INVALID_ARGUMENT: --rest_api_max_headers must be " \
        "positive, got 0" in result.stdout
