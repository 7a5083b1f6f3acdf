"""CPU kernels: string tensors: case, stripping, lengths, substrings, base64, number parsing.

The family is spread over sibling modules imported here (the family list in ``runtime.kernels``
names only this one): ``string_hash_ops`` (StringToHashBucket*, Fingerprint), ``string_split``
(split, join, n-grams), ``string_regex`` (RE2 regexes), ``string_format`` (AsString),
``string_unicode`` (UnicodeDecode/Encode) and ``ragged_ops`` (RaggedTensorToTensor and friends).

String tensors are object arrays of ``bytes``; every kernel here is a loop over Python ``bytes``
methods, which are C loops themselves.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable

import numpy as np

from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels import (  # noqa: F401  (imported for their registrations)
    ragged_ops,
    string_format,
    string_hash_ops,
    string_regex,
    string_split,
    string_unicode,
)
from runtime.kernels.registry import NodeContext, kernel
from runtime.kernels.string_common import (
    attr_text,
    flat_strings,
    map_strings,
    reject_when_run,
    shape_text,
    string_array,
)


def _utf8_case(convert: Callable[[str], str]) -> Callable[[bytes], bytes]:
    def apply(s: bytes) -> bytes:
        # TensorFlow hands ICU a C string, so a NUL byte ends the text; invalid sequences
        # become U+FFFD as ICU's converter (and Python's "replace") substitutes them.
        return convert(s.split(b"\0", 1)[0].decode("utf-8", "replace")).encode("utf-8")

    return apply


@kernel("StringLower", "StringUpper")
def string_case(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    encoding = attr_text(node.attr("encoding"))
    lower = node.op == "StringLower"
    if encoding == "":
        # bytes.lower/upper touch ASCII letters only, as absl::AsciiStrToLower does.
        method = bytes.lower if lower else bytes.upper
        return lambda x: map_strings(method, x)
    if encoding != "utf-8":
        return reject_when_run(
            InvalidArgumentError(
                f"only utf-8 or '' (no encoding) is supported, received {encoding}"
            )
        )
    convert = _utf8_case(str.lower if lower else str.upper)
    return lambda x: map_strings(convert, x)


@kernel("StringStrip")
def string_strip(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    # bytes.strip() removes exactly absl's ASCII whitespace: space, \t, \n, \v, \f, \r.
    return lambda x: map_strings(bytes.strip, x)


def _unit(node: NodeContext) -> str:
    unit = attr_text(node.attr("unit"))
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise InvalidArgumentError(f"Invalid unit argument: {unit}; must be BYTE or UTF8_CHAR")
    return unit


def utf8_char_counts(strings: list[bytes]) -> np.ndarray:
    """Characters per string, counting every byte that is not a continuation byte (10xxxxxx)."""
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    buf = np.frombuffer(b"".join(strings), dtype=np.uint8)
    leads = np.concatenate(([0], np.cumsum((buf & 0xC0) != 0x80)))
    ends = np.cumsum(lens)
    counts: np.ndarray = leads[ends] - leads[ends - lens]
    return counts


@kernel("StringLength")
def string_length(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    unit = _unit(node)

    def length(x: np.ndarray) -> np.ndarray:
        strings = flat_strings(x)
        if unit == "BYTE":
            counts = np.fromiter(map(len, strings), dtype=np.int32, count=len(strings))
        else:
            counts = utf8_char_counts(strings).astype(np.int32)
        return counts.reshape(x.shape)

    return length


# --- Substr ------------------------------------------------------------------------------------


def _is_trail(b: int) -> bool:
    return 0x80 <= b < 0xC0


def _forward(s: bytes, count: int, pos: int) -> tuple[bool, int]:
    """Move ``pos`` forward ``count`` UTF-8 characters; False if the string ends first."""
    size, done = len(s), 0
    while done < count and pos < size:
        pos += 1
        while pos < size and _is_trail(s[pos]):
            pos += 1
        done += 1
    return done == count, pos


def _back(s: bytes, count: int, pos: int) -> tuple[bool, int]:
    """Move ``pos`` back ``count`` UTF-8 characters; False if the string starts first."""
    done = 0
    while done < count and pos > 0:
        pos -= 1
        while _is_trail(s[pos]) and pos > 0:
            pos -= 1
        done += 1
    return done == count, pos


def _utf8_span(s: bytes, pos: int, length: int) -> tuple[int, int] | None:
    """Byte range [start, end) of ``length`` characters at character ``pos``; None: out of range."""
    if pos >= 0:
        ok, start = _forward(s, pos, 0)
        if not ok:
            return None
        # The length is capped at the end of the string (a negative one selects nothing).
        _, end = _forward(s, length, start)
        return start, max(end, start)
    skip = max(0, -pos - length)
    ok, end = _back(s, skip, len(s))
    if not ok:
        return None
    ok, start = _back(s, -pos - skip, end)
    if not ok:
        return None
    return start, end


def _substr_one(s: bytes, pos: int, length: int, utf8: bool, where: str) -> bytes:
    if utf8:
        span = _utf8_span(s, pos, length)
        if span is None:
            raise InvalidArgumentError(f"pos {pos} out of range for string at index {where}")
        return s[span[0] : span[1]]
    start = pos + len(s) if pos < 0 else pos
    if not 0 <= start <= len(s):
        text = s.decode("utf-8", "backslashreplace")
        raise InvalidArgumentError(f"pos {pos} out of range for string b'{text}' at index {where}")
    # A negative length reads to the end, as string_view::substr clamps its unsigned length.
    return s[start:] if length < 0 else s[start : start + length]


@kernel("Substr")
def substr(node: NodeContext) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    utf8 = _unit(node) == "UTF8_CHAR"

    def run(x: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
        if pos.shape != length.shape:
            raise InvalidArgumentError(
                "pos and len should have the same shape, got: "
                f"{shape_text(pos.shape)} vs. {shape_text(length.shape)}"
            )
        if pos.ndim == 0 or pos.shape == x.shape:
            strings = flat_strings(x)
            p = np.broadcast_to(pos, x.shape).ravel().tolist()
            n = np.broadcast_to(length, x.shape).ravel().tolist()
            out = [_substr_one(s, p[i], n[i], utf8, str(i)) for i, s in enumerate(strings)]
            return string_array(out, x.shape)
        try:
            shape = np.broadcast_shapes(x.shape, pos.shape)
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {shape_text(x.shape)} vs. {shape_text(pos.shape)}"
            ) from None
        if len(shape) > 2:
            raise UnimplementedError(
                f"Substr broadcast not implemented for {len(shape)} dimensions"
            )
        strings = np.broadcast_to(x, shape).ravel().tolist()
        starts = np.broadcast_to(pos, shape).ravel().tolist()
        lengths = np.broadcast_to(length, shape).ravel().tolist()
        out = []
        for flat, index in enumerate(np.ndindex(*shape)):
            where = str(index[0]) if utf8 or len(shape) == 1 else f"({index[0]}, {index[1]})"
            out.append(_substr_one(strings[flat], starts[flat], lengths[flat], utf8, where))
        return string_array(out, shape)

    return run


# --- base64 (web-safe alphabet, as TensorFlow's base64.cc) ---------------------------------------

_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def _b64_decode(data: bytes) -> bytes:
    if not data:
        return b""
    end = len(data)
    # All but the last 1..4 characters are whole groups; padding may close the last group only.
    body_end = ((end - 1) // 4) * 4
    body, tail = data[:body_end], data[body_end:]
    if body.translate(None, _B64_ALPHABET):
        raise InvalidArgumentError("Invalid character found in base64.")
    if len(tail) == 4:
        if tail[2:] == b"==":
            tail = tail[:2]
        elif tail[3:] == b"=":
            tail = tail[:3]
    if len(tail) == 1:
        raise InvalidArgumentError("Base64 string length cannot be 1 modulo 4.")
    if tail.translate(None, _B64_ALPHABET):
        raise InvalidArgumentError("Invalid character found in base64.")
    # The tail is padded with the alphabet's zero digit; its leftover bits are ignored.
    padded = tail + b"A" * (4 - len(tail))
    decoded = binascii.a2b_base64((body + padded).translate(_TO_STANDARD))
    return decoded[: len(decoded) - 3 + len(tail) - 1]


@kernel("DecodeBase64")
def decode_base64(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: map_strings(_b64_decode, x)


@kernel("EncodeBase64")
def encode_base64(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    pad = bool(node.attr("pad"))

    def encode(s: bytes) -> bytes:
        text = binascii.b2a_base64(s, newline=False).translate(bytes.maketrans(b"+/", b"-_"))
        return text if pad else text.rstrip(b"=")

    return lambda x: map_strings(encode, x)


# --- StringToNumber ------------------------------------------------------------------------------

# What absl's SimpleAtof/SimpleAtoi accept: ASCII whitespace around the number, decimal or hex
# floats, inf/infinity/nan in any case; integers are plain decimal with an optional sign.
# Digits match one way only (not as `[0-9]+\.?[0-9]*`, which splits a run of digits n ways), so
# a failing match of a long run stays linear rather than quadratic.
_FLOAT_RE = re.compile(
    rb"[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?i:inf|infinity|nan)))[ \t\n\v\f\r]*"
)
_INT_RE = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)[ \t\n\v\f\r]*")


def _not_a_number(s: bytes) -> InvalidArgumentError:
    text = s.decode("utf-8", "replace")
    return InvalidArgumentError(f"StringToNumberOp could not correctly convert string: {text}")


def _parse_float(s: bytes) -> float:
    match = _FLOAT_RE.fullmatch(s)
    if match is None:
        raise _not_a_number(s)
    text = match.group(1).decode()
    if "x" in text or "X" in text:
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        if "p" not in body and "P" not in body:
            body += "p0"
        try:
            return sign * float.fromhex(body)
        except OverflowError:
            return sign * float("inf")
    return float(text)


@kernel("StringToNumber")
def string_to_number(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    out_type = node.np_dtype("out_type")
    if out_type.kind == "f":

        def to_float(x: np.ndarray) -> np.ndarray:
            values = np.array([_parse_float(s) for s in flat_strings(x)], dtype=np.float64)
            with np.errstate(over="ignore"):
                return values.astype(out_type).reshape(x.shape)

        return to_float
    info = np.iinfo(out_type)

    def to_int(x: np.ndarray) -> np.ndarray:
        values = []
        for s in flat_strings(x):
            match = _INT_RE.fullmatch(s)
            value = int(match.group(1)) if match else None
            if value is None or not info.min <= value <= info.max:
                raise _not_a_number(s)
            values.append(value)
        return np.array(values, dtype=out_type).reshape(x.shape)

    return to_int
