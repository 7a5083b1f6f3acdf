"""How many threads one kernel may use, from TensorFlow Serving's three flags."""

from __future__ import annotations

import pytest

from runtime.errors import InvalidArgumentError
from serving.config import ServerOptions
from serving.parallelism import ALL_THREE, AUTOMATIC_MAX, intra_op_threads


@pytest.mark.parametrize(
    ("session", "intra", "inter", "threads"),
    [
        (0, 0, 0, 6),  # automatic: every core
        (3, 0, 0, 3),  # the session flag sets both pools
        (0, 2, 0, 2),
        (3, 2, 0, 2),  # the intra-op flag wins over the session flag
        (3, 0, 4, 3),
        (0, 1, 9, 1),  # inter-op alone changes nothing here
    ],
)
def test_threads_per_kernel(session: int, intra: int, inter: int, threads: int) -> None:
    options = ServerOptions(tensorflow_session_parallelism=session,
                            tensorflow_intra_op_parallelism=intra,
                            tensorflow_inter_op_parallelism=inter)
    assert intra_op_threads(options, cpus=6) == threads


def test_automatic_is_every_core_up_to_a_cap() -> None:
    assert intra_op_threads(ServerOptions(), cpus=64) == AUTOMATIC_MAX
    assert intra_op_threads(ServerOptions(), cpus=1) == 1
    # Asked for, more than the cap is given.
    assert intra_op_threads(ServerOptions(tensorflow_intra_op_parallelism=64), cpus=64) == 64


def test_all_three_is_refused_as_upstream() -> None:
    options = ServerOptions(tensorflow_session_parallelism=1,
                            tensorflow_intra_op_parallelism=1,
                            tensorflow_inter_op_parallelism=1)
    with pytest.raises(InvalidArgumentError) as info:
        intra_op_threads(options)
    assert info.value.message == ALL_THREE


def test_automatic_shares_the_cores_out_over_the_workers() -> None:
    assert intra_op_threads(ServerOptions(workers=2), cpus=6) == 3
    assert intra_op_threads(ServerOptions(workers=4), cpus=2) == 1
    # Asked for, it is given to each worker as it is.
    assert intra_op_threads(ServerOptions(workers=2, tensorflow_intra_op_parallelism=4), cpus=2) == 4
