"""Batching settings: the text BatchingParameters of ``--batching_parameters_file``, checked.

Names, defaults and the checks' messages are TensorFlow Serving's, so a file that works there
works here and a file that fails there fails here with the same words. Upstream runs the checks
when a model loads (and when the shared scheduler starts, for ``num_batch_threads``); parsing
here runs them at once unless asked not to, and ``validated()`` runs them later.

One deliberate difference: a negative ``batch_timeout_micros`` (rejected upstream) asks for the
adaptive batch window, with ``abs(value)`` as the most a task may wait.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from protos.tensorflow_serving.servables.tensorflow.session_bundle_config_pb2 import (
    BatchingParameters,
)
from runtime.errors import InvalidArgumentError
from serving.proto_text import parse_proto_text, read_proto_text_file

DEFAULT_THREAD_POOL_NAME = "batch_threads"


def _schedulable_cpus() -> int:
    # Upstream's default is port::MaxParallelism(): the CPUs this process may run on.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class BatchingParams:
    """One queue's batching settings (all queues of a server or model share one).

    ``max_execution_batch_size`` 0 means unset; read ``execution_batch_size`` for the size a
    batch may reach. ``allowed_batch_sizes`` are the sizes a batch is padded up to.
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = field(default_factory=_schedulable_cpus)
    thread_pool_name: str = DEFAULT_THREAD_POOL_NAME
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 0

    @property
    def adaptive(self) -> bool:
        """Whether the batch window is learned rather than a fixed timeout."""
        return self.batch_timeout_micros < 0

    @property
    def execution_batch_size(self) -> int:
        """Most rows in one batch: ``max_batch_size`` unless splitting sets a smaller one."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size > 0:
            return self.max_execution_batch_size
        return self.max_batch_size

    def validated(self) -> BatchingParams:
        """These settings, checked as upstream checks them; raises InvalidArgumentError.

        Returns a copy where upstream quietly adjusts a value (``max_enqueued_batches`` 0
        without splitting means 1).
        """
        if self.num_batch_threads < 1:
            raise InvalidArgumentError(
                f"num_batch_threads must be positive; was {self.num_batch_threads}"
            )
        _check_allowed_batch_sizes(self.allowed_batch_sizes, self.max_batch_size)
        if self.max_batch_size < 1:
            # Upstream's field is unsigned, so only 0 is caught there; a negative size is no
            # more meaningful, so it gets the same answer.
            raise InvalidArgumentError(
                f"input_batch_size_limit must be positive; was {self.max_batch_size}"
            )
        checked = self
        if self.max_enqueued_batches == 0 and not self.enable_large_batch_splitting:
            # Upstream keeps old low-traffic configs working by reading 0 as 1.
            checked = dataclasses.replace(self, max_enqueued_batches=1)
        elif self.max_enqueued_batches < 1:
            raise InvalidArgumentError(
                f"max_enqueued_batches must be positive; was {self.max_enqueued_batches}"
            )
        if self.enable_large_batch_splitting:
            if self.max_execution_batch_size < 0:
                raise InvalidArgumentError(
                    "max_execution_batch_size must be positive; was "
                    f"{self.max_execution_batch_size}"
                )
            if self.max_batch_size < self.execution_batch_size:
                raise InvalidArgumentError(
                    "When enable_large_batch_splitting is true, input_batch_size_limit must be "
                    "greater than or equal to max_execution_batch_size. "
                    f"(input_batch_size_limit {self.max_batch_size}, "
                    f"max_execution_batch_size {self.execution_batch_size})"
                )
        return checked


def _check_allowed_batch_sizes(sizes: tuple[int, ...], max_batch_size: int) -> None:
    if not sizes:
        return
    # The model server compares the last entry with max_batch_size whether or not large
    # batches are split (bundle_factory_util.cc); it checks this first.
    if sizes[-1] != max_batch_size:
        raise InvalidArgumentError(
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
            f"{sizes[-1]}; expected {max_batch_size}"
        )
    # Rounding up to the next allowed size needs them sorted; upstream only checks this in
    # its library path (CreateBasicBatchingSession), with these words.
    if any(later <= earlier for earlier, later in pairwise(sizes)):
        raise InvalidArgumentError("allowed_batch_sizes entries must be monotonically increasing")
    if sizes[0] < 1:
        raise InvalidArgumentError(f"allowed_batch_sizes entries must be positive; was {sizes[0]}")


def task_too_large_message(size: int, limit: int) -> str:
    """The INVALID_ARGUMENT text for a task with more rows than a queue accepts."""
    return f"Task size {size} is larger than maximum input batch size {limit}"


def batching_params_from_proto(
    proto: BatchingParameters, *, validate: bool = True
) -> BatchingParams:
    """Settings from a ``BatchingParameters`` message; unset wrapper fields keep the defaults."""
    defaults = BatchingParams()

    def wrapped(name: str, default: object) -> Any:
        return getattr(proto, name).value if proto.HasField(name) else default

    params = BatchingParams(
        max_batch_size=int(wrapped("max_batch_size", defaults.max_batch_size)),
        batch_timeout_micros=int(wrapped("batch_timeout_micros", defaults.batch_timeout_micros)),
        max_enqueued_batches=int(wrapped("max_enqueued_batches", defaults.max_enqueued_batches)),
        num_batch_threads=int(wrapped("num_batch_threads", defaults.num_batch_threads)),
        thread_pool_name=str(wrapped("thread_pool_name", defaults.thread_pool_name)),
        allowed_batch_sizes=tuple(int(size) for size in proto.allowed_batch_sizes),
        pad_variable_length_inputs=proto.pad_variable_length_inputs,
        enable_large_batch_splitting=bool(wrapped("enable_large_batch_splitting", False)),
        max_execution_batch_size=int(wrapped("max_execution_batch_size", 0)),
    )
    return params.validated() if validate else params


def parse_batching_parameters(
    text: str, *, source: str | None = None, validate: bool = True
) -> BatchingParams:
    """Settings from text-format BatchingParameters; InvalidArgumentError when they do not parse
    or are invalid. ``source`` names the file the text came from, for upstream's message."""
    proto = parse_proto_text(text, BatchingParameters(), source=source)
    return batching_params_from_proto(proto, validate=validate)


def read_batching_parameters(
    path: str | os.PathLike[str], *, validate: bool = True
) -> BatchingParams:
    """Settings from a text-format BatchingParameters file (``--batching_parameters_file`` or a
    model's ``batching_params.pbtxt``); NotFoundError when it cannot be read."""
    proto = read_proto_text_file(path, BatchingParameters(), what="batching parameters file")
    return batching_params_from_proto(proto, validate=validate)
