"""Threads inside a run: the shared pool's contract, and the kernels that spread their blocks
over it answering exactly what they answer on one thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from runtime import intra_op
from runtime.kernels import nn_ops_conv_gemm
from runtime.kernels.nn_ops_common import window
from runtime.kernels.nn_ops_conv_winograd import applies as winograd_applies
from runtime.kernels.registry import instantiate
from tests.runtime.kernels.test_nn_ops_conv_algorithms import (
    conv_attrs,
    conv_shape,
    pads_of,
    reference_conv,
    reference_depthwise,
)

RNG = np.random.default_rng(3)


@pytest.fixture
def two_threads() -> Iterator[None]:
    intra_op.set_threads(2)
    try:
        yield
    finally:
        intra_op.set_threads(1)


def test_every_block_runs_once(two_threads: None) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        with lock:
            seen.append(i)

    intra_op.run_blocks(work, 37)
    assert sorted(seen) == list(range(37))


def test_blocks_run_on_two_threads(two_threads: None) -> None:
    # Two blocks that each wait for the other to start: only two threads at once finish them.
    started = [threading.Event(), threading.Event()]

    def work(i: int) -> None:
        started[i].set()
        assert started[1 - i].wait(10), "the other block never started beside this one"

    intra_op.run_blocks(work, 2)


def test_an_error_in_a_block_reaches_the_caller(two_threads: None) -> None:
    ran: list[int] = []

    def work(i: int) -> None:
        ran.append(i)
        if i == 5:
            raise ValueError("block 5")

    with pytest.raises(ValueError, match="block 5"):
        intra_op.run_blocks(work, 200)
    # Blocks not yet handed out when it was raised never run (one in flight beside it may).
    assert 5 in ran and len(ran) < 200


def test_a_late_pool_thread_takes_fewer_blocks(two_threads: None) -> None:
    # The pool's thread is held while the caller starts: the caller goes on taking blocks, and
    # the pool's thread, once free, takes what is left; together they run each once.
    release = threading.Event()
    holder = threading.Thread(target=intra_op.run_blocks,
                              args=(lambda i: release.wait(10) if i == 1 else None, 2))
    holder.start()
    time.sleep(0.2)  # the pool's thread is inside block 1 of the holder
    threads_of: dict[int, str] = {}

    def work(i: int) -> None:
        if i == 3:
            release.set()  # the pool's thread is free from here on
        time.sleep(0.01)
        threads_of[i] = threading.current_thread().name

    intra_op.run_blocks(work, 40)
    holder.join(10)
    assert sorted(threads_of) == list(range(40))
    caller = threading.current_thread().name
    assert [threads_of[i] for i in range(4)] == [caller] * 4  # before the pool was free
    assert set(threads_of.values()) != {caller}  # it joined for what was left (360 ms of it)


def test_a_busy_pool_never_makes_the_caller_wait_for_it(two_threads: None) -> None:
    # The pool's one worker is held; the caller runs every block itself.
    release = threading.Event()
    holder = threading.Thread(target=intra_op.run_blocks,
                              args=(lambda i: release.wait(10) if i == 1 else None, 2))
    holder.start()
    time.sleep(0.2)  # the worker is inside block 1 of the holder
    ran: list[int] = []
    start = time.monotonic()
    intra_op.run_blocks(ran.append, 6)
    assert sorted(ran) == list(range(6)) and time.monotonic() - start < 5
    release.set()
    holder.join(10)


def test_one_thread_runs_on_the_caller() -> None:
    assert intra_op.threads() == 1
    names: set[str] = set()
    intra_op.run_blocks(lambda i: names.add(threading.current_thread().name), 4)
    assert names == {threading.current_thread().name}


# Big enough to be spread (above intra_op.PARALLEL_MIN_MACS), one case per algorithm.
CONV = [
    ("patches_rows_of_one_image", (1, 56, 56, 32), (3, 3, 32, 24), (1, 1), "SAME"),
    ("patches_images", (8, 14, 14, 64), (2, 2, 64, 64), (1, 1), "SAME"),
    ("patches_strided", (1, 57, 57, 24), (3, 3, 24, 48), (2, 2), "VALID"),
    ("pointwise", (1, 56, 56, 64), (1, 1, 64, 128), (1, 1), "VALID"),
    # Too few rows to share: the threads share the filter's columns.
    ("patches_columns", (1, 7, 7, 256), (2, 2, 256, 200), (1, 1), "SAME"),
    # Winograd: blocks of tile rows, of whole images, and (7x7: 16 tiles) the filter's
    # columns, each thread transforming the input itself.
    ("winograd_tile_rows", (1, 56, 56, 64), (3, 3, 64, 64), (1, 1), "SAME"),
    ("winograd_images", (8, 14, 14, 64), (3, 3, 64, 64), (1, 1), "SAME"),
    ("winograd_columns", (1, 7, 7, 256), (3, 3, 256, 200), (1, 1), "SAME"),
    ("pointwise_columns", (1, 7, 7, 512), (1, 1, 512, 520), (1, 1), "VALID"),
    # Few input channels: the threads share each image's output rows, in unequal ranges.
    ("channel_major_rows", (2, 64, 64, 3), (7, 7, 3, 64), (2, 2), "SAME"),
]
DEPTHWISE = [
    ("depthwise", (1, 56, 56, 96), (3, 3, 96, 1), (1, 1), "SAME"),
    # The grid way (a multiplier of 2), on blocks of unequal width: images 0-4, then 5-7.
    ("depthwise_grid_unequal_blocks", (8, 19, 19, 128), (3, 3, 128, 2), (1, 1), "SAME"),
    # The tap-by-tap way, its chunks of rows shared out.
    ("depthwise_taps", (8, 19, 19, 256), (3, 3, 256, 1), (1, 1), "SAME"),
    ("depthwise_strided_multiplier", (2, 29, 29, 40), (5, 5, 40, 2), (2, 2), "SAME"),
    # Several chunks of rows to an image, even on one thread: each lays out its own padded
    # rows (phases for the stride, zero rows above and below) in a buffer the others reuse.
    ("depthwise_taps_strided_chunks", (1, 112, 112, 96), (5, 5, 96, 1), (2, 2), "SAME"),
    ("depthwise_taps_padded_chunks", (1, 112, 112, 32), (3, 3, 32, 1), (1, 1), "SAME"),
    ("depthwise_taps_unpadded_chunks", (1, 114, 114, 64), (3, 3, 64, 1), (1, 1), "VALID"),
]


@pytest.mark.parametrize("case", CONV + DEPTHWISE, ids=[c[0] for c in CONV + DEPTHWISE])
def test_spread_kernels_answer_what_one_thread_answers(case: tuple) -> None:
    name, x_shape, f_shape, strides, padding = case
    shape = conv_shape(x_shape, f_shape, strides, (1, 1), padding)
    assert winograd_applies(shape) == name.startswith("winograd")
    x = RNG.standard_normal(x_shape).astype(np.float32)
    f = RNG.standard_normal(f_shape).astype(np.float32)
    op = "Conv2D" if (case in CONV) else "DepthwiseConv2dNative"
    kernel = instantiate(op, conv_attrs(strides, (1, 1), padding))
    serial = kernel(x, f)
    # More threads than cores: the shares run in every order, any of them ahead.
    intra_op.set_threads(4)
    try:
        spread = kernel(x, f)
        # Scratch reused on both threads, with the threads' progress in every interleaving
        # the calls happen to give (a buffer shared by mistake shows in some).
        for _ in range(15):
            np.testing.assert_array_equal(kernel(x, f), spread)
    finally:
        intra_op.set_threads(1)
    # Blocks of other sizes: BLAS may round the products' sums differently, never more.
    np.testing.assert_allclose(spread, serial, rtol=1e-5, atol=1e-6 * np.abs(serial).max())
    pads = pads_of(padding, x_shape[1:3], f_shape[:2], strides, (1, 1), None)
    reference = reference_conv if op == "Conv2D" else reference_depthwise
    np.testing.assert_allclose(spread, reference(x, f, strides, (1, 1), pads), rtol=1e-4,
                               atol=1e-4)


def test_channel_major_shares_the_rows_of_blocks_of_several_images(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The daemon's blocks (BLAS on one thread): 3 images of 168 grid cells to a block.
    monkeypatch.setattr(nn_ops_conv_gemm, "BLAS_SINGLE_THREADED", True)
    x = RNG.standard_normal((8, 12, 12, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 3, 160)).astype(np.float32)
    rows, cols = (window(12, 3, 1, 1, "SAME") for _ in range(2))
    shape = nn_ops_conv_gemm.ConvShape(8, 12, 12, 3, 3, 3, 160, (1, 1), (1, 1), rows, cols,
                                       np.dtype(np.float32))
    algorithm = nn_ops_conv_gemm.choose(shape)
    assert isinstance(algorithm, nn_ops_conv_gemm.ChannelMajor)
    assert algorithm.blocks == [(0, 3), (3, 6), (6, 8)]
    weights = algorithm.prepare(f, None)
    serial = algorithm(x, weights, None)
    intra_op.set_threads(4)
    try:
        assert len(nn_ops_conv_gemm.row_parts(12, 3 * 168 * 28 * 160)) > 1
        for _ in range(15):
            np.testing.assert_allclose(algorithm(x, weights, None), serial, rtol=1e-5,
                                       atol=1e-6 * np.abs(serial).max())
    finally:
        intra_op.set_threads(1)
    np.testing.assert_allclose(serial, reference_conv(x, f, (1, 1), (1, 1), ((1, 1), (1, 1))),
                               rtol=1e-4, atol=1e-4)


def test_a_large_max_pool_is_spread_and_answers_what_one_thread_answers() -> None:
    x = RNG.standard_normal((2, 75, 70, 64)).astype(np.float32)
    kernel = instantiate("MaxPool", {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1],
                                     "padding": "SAME"})
    serial = kernel(x)
    intra_op.set_threads(4)
    try:
        for _ in range(15):  # every interleaving of the shares the calls give
            np.testing.assert_array_equal(kernel(x), serial)
    finally:
        intra_op.set_threads(1)
    # SAME pads 75 rows by 1 on each side, 70 columns by 1 after only.
    padded = np.pad(x, ((0, 0), (1, 1), (0, 1), (0, 0)), constant_values=-np.inf)
    windows = [padded[:, i:i + 75:2, j:j + 69:2] for i in range(3) for j in range(3)]
    np.testing.assert_array_equal(serial, np.max(windows, axis=0))


def test_a_large_sigmoid_is_spread_and_answers_what_one_thread_answers(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.dtypes import DataType
    from runtime.kernels import math_ops

    x = (RNG.standard_normal((1, 56, 56, 96)) * 8).astype(np.float32)
    kernel = instantiate("Sigmoid", {"T": DataType.DT_FLOAT})
    spread_counts: list[int] = []
    real = math_ops.run_blocks

    def counted(work, count):  # type: ignore[no-untyped-def]
        spread_counts.append(count)
        real(work, count)

    monkeypatch.setattr(math_ops, "run_blocks", counted)
    spread = kernel(x)
    assert spread_counts == [2]  # one block per thread
    intra_op.set_threads(1)
    serial = kernel(x)
    assert spread_counts == [2]
    np.testing.assert_array_equal(spread, serial)
    np.testing.assert_allclose(serial, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)
