"""Server subprocesses for the serving benchmark: start on loopback ports, wait until a check
passes, read their CPU time, stop.

Every server is a child process with its output in a scratch log; one that exits or never passes
its check raises ``ServerFailed`` carrying the tail of that log, so the table can show it as
FAIL instead of timing an error server.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ServerFailed(RuntimeError):
    """A server that did not start or did not answer correctly; ``tail`` is its log's end."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process: every thread's, as /proc/<pid>/stat sums them."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def cpu_seconds(pid: int) -> float:
    """CPU time so far of a process, its threads and its live descendants."""
    tree = _children()
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            total += _cpu_ticks(current)
        except (OSError, ValueError):
            continue
        stack.extend(tree.get(current, []))
    return total / CLOCK_TICKS


class Server:
    """One server subprocess; ``ports`` by role (``grpc``, ``rest``)."""

    def __init__(self, name: str, argv: list[str], ports: dict[str, int], scratch: Path,
                 env: dict[str, str] | None = None, fatal: str | None = None) -> None:
        """``fatal``: a regular expression for a log line after which waiting is pointless (a
        model that failed to load while the process lives on)."""
        self.name = name
        self.fatal = re.compile(fatal) if fatal else None
        self.argv = argv
        self.ports = ports
        self.log_path = scratch / f"{name.replace(' ', '_').replace('/', '_')}.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output().rstrip().splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_until(self, check: Callable[[], T], deadline_s: float, what: str) -> T:
        """Calls ``check`` until it returns without raising ``OSError``/``ConnectionError``/
        ``TryAgain``; any other exception, an exit, or the deadline raise ``ServerFailed``."""
        deadline = time.monotonic() + deadline_s
        last: BaseException | None = None
        while True:
            if not self.alive():
                raise ServerFailed(f"{self.name} exited with status {self.process.returncode}",
                                   self.tail())
            try:
                return check()
            except (OSError, TryAgain) as err:
                last = err
                if self.fatal and (found := self.fatal.search(self.output())):
                    raise ServerFailed(f"{self.name}: {found.group(0)}", self.tail()) from err
            except ServerFailed as err:
                raise ServerFailed(str(err), err.tail or self.tail()) from err
            except Exception as err:  # a wrong answer, a decoding error: not worth timing
                raise ServerFailed(f"{self.name}: {what}: {type(err).__name__}: {err}",
                                   self.tail()) from err
            if time.monotonic() > deadline:
                raise ServerFailed(f"{self.name}: no {what} within {deadline_s:.0f} s ({last})",
                                   self.tail())
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class TryAgain(Exception):
    """Raised by a readiness check that should be retried (e.g. HTTP 503 while loading)."""
