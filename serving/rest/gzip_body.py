"""Gzipped request bodies (``Content-Encoding: gzip``), inflated as TensorFlow Serving does."""

from __future__ import annotations

import logging
import zlib

log = logging.getLogger("graphserve")

MAX_GUNZIPPED_BYTES = 100 << 20  # TensorFlow Serving's cap on an uncompressed request body


def gunzip(body: bytes, limit: int = MAX_GUNZIPPED_BYTES) -> bytes:
    """The uncompressed body, or b"" when it is not valid gzip or exceeds ``limit`` bytes
    (TensorFlow Serving then sees an empty body)."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, limit)
    except zlib.error:
        log.error("Failed to uncompress the gzipped body")
        return b""
    if inflater.unconsumed_tail:
        log.error("Gzipped body exceeds %d bytes uncompressed", limit)
        return b""
    return data
