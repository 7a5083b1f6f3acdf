"""tensorflow.serving.Input -> serialized examples, as TensorFlow Serving feeds them."""

from __future__ import annotations

import pytest

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow_serving.apis import input_pb2
from runtime.errors import InternalError, InvalidArgumentError
from serving.requests.example_input import serialized_examples


def example(**features: list[float] | list[int] | list[bytes]) -> example_pb2.Example:
    proto = example_pb2.Example()
    for name, values in features.items():
        feature = proto.features.feature[name]
        if all(isinstance(v, bytes) for v in values):
            feature.bytes_list.value.extend(values)
        elif all(isinstance(v, int) for v in values):
            feature.int64_list.value.extend(values)
        else:
            feature.float_list.value.extend(values)
    return proto


def test_example_list_gives_each_example_bytes() -> None:
    # Single-feature examples serialize the same every time (map order can vary otherwise).
    first, second = example(x=[1.0]), example(tag=[b"a", b"b"])
    several = example(x=[2.0], tag=[b"c"], n=[3])
    proto = input_pb2.Input()
    proto.example_list.examples.extend([first, second, several])
    got = serialized_examples(proto)
    assert got[:2] == [first.SerializeToString(), second.SerializeToString()]
    assert [example_pb2.Example.FromString(b) for b in got] == [first, second, several]


def test_context_bytes_come_first_and_the_example_wins_on_shared_keys() -> None:
    context = example(x=[9.0], country=[b"nz"])
    examples = [example(x=[1.0]), example(age=[42])]
    proto = input_pb2.Input()
    proto.example_list_with_context.context.CopyFrom(context)
    proto.example_list_with_context.examples.extend(examples)
    got = serialized_examples(proto)
    tails = [e.SerializeToString() for e in examples]
    assert all(g.endswith(t) for g, t in zip(got, tails, strict=True))
    prefixes = {g[: len(g) - len(t)] for g, t in zip(got, tails, strict=True)}
    assert [example_pb2.Example.FromString(p) for p in prefixes] == [context]
    merged = [example_pb2.Example.FromString(b) for b in got]
    assert merged[0] == example(x=[1.0], country=[b"nz"])
    assert merged[1] == example(x=[9.0], country=[b"nz"], age=[42])


def test_wire_bytes_are_accepted_and_kept_exact() -> None:
    proto = input_pb2.Input()
    proto.example_list.examples.add()  # an empty Example serializes to b""
    proto.example_list.examples.append(example(x=[0.5]))
    assert serialized_examples(proto.SerializeToString()) == [
        b"",
        example(x=[0.5]).SerializeToString(),
    ]


def test_context_without_a_value_adds_nothing() -> None:
    proto = input_pb2.Input()
    proto.example_list_with_context.examples.append(example(x=[3.0]))
    assert serialized_examples(proto) == [example(x=[3.0]).SerializeToString()]


@pytest.mark.parametrize("kind", [None, "example_list", "example_list_with_context"])
def test_empty_input(kind: str | None) -> None:
    proto = input_pb2.Input()
    if kind == "example_list":
        proto.example_list.SetInParent()
    elif kind == "example_list_with_context":
        proto.example_list_with_context.context.CopyFrom(example(x=[1.0]))
    with pytest.raises(InvalidArgumentError, match=r"^Input is empty\.$"):
        serialized_examples(proto)


def test_protobuf_merge_rules_on_the_wire() -> None:
    a, b, c = (example(x=[float(i)]).SerializeToString() for i in range(3))
    first = input_pb2.Input()
    first.example_list.examples.extend([example_pb2.Example.FromString(a)])
    second = input_pb2.Input()
    second.example_list.examples.extend([example_pb2.Example.FromString(b)])
    # The same oneof member twice merges (examples append) ...
    assert serialized_examples(first.SerializeToString() + second.SerializeToString()) == [a, b]
    # ... a different member replaces the earlier one.
    other = input_pb2.Input()
    other.example_list_with_context.examples.extend([example_pb2.Example.FromString(c)])
    assert serialized_examples(first.SerializeToString() + other.SerializeToString()) == [c]


@pytest.mark.parametrize("data", [b"\x0a\x05\x0a", b"\x0a", b"\x0b\x00", b"\x00\x00"])
def test_malformed_wire_bytes(data: bytes) -> None:
    with pytest.raises(InternalError, match=r"^Error parsing serialized input\.$"):
        serialized_examples(data)
