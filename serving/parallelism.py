"""``--tensorflow_session_parallelism``, ``--tensorflow_intra_op_parallelism`` and
``--tensorflow_inter_op_parallelism``: how many threads one kernel of a run may use.

As in TensorFlow Serving: the intra-op flag, else the session flag, sets the threads of one op;
0 is automatic; giving all three is an error. Automatic is every core (at most
``AUTOMATIC_MAX``), shared out over ``--workers`` processes (each worker its share, at least
one): a big kernel (a
convolution or dense product of millions of multiply-adds) spreads its blocks over them, which
on 2 cores makes one big convolution 1.5-1.8x faster, and small kernels never fan out
(``runtime.intra_op``). Ops run one after another in a run (its plan is straight-line code), so
the inter-op flag is accepted and changes nothing.
"""

from __future__ import annotations

import os
from typing import Protocol

from runtime.errors import InvalidArgumentError

# Automatic is every core up to this many: each pool thread keeps its own scratch (patch
# matrices, up to 32 MiB), and a batch-1 kernel has few blocks to share beyond it.
AUTOMATIC_MAX = 8

ALL_THREE = (
    "Either configure server_options.tensorflow_session_parallelism or "
    "(server_options.tensorflow_intra_op_parallelism, "
    "server_options.tensorflow_inter_op_parallelism) separately. You cannot configure all."
)


class ParallelismFlags(Protocol):
    @property
    def tensorflow_session_parallelism(self) -> int: ...

    @property
    def tensorflow_intra_op_parallelism(self) -> int: ...

    @property
    def tensorflow_inter_op_parallelism(self) -> int: ...

    @property
    def workers(self) -> int: ...


def intra_op_threads(flags: ParallelismFlags, cpus: int | None = None) -> int:
    """Threads per kernel the flags ask for; raises InvalidArgumentError as upstream does."""
    session = flags.tensorflow_session_parallelism
    intra = flags.tensorflow_intra_op_parallelism
    if session > 0 and intra > 0 and flags.tensorflow_inter_op_parallelism > 0:
        raise InvalidArgumentError(ALL_THREE)
    wanted = intra if intra > 0 else session
    if wanted > 0:
        return wanted
    cores = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(AUTOMATIC_MAX, cores // max(flags.workers, 1)))
