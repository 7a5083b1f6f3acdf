"""The REST listener: uvicorn (uvloop + httptools) with limits on every connection.

uvicorn on its own holds a connection for as long as the client likes: one that never sends a
byte, sends half a request head, or announces a body and never sends it stays open forever,
so enough of them exhaust the file descriptors and new clients are refused; and it accepts a
request head of any size. ``LimitedHttpToolsProtocol`` (uvicorn's httptools protocol, extended)
bounds each connection:

* the request head (request line and header lines) may take ``max_header_bytes`` and carry
  ``max_headers`` headers; beyond either the answer is 431 and the connection closes. The head
  is measured as it arrives, and no more of it than the limit is handed to the parser (a head
  pipelined behind another request in the same read: at most that read more);
* a head must be complete within ``header_timeout_s`` of its first byte, and a body within
  ``body_timeout_s`` of the end of its head (a deadline, so a trickled body does not extend
  it); otherwise the answer is 408 and the connection closes;
* a connection with no request in progress, fresh or kept alive, closes after
  ``idle_timeout_s``;
* beyond ``max_connections`` open connections, a new one is answered 503 and closed, so the
  listener keeps accepting and never runs out of descriptors.

Error answers carry TensorFlow Serving's JSON error body and ``Connection: close``. A request
body is not buffered ahead of the app beyond uvicorn's flow control (it stops reading past
64 KiB the app has not taken); its size limit is the app's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from runtime.errors import InvalidArgumentError
from serving.open_files import raise_open_file_limit
from serving.rest.json_text import error_body

if TYPE_CHECKING:
    from serving.config import ServerOptions

log = logging.getLogger("graphserve")

# Descriptors kept back from REST connections for everything else the process opens: model
# files, gRPC connections, the file watcher, logs.
_MIN_FD_RESERVE = 256
# A connection answered with an error lingers this long (write side shut, reading and
# discarding) so the client reads the answer instead of a reset; at most this many at once.
_LINGER_S = 1.0
_MAX_LINGERING = 64
_CAP_WARNING_INTERVAL_S = 60.0
# A timer that fires this much after its time was held up by a busy loop (see _fired_late).
_LATE_S = 0.1

# Where a connection is: between requests (nothing of the next one received yet), reading a
# request head, or reading a request body.
_IDLE, _HEAD, _BODY = 0, 1, 2


@dataclass(frozen=True)
class HttpLimits:
    """Per-connection limits of the REST listener (see the module docstring)."""

    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    # Longer than the 60 s idle timeout common in load balancers, so that the balancer, not
    # the server, closes an idle pooled connection: a server-side close racing a request the
    # balancer has just sent on that connection would fail that request.
    idle_timeout_s: float = 75.0
    max_connections: int = 0  # 0: derived from the open-file limit

    def __post_init__(self) -> None:
        for name, value in (("max_header_bytes", self.max_header_bytes),
                            ("max_headers", self.max_headers),
                            ("header_timeout_s", self.header_timeout_s),
                            ("body_timeout_s", self.body_timeout_s),
                            ("idle_timeout_s", self.idle_timeout_s)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if self.max_connections < 0:
            raise ValueError(f"max_connections must not be negative, got {self.max_connections}")

    @classmethod
    def from_server_options(cls, options: ServerOptions) -> HttpLimits:
        """The limits the ``--rest_api_*`` flags ask for; raises InvalidArgumentError."""
        positive = {
            "rest_api_max_header_bytes": options.rest_api_max_header_bytes,
            "rest_api_max_headers": options.rest_api_max_headers,
            "rest_api_header_timeout_in_ms": options.rest_api_header_timeout_in_ms,
            "rest_api_body_timeout_in_ms": options.rest_api_body_timeout_in_ms,
            "rest_api_idle_timeout_in_ms": options.rest_api_idle_timeout_in_ms,
        }
        for flag, value in positive.items():
            if value <= 0:
                raise InvalidArgumentError(f"--{flag} must be positive, got {value}")
        if options.rest_api_max_connections < 0:
            raise InvalidArgumentError(
                "--rest_api_max_connections must not be negative, got "
                f"{options.rest_api_max_connections}"
            )
        return cls(
            max_header_bytes=options.rest_api_max_header_bytes,
            max_headers=options.rest_api_max_headers,
            header_timeout_s=options.rest_api_header_timeout_in_ms / 1000,
            body_timeout_s=options.rest_api_body_timeout_in_ms / 1000,
            idle_timeout_s=options.rest_api_idle_timeout_in_ms / 1000,
            max_connections=options.rest_api_max_connections,
        )


def connection_cap(open_file_limit: int) -> int:
    """REST connections allowed under an open-file limit: it, less a reserve (a quarter, at
    least 256 descriptors, at most half) for everything else the process opens."""
    reserve = min(max(_MIN_FD_RESERVE, open_file_limit // 4), open_file_limit // 2)
    return max(1, open_file_limit - reserve)


class _Gate:
    """State shared by the connections of one listener."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self.lingering = 0
        self.last_warning = -math.inf


