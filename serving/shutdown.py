"""Stop signals: the first SIGTERM/SIGINT asks for a graceful drain, a second exits at once.

The handlers run in the main thread (Python delivers signals there) and only record the request
or, the second time, end the process; ``serving.server`` waits on ``ShutdownSignals`` and carries
the drain out (readiness off, listeners on for the drain delay, requests in flight finished
within the grace period, models unloaded).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

log = logging.getLogger("graphserve")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ShutdownSignals:
    """Install once, from the main thread, before anything long-running starts."""

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._lock = threading.Lock()
        self._received = 0

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def request(self) -> None:
        """Ask for the drain as a signal would (the REST listener failing, say)."""
        self._requested.set()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Until a stop is requested (True) or ``timeout`` passes (False)."""
        return self._requested.wait(timeout)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        with self._lock:
            self._received += 1
            again = self._received > 1
        name = signal.Signals(signum).name
        if again:
            # The operator means it: no drain, no unloading.
            log.warning("Received %s again; exiting now", name)
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stdout.flush()
            os._exit(128 + signum)
        log.info("Received %s; draining (send it again to exit at once)", name)
        self._requested.set()
