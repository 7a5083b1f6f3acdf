"""CPU kernels: Assert, Print, PrintV2 and StringFormat (``tensorflow/core/kernels/logging_ops.cc``,
``string_format_op.cc``).

Print writes where a server's operator looks, not to a raw stream: one INFO record on the
``graphserve.print`` logger per call (TensorFlow writes the same line to stderr). PrintV2 follows
its ``output_stream`` attr as TensorFlow does: ``stdout``/``stderr`` are written directly, the
``log(...)`` forms go to that logger at their level.

Printing is rate-limited per node (``runtime.print_rate_limit``): a model that prints on every
request writes a few lines a second, and a WARNING on the same logger says how many it held back.
A PrintV2 to a ``file://`` stream never gets here: the model policy refuses it at load.
"""

from __future__ import annotations

import itertools
import logging
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.tensor_list import shape_str
from runtime.kernels.tensor_summary import summarize
from runtime.print_rate_limit import LineLimiter

log = logging.getLogger("graphserve.print")

_STREAMS = ("stdout", "stderr", "log(info)", "log(warning)", "log(error)")
_LOG_LEVELS = {"log(info)": logging.INFO, "log(warning)": logging.WARNING,
               "log(error)": logging.ERROR}


def _text(value: bytes) -> str:
    # Messages are text; TensorFlow keeps bytes that are not UTF-8 as they are.
    return value.decode("utf-8", "backslashreplace")


def _admit(node: NodeContext, limiter: LineLimiter) -> bool:
    """Whether this line is written; first reports the lines held back before it."""
    write, suppressed = limiter.admit()
    if suppressed:
        log.warning(
            "%s node '%s': %d line%s not printed (more than %d a second)",
            node.op, node.name, suppressed, "s" if suppressed != 1 else "", limiter.limit,
        )
    return write


def _attr_bytes(value: Any) -> bytes:
    # String attrs arrive decoded with surrogateescape (runtime.attrs): this gives the bytes back.
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


@kernel("Assert")
def assert_(node: NodeContext) -> Callable[..., Any]:
    summarize_count = int(node.attr("summarize", 3))

    def check(condition: Any, *data: Any) -> None:
        cond = np.asarray(condition)
        if cond.ndim != 0:
            raise InvalidArgumentError(f"In[0] should be a scalar: {shape_str(cond.shape)}")
        if bool(cond):
            return
        parts = [f"[{_text(summarize(np.asarray(x), summarize_count, False))}]" for x in data]
        raise InvalidArgumentError("assertion failed: " + " ".join(parts))

    return check


@kernel("Print")
def print_(node: NodeContext) -> Callable[..., Any]:
    message = _text(_attr_bytes(node.attr("message", "")))
    first_n = int(node.attr("first_n", -1))
    summarize_count = int(node.attr("summarize", 3))
    calls = itertools.count()  # per kernel, as TensorFlow counts per kernel instance
    limiter = LineLimiter()

    def show(value: Any, *data: Any) -> Any:
        if (first_n < 0 or next(calls) < first_n) and _admit(node, limiter):
            parts = [f"[{_text(summarize(np.asarray(x), summarize_count, False))}]" for x in data]
            log.info("%s%s", message, "".join(parts))
        return value

    return show


@kernel("PrintV2")
def print_v2(node: NodeContext) -> Callable[..., Any]:
    stream = str(node.attr("output_stream", "stderr"))
    end = _attr_bytes(node.attr("end", "\n"))
    limiter = LineLimiter()

    def show(text: Any) -> None:
        array = np.asarray(text)
        if array.ndim != 0:
            raise InvalidArgumentError(
                f"Input is expected to be scalar, but got {shape_str(array.shape)}"
            )
        item = array.item()
        line = _text((item if isinstance(item, bytes) else str(item).encode()) + end)
        if stream in _STREAMS and not _admit(node, limiter):
            return
        if stream in ("stdout", "stderr"):
            out = sys.stdout if stream == "stdout" else sys.stderr
            out.write(line)
            out.flush()
        elif stream in _LOG_LEVELS:
            log.log(_LOG_LEVELS[stream], "%s", line.removesuffix("\n"))
        elif stream.startswith("file://"):
            # A served model does not write files on the server.
            raise UnimplementedError(f"PrintV2 to a file is not supported: {stream}")
        else:
            raise InvalidArgumentError(
                f"Unknown output stream: {stream}, Valid streams are: {' '.join(_STREAMS)}"
            )

    return show


def _split_template(template: bytes, placeholder: bytes) -> list[bytes]:
    if not placeholder:  # absl::StrSplit by an empty delimiter: one piece per character
        return [template[i:i + 1] for i in range(len(template))] or [b""]
    return template.split(placeholder)


@kernel("StringFormat")
def string_format(node: NodeContext) -> Callable[..., Any]:
    pieces = _split_template(
        _attr_bytes(node.attr("template", "%s")), _attr_bytes(node.attr("placeholder", "%s"))
    )
    summarize_count = int(node.attr("summarize", 3))
    types = node.attr("T", [])
    num_inputs = len(types) if isinstance(types, (list, tuple)) else int(types)
    if len(pieces) - 1 != num_inputs:
        raise InvalidArgumentError(
            "num placeholders in template and num inputs must match: "
            f"{len(pieces) - 1} vs. {num_inputs}"
        )

    def format_(*inputs: Any) -> np.ndarray:
        out = [pieces[0]]
        for value, piece in zip(inputs, pieces[1:]):
            out += [summarize(np.asarray(value), summarize_count, True), piece]
        result = np.empty((), dtype=object)
        result[()] = b"".join(out)
        return result

    return format_
