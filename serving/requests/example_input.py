"""tensorflow.serving.Input -> the serialized tf.Examples a classify/regress signature is fed.

TensorFlow Serving never re-encodes the examples: it reads the Input's wire bytes as if every
Example were an opaque ``bytes`` field and feeds those bytes. With a context, each entry is the
context's bytes followed by the example's bytes; parsing that concatenation merges the two
messages, so the example's features win over the context's on a shared key.

We do the same with a small walk over the protobuf wire format, which keeps the bytes exact and
never builds an Example object.
"""

from __future__ import annotations

from typing import Any

from runtime.errors import InternalError, InvalidArgumentError

# Field numbers of input.proto.
_EXAMPLE_LIST = 1  # Input.example_list
_EXAMPLE_LIST_WITH_CONTEXT = 2  # Input.example_list_with_context
_EXAMPLES = 1  # ExampleList.examples, ExampleListWithContext.examples
_CONTEXT = 2  # ExampleListWithContext.context

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class _WireError(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _WireError
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of one message as (field number, payload), in wire order;
    fields of other wire types are skipped, as a parser skips unknown fields."""
    out = []
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise _WireError
        if wire_type == _VARINT:
            _, pos = _varint(data, pos)
        elif wire_type == _FIXED64:
            pos += 8
        elif wire_type == _FIXED32:
            pos += 4
        elif wire_type == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise _WireError
            out.append((number, data[pos : pos + size]))
            pos += size
        else:  # groups (3, 4) are not used by these messages; 6, 7 do not exist
            raise _WireError
        if pos > end:
            raise _WireError
    return out


def _split(data: bytes) -> tuple[int | None, list[bytes], bytes]:
    """(kind, example bytes, context bytes) of a serialized Input, with protobuf's merge rules:
    the last oneof member on the wire wins, a repeated occurrence of the same member merges
    into it (examples append; a bytes context is replaced)."""
    kind: int | None = None
    examples: list[bytes] = []
    context = b""
    for number, payload in _fields(data):
        if number not in (_EXAMPLE_LIST, _EXAMPLE_LIST_WITH_CONTEXT):
            continue
        if number != kind:
            kind, examples, context = number, [], b""
        for inner_number, inner in _fields(payload):
            if inner_number == _EXAMPLES:
                examples.append(inner)
            elif inner_number == _CONTEXT and number == _EXAMPLE_LIST_WITH_CONTEXT:
                context = inner
    return kind, examples, context


def serialized_examples(input_proto: Any) -> list[bytes]:
    """The serialized examples of a ``tensorflow.serving.Input`` (message or its wire bytes),
    each prefixed with the context's bytes when the input has one.

    Raises InvalidArgumentError("Input is empty.") when there are no examples, as TensorFlow
    Serving does for an unset input, an empty list, or a context without examples.
    """
    if isinstance(input_proto, (bytes, bytearray, memoryview)):
        data = bytes(input_proto)
    else:
        data = input_proto.SerializeToString()
    try:
        kind, examples, context = _split(data)
    except _WireError:
        raise InternalError("Error parsing serialized input.") from None
    if not examples:
        raise InvalidArgumentError("Input is empty.")
    if kind == _EXAMPLE_LIST_WITH_CONTEXT and context:
        return [context + example for example in examples]
    return examples
