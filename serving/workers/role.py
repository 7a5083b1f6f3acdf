"""What a worker process knows of itself: its index and the run directory it shares with the
supervisor and the other workers.

The supervisor passes both in the environment (the command line stays the operator's, flag for
flag). The run directory holds one control socket per worker (``peers``), the weight store
(``weight_store``), the model config last applied by a reload (so a replaced worker starts from
it) and a file per worker that says its listeners are open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

INDEX_ENV = "GRAPHSERVE_WORKER_INDEX"
RUN_DIR_ENV = "GRAPHSERVE_WORKER_RUN_DIR"


@dataclass(frozen=True)
class WorkerRole:
    index: int
    run_dir: Path

    @classmethod
    def from_env(cls) -> WorkerRole | None:
        """This process's role, or None when it is not a supervised worker."""
        index, run_dir = os.environ.get(INDEX_ENV), os.environ.get(RUN_DIR_ENV)
        if index is None or not run_dir:
            return None
        return cls(int(index), Path(run_dir))

    @property
    def socket_path(self) -> Path:
        return control_socket(self.run_dir, self.index)

    @property
    def ready_file(self) -> Path:
        return ready_file(self.run_dir, self.index)

    @property
    def weights_dir(self) -> Path:
        return self.run_dir / "weights"

    @property
    def reloaded_config(self) -> Path:
        """The last ReloadConfigRequest any worker applied (serialized), if any."""
        return self.run_dir / "reloaded_config.pb"

    def peer_sockets(self) -> list[Path]:
        """Every other worker's control socket (a replaced worker's may not answer)."""
        own = self.socket_path
        return sorted(p for p in self.run_dir.glob("worker-*.sock") if p != own)


def control_socket(run_dir: Path, index: int) -> Path:
    return run_dir / f"worker-{index}.sock"


def ready_file(run_dir: Path, index: int) -> Path:
    return run_dir / f"worker-{index}.ready"
