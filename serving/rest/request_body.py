"""A request's body, bounded: refused before it is buffered when it is larger than allowed.

A body announced larger than the limit (``Content-Length``) is refused before any of it is
read; a body that turns out larger while it streams in is refused as soon as it crosses the
limit, keeping only what was read so far. A gzipped body (``Content-Encoding: gzip``) is
inflated up to the same limit, as TensorFlow Serving inflates it up to its own cap.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("graphserve")

Receive = Callable[[], Awaitable[dict[str, Any]]]


class BodyTooLarge(Exception):
    """The body exceeds the limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body is larger than the {limit} bytes allowed")


async def read_body(receive: Receive, limit: int, content_length: bytes | None) -> bytes | None:
    """The whole body; None when the client disconnects first; ``BodyTooLarge`` beyond
    ``limit`` bytes."""
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise BodyTooLarge(limit)
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise BodyTooLarge(limit)
    if not message.get("more_body", False):
        return body
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def gunzip(body: bytes, limit: int) -> bytes:
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
