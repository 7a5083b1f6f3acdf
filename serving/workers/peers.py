"""The workers' control channel: each worker answers on a Unix socket in the run directory, and
any worker can ask all the others.

What crosses it is what one worker alone cannot answer for the server as a whole: a metrics
scrape (every worker's numbers, summed) and a ReloadConfig (applied by every worker before the
RPC answers). A message is one JSON object each way, 4-byte length first, one exchange per
connection. A peer that does not answer (it died, and the supervisor is replacing it) is left
out; it starts again from the run directory's state.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

log = logging.getLogger("graphserve")

Message = dict[str, Any]
# A request's "op" -> what answers it (raising OpError: the error travels back).
Handlers = dict[str, Callable[[Message], Message]]

_LENGTH = struct.Struct(">I")
MAX_MESSAGE_BYTES = 256 << 20  # a ReloadConfig of many models, a scrape of many cells
CONNECT_TIMEOUT_S = 2.0


class PeerUnavailable(Exception):
    """The peer did not answer (not listening, or gone mid-exchange)."""


def _send(sock: socket.socket, message: Message) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(body)) + body)


def _receive_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> Message:
    (size,) = _LENGTH.unpack(_receive_exact(sock, _LENGTH.size))
    if size > MAX_MESSAGE_BYTES:
        raise ConnectionError(f"a control message of {size} bytes is too large")
    message = json.loads(_receive_exact(sock, size))
    if not isinstance(message, dict):
        raise ConnectionError("a control message is not an object")
    return message


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        from runtime.errors import Code, OpError

        try:
            request = _receive(self.request)
        except (OSError, ValueError):
            return
        handler = self.server.handlers.get(str(request.get("op")))
        reply: Message
        try:
            if handler is None:
                raise ValueError(f"unknown control request {request.get('op')!r}")
            reply = {"ok": handler(request)}
        except OpError as err:
            reply = {"code": err.code.value, "message": err.message}
        except Exception as err:  # a bug: say so to the asking worker, keep answering
            log.exception("Control request %r failed", request.get("op"))
            reply = {"code": Code.INTERNAL.value, "message": f"{type(err).__name__}: {err}"}
        try:
            _send(self.request, reply)
        except OSError:
            pass


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    handlers: Handlers


class PeerServer:
    """This worker's end of the channel; ``close`` stops it and removes the socket."""

    def __init__(self, path: Path, handlers: Handlers) -> None:
        path.unlink(missing_ok=True)  # a replaced worker's socket
        self._path = path
        self._server = _Server(str(path), _Handler)
        self._server.handlers = handlers
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="worker-control", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._path.unlink(missing_ok=True)


def ask(path: Path, message: Message, timeout_s: float | None) -> Message:
    """One exchange with the peer at ``path``: its answer, or its OpError raised here.
    Raises PeerUnavailable when it cannot be reached or goes away, DeadlineExceededError when
    it has not answered within ``timeout_s``."""
    from runtime.errors import Code, DeadlineExceededError, error_for_code

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(str(path))
        except OSError as err:
            raise PeerUnavailable(f"{path.name}: {err}") from err
        try:
            sock.settimeout(timeout_s)
            _send(sock, message)
            reply = _receive(sock)
        except TimeoutError as err:
            raise DeadlineExceededError(f"A worker did not answer within {timeout_s:g}s") from err
        except (OSError, ValueError) as err:
            raise PeerUnavailable(f"{path.name}: {err}") from err
    if "ok" in reply:
        answer = reply["ok"]
        return answer if isinstance(answer, dict) else {}
    raise error_for_code(Code(int(reply["code"])), str(reply["message"]))


def ask_all(
    paths: Sequence[Path], message: Message, timeout_s: float | None
) -> list[Message | BaseException]:
    """Ask every peer at once; per peer its answer or what went wrong (PeerUnavailable,
    OpError), in the order given."""
    if not paths:
        return []

    def one(path: Path) -> Message | BaseException:
        from runtime.errors import OpError

        try:
            return ask(path, message, timeout_s)
        except (PeerUnavailable, OpError) as err:
            return err

    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        return list(pool.map(one, paths))
