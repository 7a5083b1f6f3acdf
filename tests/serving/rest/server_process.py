"""Start the real ``graphserve`` binary on a free loopback port and wait until it serves."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

GRAPHSERVE = Path(sys.executable).with_name("graphserve")
START_DEADLINE_S = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, flags: list[str], models: list[str]) -> None:
        self.port = free_port()
        # gRPC gets a free port too, unless the test chose one (--port=0 turns it off).
        self.grpc_port = free_port()
        if not any(flag.startswith("--port=") for flag in flags):
            flags = [f"--port={self.grpc_port}", *flags]
        # Ports at once, so a test can watch models load (or fail to); the tests of TensorFlow
        # Serving's start-up (ports once the models are in) ask for it.
        if not any(flag.startswith("--wait_for_initial_models") for flag in flags):
            flags = ["--wait_for_initial_models=false", *flags]
        # Lives as long as the server (closed in stop()), so no context manager.
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            "w+", prefix="graphserve-", suffix=".log"
        )
        args = [str(GRAPHSERVE), f"--rest_api_port={self.port}", "--rest_api_host=127.0.0.1",
                *flags]
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._final_output = ""
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.base_url, timeout=60)
        try:
            self._wait_until_available(models)
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        if self.log.closed:
            return self._final_output
        self.log.seek(0)
        return self.log.read()

    def _serves(self, model: str | None) -> bool:
        """Whether ``model`` has an AVAILABLE version (None: whether the process answers)."""
        try:
            if model is None:
                return self.client.get("/healthz").status_code == 200
            response = self.client.get(f"/v1/models/{model}")
            states = [v["state"] for v in response.json()["model_version_status"]]
            return response.status_code == 200 and "AVAILABLE" in states
        except (httpx.TransportError, KeyError, ValueError):
            return False

    def _wait_until_available(self, models: list[str]) -> None:
        """Until every model in ``models`` is AVAILABLE, or with none, until the REST API
        answers."""
        deadline = time.monotonic() + START_DEADLINE_S
        pending: list[str | None] = list(models) or [None]
        while pending:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"graphserve exited with {self.process.returncode}:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"graphserve did not serve {pending}:\n{self.output()}")
            if self._serves(pending[0]):
                pending.pop(0)
                continue
            try:  # the poll interval; returns at once if the server exits
                self.process.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> int:
        """SIGTERM, then wait for the graceful exit; returns the exit status."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self.log.closed:
            self._final_output = self.output()
            self.log.close()
        return self.process.returncode
