"""``--workers N``: the supervisor starts N worker processes and keeps them running.

The supervisor imports what a worker runs, then forks each worker, so the interpreter's and the
modules' memory is shared by all of them; it runs no threads, so a fork inherits no held lock.
A worker is told its index and the run directory in the environment (``role``), then runs the
server as one process would: it loads the models, maps their weights from the run directory's
store and listens on the same REST and gRPC ports as the others (SO_REUSEPORT: the kernel
spreads connections over them). The supervisor serves nothing:

* start: a worker that exits before its listeners opened, while none has yet, means the server
  could not start (bad flags, config, initial load); the others are stopped and the
  supervisor exits with that worker's status, as one process would.
* a worker that dies later is replaced, at once the first time and after a growing pause
  (up to ``MAX_RESTART_DELAY_S``) if it keeps dying young; only its own requests in flight fail.
* SIGTERM/SIGINT: passed to every worker, which drains as one process does; the supervisor
  exits 0 once they have (a second signal ends everything at once).

Workers die with the supervisor (``PR_SET_PDEATHSIG``), so none outlives it however it ends.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from serving.config import ServerOptions
from serving.logs import configure
from serving.shutdown import STOP_SIGNALS, ShutdownSignals
from serving.workers.role import INDEX_ENV, RUN_DIR_ENV, ready_file

log = logging.getLogger("graphserve")

EXIT_START_FAILED = 255
YOUNG_S = 10.0  # a worker dying sooner than this after its start delays its replacement
MAX_RESTART_DELAY_S = 30.0
_PR_SET_PDEATHSIG = 1
# Beyond the drain's own delay and grace, how long workers may take to unload and exit.
_EXIT_WAIT_S = 10.0


def restart_delay(young_deaths: int) -> float:
    """Pause before replacing a worker that has died young this many times in a row."""
    if young_deaths <= 1:
        return 0.0
    return float(min(2 ** (young_deaths - 2), MAX_RESTART_DELAY_S))


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class _Worker:
    index: int
    pid: int | None = None
    started_at: float = 0.0
    young_deaths: int = 0
    start_after: float = 0.0  # monotonic time before which it is not started again


class Supervisor:
    def __init__(self, options: ServerOptions) -> None:
        self._options = options
        self._run_dir = Path(tempfile.mkdtemp(prefix="graphserve-workers-"))
        self._workers = [_Worker(i) for i in range(options.workers)]
        self._any_ready = False

    def _spawn(self, worker: _Worker) -> None:
        ready_file(self._run_dir, worker.index).unlink(missing_ok=True)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # else the child would write the parent's buffered output again
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._worker_main(worker.index, parent)
        worker.pid = pid
        worker.started_at = time.monotonic()
        log.info("Started worker %d (pid %d)", worker.index, pid)

    def _worker_main(self, index: int, parent: int) -> NoReturn:
        """The forked child: become worker ``index`` and serve until told to stop."""
        status = EXIT_START_FAILED
        try:
            if sys.platform == "linux":
                _die_with_parent()
                if os.getppid() != parent:  # the supervisor died before the line above
                    os._exit(status)
            for sig in STOP_SIGNALS:  # the worker installs its own as it starts
                signal.signal(sig, signal.SIG_DFL)
            os.environ[INDEX_ENV] = str(index)
            os.environ[RUN_DIR_ENV] = str(self._run_dir)
            configure(self._options.log_level, self._options.log_format, worker=index)
            from serving.server import serve

            status = serve(self._options)
        except BaseException:
            log.exception("Worker %d failed", index)
        finally:
            for handler in logging.getLogger().handlers:
                handler.flush()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(status)

    def run(self, signals: ShutdownSignals) -> int:
        try:
            for worker in self._workers:
                self._spawn(worker)
            while not signals.wait(0.2):
                failed = self._check()
                if failed is not None:
                    self._stop_all(signal.SIGKILL, 2.0)
                    return failed
            log.info("Draining %d workers", len(self._workers))
            options = self._options
            self._stop_all(
                signal.SIGTERM,
                options.drain_delay_seconds + max(options.drain_grace_seconds, 0) + _EXIT_WAIT_S,
            )
            return 0
        finally:
            self._stop_all(signal.SIGKILL, 2.0)
            shutil.rmtree(self._run_dir, ignore_errors=True)

    def _check(self) -> int | None:
        """Replace workers that died; the exit status to end with when the start failed."""
        now = time.monotonic()
        for worker in self._workers:
            if worker.pid is None:
                if now >= worker.start_after:
                    self._spawn(worker)
                continue
            if ready_file(self._run_dir, worker.index).exists():
                self._any_ready = True
            status = _exit_status(worker.pid)
            if status is None:
                continue
            if not self._any_ready:
                log.error("Worker %d exited with status %d before serving; stopping",
                          worker.index, status)
                return status if status > 0 else EXIT_START_FAILED
            lived = now - worker.started_at
            worker.young_deaths = worker.young_deaths + 1 if lived < YOUNG_S else 1
            delay = restart_delay(worker.young_deaths)
            log.error(
                "Worker %d (pid %d) exited with status %d after %.1fs; replacing it%s",
                worker.index, worker.pid, status, lived,
                f" in {delay:g}s" if delay else "",
            )
            worker.pid = None
            worker.start_after = now + delay
            if not delay:
                self._spawn(worker)
        return None

    def _stop_all(self, sig: signal.Signals, wait_s: float) -> None:
        running = [w.pid for w in self._workers if w.pid is not None]
        for worker in self._workers:
            worker.pid = None
        live = [pid for pid in running if _exit_status(pid) is None]
        for pid in live:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while live and time.monotonic() < deadline:
            time.sleep(0.05)
            live = [pid for pid in live if _exit_status(pid) is None]
        for pid in live:
            log.error("Worker pid %d did not exit in time; killing it", pid)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _exit_status(pid: int) -> int | None:
    """The child's exit status (negative: the signal that ended it), or None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return EXIT_START_FAILED  # already reaped
    return os.waitstatus_to_exitcode(status) if done else None


def _preload() -> None:
    """Import what a worker runs before forking any: the modules' memory is then shared by every
    worker (copy-on-write), and frozen out of the collector, whose passes would copy it."""
    import serving.core.warmup
    import serving.grpc.server
    import serving.rest.app
    import serving.rest.http_server
    import serving.server  # noqa: F401

    gc.collect()
    gc.freeze()


def supervise(options: ServerOptions) -> int:
    """Run ``options.workers`` workers until SIGTERM/SIGINT; the exit status."""
    signals = ShutdownSignals()
    signals.install()
    log.info("Serving with %d worker processes", options.workers)
    _preload()
    return Supervisor(options).run(signals)