# uvicorn's own, called directly: this runs for every header of every request.
_base_on_header = HttpToolsProtocol.on_header


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head over the limits."""


class _HeadWithBody:
    """One response's view of the connection: its first write (the head uvicorn writes for
    ``http.response.start``) is held and sent together with the next one (the body)."""

    __slots__ = ("_close", "_head", "_transport")

    def __init__(self, transport: asyncio.Transport, close: Callable[[], None]) -> None:
        self._transport = transport
        self._close = close  # the connection's own way to close after an answer
        self._head: bytes | None = b""  # b"": nothing written yet; None: the head has gone

    def write(self, data: bytes) -> None:
        head = self._head
        if head is None or data.startswith(b"HTTP/1.1 100 "):  # "100 Continue" goes at once
            self._transport.write(data)
        elif not head:
            self._head = data
        else:
            self._head = None
            self._transport.write(head + data)

    def flush(self) -> None:
        """The response is complete: a head with no body (HEAD) goes now."""
        if self._head:
            self._transport.write(self._head)
        self._head = None

    def close(self) -> None:
        self.flush()
        self._close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of ``HttpLimits``; ``protocol_class``
    binds it to a listener's limits."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    gate: ClassVar[_Gate] = _Gate(connection_cap(1024))

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._phase = _IDLE
        self._phase_seq = 0  # bumped on every change of phase (and on every new request)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_seq = -1  # the phase_seq the timer was armed for
        self._retry: asyncio.TimerHandle | None = None  # a timer given a late second turn
        # Bytes of the request head being read (exact, but for a head that began in the same
        # read as the end of an earlier request: then a lower bound).
        self._head_bytes = 0
        self._heads_done = 0  # heads completed on this connection
        self._message_begun = False  # the parser has seen the start of the head being read
        self._head_exact = True  # the head being read is measured from its first byte
        self._refusal: tuple[int, str] | None = None  # set by a callback refusing the head
        self._refused = False  # answered with an error and closing: input is dropped
        self._deferred_answer: tuple[int, str] | None = None  # due after pending responses
        self._lingering = False

    # -- connection ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.gate.max_connections:
            self._reject_connection(transport)
            return
        super().connection_made(transport)
        self._arm_idle()

    def _reject_connection(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        gate = self.gate
        now = time.monotonic()
        if now - gate.last_warning >= _CAP_WARNING_INTERVAL_S:
            gate.last_warning = now
            log.warning(
                "REST connection limit reached (%d open, --rest_api_max_connections); "
                "new connections are answered 503", gate.max_connections,
            )
        self._answer_and_close(503, "Too many open connections; retry later.")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self._lingering:
            self._lingering = False
            self.gate.lingering -= 1
        super().connection_lost(exc)

    # -- input --------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        start = self._phase
        if start == _IDLE:
            self._set_phase(_HEAD)
            self._head_bytes = 0
        heads_before = self._heads_done
        try:
            allowance = self.limits.max_header_bytes - self._head_bytes
            if start == _BODY or len(data) <= allowance:
                self.parser.feed_data(data)
            else:
                # This read belongs to the head being read until the head ends: the parser
                # gets only what the head may still take, so an oversized head is refused
                # without buffering the rest of it.
                view = memoryview(data)
                self.parser.feed_data(view[:allowance])
                if self._heads_done == heads_before:
                    self._refuse_head(431, self._too_large())
                    return
                self.parser.feed_data(view[allowance:])
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse_head(*self._refusal)
                return
            self._cancel_timer()
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self._cancel_timer()
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        if self._phase == _HEAD:
            if start != _BODY and self._heads_done == heads_before:
                self._head_bytes += len(data)  # all of it was this head's
            else:
                # The head began within this read, after another request; how far into it
                # is unknown, so count what the parser has handed over (a lower bound).
                self._head_bytes = self._parsed_head_bytes()
                if self._head_bytes > self.limits.max_header_bytes:
                    self._refuse_head(431, self._too_large())
                    return
        self._sync_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._message_begun = True
        # A head that begins where a read begins is measured on the raw input; one that
        # follows another request within a read is checked once parsed.
        self._head_exact = self._phase == _HEAD
        if self._phase == _IDLE:
            self._set_phase(_HEAD)

    def on_header(self, name: bytes, value: bytes) -> None:
        # Counted as they are parsed, so a head of thousands of tiny headers costs no more
        # than max_headers calls before it is refused.
        if len(self.headers) >= self.limits.max_headers:
            self._stop_head(
                431, f"Request has more than {self.limits.max_headers} header fields."
            )
        _base_on_header(self, name, value)

    def on_headers_complete(self) -> None:
        if not self._head_exact and self._parsed_head_bytes() > self.limits.max_header_bytes:
            self._stop_head(431, self._too_large())
        self._heads_done += 1
        self._message_begun = False
        self._set_phase(_BODY)
        super().on_headers_complete()
        # The response head waits for its body, so both leave in one send (a system call per
        # response saved; on loopback that is a good part of a small request's cost).
        self.cycle.transport = _HeadWithBody(  # type: ignore[assignment]
            self.transport, self._close_response
        )

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._set_phase(_IDLE)

    def on_response_complete(self) -> None:
        # uvicorn arms its keep-alive timer here, which is the idle timer (see HttpServer);
        # it does not apply while the next request is already arriving.
        writer = self.cycle.transport if self.cycle is not None else None
        if isinstance(writer, _HeadWithBody):
            writer.flush()
        super().on_response_complete()
        if self._phase != _IDLE:
            self._unset_keepalive_if_required()
        if self._deferred_answer is not None and self._no_request_in_progress():
            self._answer_and_close(*self._deferred_answer)

    # -- limits -------------------------------------------------------------------------

    def _parsed_head_bytes(self) -> int:
        return len(self.url) + sum(len(name) + len(value) for name, value in self.headers)

    def _too_large(self) -> str:
        return f"Request header fields are larger than {self.limits.max_header_bytes} bytes."

    def _stop_head(self, status: int, message: str) -> NoReturn:
        self._refusal = (status, message)
        raise _HeadRefused(message)

    def _refuse_head(self, status: int, message: str) -> None:
        """Answer ``status`` to the head being read and close the connection."""
        self._refused = True
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # Responses to earlier requests are still due: the answer follows the last one.
            self._cancel_timer()
            self._deferred_answer = (status, message)
            self.flow.pause_reading()
            return
        self._answer_and_close(status, message)

    def _close_response(self) -> None:
        """The application closes the connection after its answer (``Connection: close``, as
        a 413 does): while the request's body is still arriving, without a reset."""
        if self._phase != _BODY or self.transport.is_closing():
            self.transport.close()
            return
        self._refused = True
        self._cancel_timer()
        self._unset_keepalive_if_required()
        self._close_after_answer()

    def _answer_and_close(self, status: int, message: str) -> None:
        self._refused = True
        self._cancel_timer()
        self._unset_keepalive_if_required()
        if self.transport.is_closing():
            return
        self._write_error(status, message)
        self._close_after_answer()

    def _close_after_answer(self) -> None:
        # Closing with unread input would reset the connection, and a reset can discard the
        # answer before the client reads it: shut the write side, read and drop what the
        # client still sends, and close on its end of input or after a moment.
        gate = self.gate
        if gate.lingering >= _MAX_LINGERING or not self.transport.can_write_eof():
            self.transport.close()
            return
        gate.lingering += 1
        self._lingering = True
        self.transport.write_eof()
        self.transport.resume_reading()
        self._timer = self.loop.call_later(_LINGER_S, self.transport.close)

    def _write_error(self, status: int, message: str) -> None:
        body = error_body(message)
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ])
        self.transport.write(b"".join(content))

    # -- timers -------------------------------------------------------------------------

    def _set_phase(self, phase: int) -> None:
        self._phase = phase
        self._phase_seq += 1

    def _no_request_in_progress(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _sync_timer(self) -> None:
        """The timer for the phase the connection is in, armed when the phase began (once per
        chunk of input rather than per parser callback)."""
        if self._timer_seq == self._phase_seq or self.transport.is_closing():
            return
        if self._phase == _HEAD:
            self._arm(self.limits.header_timeout_s, self._head_timed_out)
        elif self._phase == _BODY:
            self._arm(self.limits.body_timeout_s, self._body_timed_out)
        else:
            self._cancel_timer()
            self._timer_seq = self._phase_seq
            if self._no_request_in_progress():  # else on_response_complete arms it
                self._arm_idle()

    def _arm(self, delay_s: float, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(delay_s, callback)
        self._timer_seq = self._phase_seq

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fired_late(self, callback: Callable[[], None]) -> bool:
        """Whether the timer fired well after its time: the loop was busy, and input that
        arrived meanwhile is not read yet (timers run before I/O). It then gets one more
        turn, once, so that a loop busy for good does not keep it from ever expiring."""
        timer = self._timer
        if timer is None or timer is self._retry or self.loop.time() - timer.when() <= _LATE_S:
            return False
        self._timer = self._retry = self.loop.call_later(_LATE_S, callback)
        return True

    def _arm_idle(self) -> None:
        """Arm the idle timer; it shares uvicorn's keep-alive slot, so that uvicorn cancels it
        when input arrives and re-arms it after each response."""
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.limits.idle_timeout_s, self.timeout_keep_alive_handler
        )

    def timeout_keep_alive_handler(self) -> None:
        timer = self.timeout_keep_alive_task
        if (timer is not None and timer is not self._retry
                and self.loop.time() - timer.when() > _LATE_S):
            # Held up by a busy loop: input that arrived meanwhile gets read first (once).
            self.timeout_keep_alive_task = self._retry = self.loop.call_later(
                _LATE_S, self.timeout_keep_alive_handler
            )
            return
        self.timeout_keep_alive_task = None
        super().timeout_keep_alive_handler()

    def _head_timed_out(self) -> None:
        if self._fired_late(self._head_timed_out):
            return
        self._timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the server stopped reading, not the client
            self._arm(self.limits.header_timeout_s, self._head_timed_out)
            return
        if not self._message_begun:  # nothing of a request (stray line ends): no answer
            self.transport.close()
            return
        self._refuse_head(408, "Timed out waiting for the request headers.")

    def _body_timed_out(self) -> None:
        if self._fired_late(self._body_timed_out):
            return
        self._timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the app has not taken what arrived: not the client's delay
            self._arm(self.limits.body_timeout_s, self._body_timed_out)
            return
        cycle = self.cycle
        if cycle.response_started:  # the app answered without the rest of the body
            self._refused = True
            self.transport.close()
            return
        # The app waiting for the body sees the client gone and sends nothing more.
        cycle.disconnected = True
        cycle.message_event.set()
        self._answer_and_close(408, "Timed out waiting for the request body.")


def protocol_class(limits: HttpLimits, max_connections: int) -> type[LimitedHttpToolsProtocol]:
    """``LimitedHttpToolsProtocol`` bound to one listener's limits."""

    class ListenerProtocol(LimitedHttpToolsProtocol):
        pass

    ListenerProtocol.limits = limits
    ListenerProtocol.gate = _Gate(max_connections)
    return ListenerProtocol


def _shared_port_socket(host: str, port: int, address: str) -> socket.socket:
    """A socket bound with SO_REUSEPORT, so every worker of ``--workers`` listens on the port
    and the kernel spreads new connections over them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise InvalidArgumentError(f"Failed to start HTTP server at {address}: {err}") from err
    return sock


class HttpServer:
    """The REST listener, serving ``app`` from an event loop on a thread of its own (the main
    thread keeps the stop signals, so the drain is the server's to order, not uvicorn's).

    ``stop`` closes the listening socket, lets requests in flight finish for up to the grace
    period given at construction and closes idle keep-alive connections; the event it returns is
    set once the loop has ended.
    """

    def __init__(
        self,
        app: Callable[..., Awaitable[None]],
        host: str,
        port: int,
        limits: HttpLimits,
        grace_s: float,
        *,
        reuse_port: bool = False,
    ) -> None:
        open_files = raise_open_file_limit()
        max_connections = limits.max_connections or connection_cap(open_files)
        log.info(
            "REST connections: at most %d (open-file limit %d); request heads up to %d bytes "
            "and %d fields", max_connections, open_files, limits.max_header_bytes,
            limits.max_headers,
        )
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            # The fastest stack uvicorn has; named, so a missing one fails loudly instead of
            # falling back to the pure-Python parser.
            loop="uvloop" if sys.platform != "win32" else "asyncio",
            http=protocol_class(limits, max_connections),
            log_config=None,
            access_log=False,  # the access log (when on) is the application's
            # X-Forwarded-* rewriting of the client address and scheme, which nothing here reads.
            proxy_headers=False,
            lifespan="off",
            # The idle timeout between requests (uvicorn takes whole seconds).
            timeout_keep_alive=math.ceil(limits.idle_timeout_s),
            timeout_graceful_shutdown=max(math.ceil(grace_s), 1),
        )
        self._address = f"{host}:{port}"
        self._host, self._port, self._reuse_port = host, port, reuse_port
        self._socket: socket.socket | None = None
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="rest-loop", daemon=True)
        self._stopped = threading.Event()

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket] if self._socket is not None else None)
        except SystemExit:  # uvicorn's way of saying it could not bind the port
            pass
        except Exception:
            log.exception("The REST listener failed")
        finally:
            self._stopped.set()

    def start(self) -> None:
        """Listen and serve; raises InvalidArgumentError when the port cannot be bound."""
        if self._reuse_port:
            self._socket = _shared_port_socket(self._host, self._port, self._address)
        self._thread.start()
        while not self._server.started:
            if self._stopped.wait(0.01):
                raise InvalidArgumentError(f"Failed to start HTTP server at {self._address}")

    @property
    def stopped(self) -> threading.Event:
        """Set once the listener has ended (after ``stop``, or by failing)."""
        return self._stopped

    def stop(self) -> threading.Event:
        self._server.should_exit = True  # the loop looks at it every 0.1 s
        return self._stopped
