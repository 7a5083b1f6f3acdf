"""HTTP content codings (gzip, deflate) both ways, for the ``/v2`` API.

Request bodies: ``Content-Encoding`` gzip or deflate (a zlib stream, as RFC 9110 defines it; a
raw deflate stream, which some clients send, is accepted too) is inflated up to the body limit;
a body that does not inflate, or an unknown coding, is INVALID_ARGUMENT, and one that inflates
past the limit is ``BodyTooLarge`` (413). Responses: compressed when ``Accept-Encoding`` asks
for gzip or deflate, at the fastest level (tensor data compresses little more at higher ones).

``/v1`` keeps TensorFlow Serving's own handling (``request_body.gunzip``).
"""

from __future__ import annotations

import zlib

from runtime.errors import InvalidArgumentError
from serving.rest.request_body import BodyTooLarge

GZIP, DEFLATE = "gzip", "deflate"
_WBITS = {GZIP: 16 + zlib.MAX_WBITS, DEFLATE: zlib.MAX_WBITS}
LEVEL = 1


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=wbits)
    data = inflater.decompress(body, limit)  # zlib.error when it is not that format
    if inflater.unconsumed_tail:
        raise BodyTooLarge(limit)
    if not inflater.eof:
        raise zlib.error("the stream is truncated")
    return data


def inflate(body: bytes, encoding: bytes | None, limit: int) -> bytes:
    """``body`` without its content coding (``encoding``, the header's value)."""
    if encoding is None:
        return body
    coding = encoding.strip().lower().decode("latin-1")
    if coding in ("", "identity"):
        return body
    if coding not in _WBITS:
        raise InvalidArgumentError(
            f"unsupported Content-Encoding '{coding}': expected gzip, deflate or identity"
        )
    try:
        try:
            return _inflate(body, _WBITS[coding], limit)
        except zlib.error:
            if coding != DEFLATE:
                raise
            return _inflate(body, -zlib.MAX_WBITS, limit)  # raw deflate, without zlib's frame
    except zlib.error as err:
        raise InvalidArgumentError(f"the {coding} request body does not inflate: {err}") from None


def _quality(params: list[str]) -> float:
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0


def accepted(accept_encoding: bytes | None) -> str | None:
    """The coding to answer with: gzip or deflate, whichever ``Accept-Encoding`` prefers (gzip
    on a tie, and for ``*``); None for neither."""
    if not accept_encoding:
        return None
    best, best_q = None, 0.0
    for item in accept_encoding.decode("latin-1").split(","):
        name, *params = item.split(";")
        coding = name.strip().lower()
        if coding == "*":
            coding = GZIP
        if coding not in _WBITS:
            continue
        q = _quality(params)
        if q > best_q or (q == best_q and coding == GZIP and q > 0):
            best, best_q = coding, q
    return best


def compress(body: bytes, coding: str) -> bytes:
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS[coding])
    return compressor.compress(body) + compressor.flush()
