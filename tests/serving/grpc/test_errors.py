"""Status codes and messages on the wire."""

from __future__ import annotations

import grpc

from runtime.errors import Code, FailedPreconditionError
from serving.grpc.errors import grpc_code, grpc_status, status_message


def test_every_code_maps_to_the_grpc_code_of_the_same_number() -> None:
    for code in Code:
        assert grpc_code(code).value[0] == int(code)
        assert grpc_code(code).name == code.name


def test_messages_are_cut_at_1024_characters() -> None:
    assert status_message("x" * 1024) == "x" * 1024
    assert status_message("x" * 1025) == "x" * 1024 + "...TRUNCATED"
    assert grpc_status(FailedPreconditionError("no")) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                          "no")
