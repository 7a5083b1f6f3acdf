"""CPU kernels: DecodeRaw and DecodePaddedRaw, bytes reinterpreted as numbers.

Each string becomes a row of ``out_type`` values read in the byte order ``little_endian`` names
(a complex number's two parts are swapped separately, as TensorFlow does). DecodeRaw needs every
string of the same length, a multiple of the type's size; DecodePaddedRaw cuts or zero-pads each
string to ``fixed_length`` bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import flat_strings, shape_text


def _wire_dtype(node: NodeContext) -> tuple[np.dtype, np.dtype, str]:
    """The output dtype, the unsigned type its bytes are swapped as, and TensorFlow's name."""
    out_type = node.attr("out_type")
    dtype = dtypes.to_numpy(out_type)
    # Swapping is done on unsigned words (bfloat16 has no byte-swapped numpy form); a complex
    # number's real and imaginary parts are separate words.
    word = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    order = "<" if node.attr("little_endian") else ">"
    return dtype, np.dtype(f"{order}u{word}"), dtypes.short_name(out_type)


def _read(data: bytes, wire: np.dtype, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    words = np.frombuffer(data, dtype=wire)
    # astype makes a writable copy, off the input bytes, in the machine's byte order.
    return words.astype(wire.newbyteorder("=")).view(dtype).reshape(shape)


@kernel("DecodeRaw")
def decode_raw(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    dtype, wire, name = _wire_dtype(node)

    def run(raw: np.ndarray) -> np.ndarray:
        strings = flat_strings(raw)
        size = len(strings[0]) if strings else 0
        for i, s in enumerate(strings):
            if len(s) != size:
                raise InvalidArgumentError(
                    "DecodeRaw requires input strings to all be the same size, but element "
                    f"{i} has size {size} != {len(s)}"
                )
        if size == 0:
            return np.zeros(raw.shape + (0,), dtype)
        if size % dtype.itemsize:
            raise InvalidArgumentError(
                f"Input to DecodeRaw has length {size} that is not a multiple of "
                f"{dtype.itemsize}, the size of {name}"
            )
        return _read(b"".join(strings), wire, dtype, raw.shape + (size // dtype.itemsize,))

    return run


@kernel("DecodePaddedRaw")
def decode_padded_raw(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    dtype, wire, _ = _wire_dtype(node)

    def run(raw: np.ndarray, fixed_length: np.ndarray) -> np.ndarray:
        if fixed_length.ndim != 0:
            raise InvalidArgumentError(
                f"k must be scalar, got shape {shape_text(fixed_length.shape)}"
            )
        length = int(fixed_length)
        # TensorFlow takes the remainder of the length as an unsigned number; for a power-of-two
        # type size that is Python's non-negative remainder.
        if length % dtype.itemsize:
            raise InvalidArgumentError(
                f"fixed_length ({length}) must be a multiple of the size of out_type "
                f"({dtype.itemsize})"
            )
        if length <= 0:
            raise InvalidArgumentError(f"fixed_length ({length}) must be greater than zero.")
        strings = flat_strings(raw)
        data = b"".join(s[:length].ljust(length, b"\0") for s in strings)
        return _read(data, wire, dtype, raw.shape + (length // dtype.itemsize,))

    return run
