"""Negative-step slicing as numpy's: t[::-1], t[5:1:-2], t[:, ::-1] are views with negative
strides (no copy), and every op, export, write and the dependency tracking handle them."""

import numpy as np
import pytest

import streamrt

from helpers import held_stream, WORKER_COUNTS

BOUNDS = [None] + list(range(-9, 10))


def address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("n", [0, 1, 2, 5, 7])
def test_every_slice_matches_python_slicing(n):
    """All starts and stops (None, negative, past either end) with steps of both signs, against
    Python's own list slicing: numpy's defaults and clamping."""
    t = streamrt.arange(n)
    ref = list(range(n))
    for step in [-4, -3, -2, -1, 1, 2, 3, 4]:
        for start in BOUNDS:
            for stop in BOUNDS:
                view = t[start:stop:step]
                want = ref[start:stop:step]
                assert view.numpy().tolist() == want, (n, start, stop, step)
                assert view.shares_storage(t)
                if len(want) > 1:
                    assert view.stride() == (step,)
                if want:
                    assert view.storage_offset() == want[0]


def test_views_are_numpy_views_without_copies():
    a_np = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    a = streamrt.tensor(a_np)
    for index in [np.s_[::-1], np.s_[5:1:-2], np.s_[:, ::-1], np.s_[..., ::-2],
                  np.s_[::-1, 1, ::-3], np.s_[-1:0:-1, None, ::2], np.s_[::-1, ::-1, ::-1]]:
        view, view_np = a[index], a_np[index]
        assert view.shape == view_np.shape
        # Strides of size-1 dimensions are arbitrary (numpy gives a new axis stride 0).
        assert [s for s, k in zip(view.stride(), view.shape) if k > 1] == \
            [s // 4 for s, k in zip(view_np.strides, view_np.shape) if k > 1]
        assert view.shares_storage(a)
        assert view.is_contiguous() == view_np.flags.c_contiguous
        exported = view.numpy()
        np.testing.assert_array_equal(exported, view_np)
        # The view itself, negative strides and all.
        assert exported.strides == tuple(4 * s for s in view.stride())
        assert address(exported) == view.data_ptr()
        np.testing.assert_array_equal(np.asarray(memoryview(view)), view_np)
        from_dlpack = np.from_dlpack(view)
        assert address(from_dlpack) == view.data_ptr()
        np.testing.assert_array_equal(from_dlpack, view_np)
        contiguous = view.contiguous()
        assert contiguous.is_contiguous()
        assert contiguous.shares_storage(a) == view.is_contiguous()  # a copy unless it is
        np.testing.assert_array_equal(contiguous.numpy(), np.ascontiguousarray(view_np))
    # Reversing twice is the original layout again, at the original offset.
    twice = a[::-1][::-1]
    assert twice.stride() == a.stride() and twice.storage_offset() == 0


def test_c_slice_semantics_through_the_binding_errors():
    with pytest.raises(ValueError, match="step cannot be zero"):
        streamrt.zeros(3)[::0]
    assert streamrt.zeros(3)[0:3:-1].shape == (0,)
    assert streamrt.zeros(3)[10**30:-10**30:-1].shape == (3,)  # clamped, as numpy


@pytest.mark.parametrize("n", WORKER_COUNTS)
def test_ops_on_reversed_views_match_numpy(n, workers):
    workers(n)
    rng = np.random.default_rng(70 + n)
    streams = [streamrt.Stream() for _ in range(3)]
    # Past the parallel grain, so walks are split across workers mid-row.
    a_np = rng.standard_normal((301, 263)).astype(np.float32)
    b_np = rng.standard_normal((263, 97)).astype(np.float32)
    i_np = rng.integers(-50, 50, size=(7, 301, 263)).astype(np.int64)
    with streamrt.stream(streams[0]):
        a, b, i = streamrt.tensor(a_np), streamrt.tensor(b_np), streamrt.tensor(i_np)
    ar, ar_np = a[::-1, ::-2], a_np[::-1, ::-2]  # [301, 132]
    with streamrt.stream(streams[1]):
        np.testing.assert_allclose((ar * 2 + a[::-1, :132]).numpy(),
                                   ar_np * 2 + a_np[::-1, :132], rtol=1e-6)
        np.testing.assert_array_equal((i[::-1] - i[:, ::-1]).numpy(), i_np[::-1] - i_np[:, ::-1])
        np.testing.assert_array_equal(streamrt.where(ar > 0, ar, 0.0).numpy(),
                                      np.where(ar_np > 0, ar_np, 0))
        np.testing.assert_allclose(streamrt.exp(a[::-7]).numpy(), np.exp(a_np[::-7]), rtol=1e-6)
    with streamrt.stream(streams[2]):
        # Reductions: over everything and over each dimension, values and indices.
        assert ar.sum().item() == pytest.approx(float(ar_np.astype(np.float64).sum()), rel=1e-6)
        assert i[::-1, ::-3].sum().item() == int(i_np[::-1, ::-3].sum())
        assert ar.max().item() == ar_np.max()
        assert ar.argmax().item() == int(np.argmax(ar_np))  # the flat index in the view's order
        assert i[::-1, ::-1].argmin().item() == int(np.argmin(i_np[::-1, ::-1]))
        for dim in (0, 1):
            np.testing.assert_allclose(ar.sum(dim).numpy(),
                                       ar_np.astype(np.float64).sum(dim).astype(np.float32),
                                       rtol=1e-5)
            np.testing.assert_array_equal(ar.argmax(dim).numpy(), np.argmax(ar_np, dim))
            np.testing.assert_array_equal(ar.min(dim).numpy(), ar_np.min(dim))
        np.testing.assert_array_equal(i[:, ::-1].sum(1).numpy(), i_np[:, ::-1].sum(1))
        np.testing.assert_allclose(streamrt.softmax(ar, 1).numpy(),
                                   np.exp(ar_np - ar_np.max(1, keepdims=True)) /
                                   np.exp(ar_np - ar_np.max(1, keepdims=True)).sum(1, keepdims=True),
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(streamrt.cat([a[::-1], a[:2]], 0).numpy(),
                                      np.concatenate([a_np[::-1], a_np[:2]], 0))


@pytest.mark.parametrize("n", [1, 4])
def test_matmul_copies_reversed_operands_for_blas(n, workers):
    """BLAS takes no negative strides: such operands are copied first; the result is numpy's."""
    workers(n)
    rng = np.random.default_rng(80 + n)
    a_np = rng.standard_normal((64, 48)).astype(np.float64)
    b_np = rng.standard_normal((48, 40)).astype(np.float64)
    c_np = rng.standard_normal((5, 64, 48)).astype(np.float64)
    a, b, c = streamrt.tensor(a_np), streamrt.tensor(b_np), streamrt.tensor(c_np)
    cases = [
        (a[::-1] @ b, a_np[::-1] @ b_np),
        (a[:, ::-1] @ b[::-1], a_np[:, ::-1] @ b_np[::-1]),
        (a[::-2, ::-1] @ b[::-1, ::-3], a_np[::-2, ::-1] @ b_np[::-1, ::-3]),
        (b[::-1].T @ a[::-1].T, b_np[::-1].T @ a_np[::-1].T),
        (c[::-1] @ b, c_np[::-1] @ b_np),  # a reversed batch: only the batch stride is negative
        (c[::-2, ::-1] @ b, c_np[::-2, ::-1] @ b_np),
        (a[::-1, :1] @ b[:1], a_np[::-1, :1] @ b_np[:1]),  # one column, then one row
    ]
    for got, want in cases:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_writes_into_reversed_views():
    a_np = np.zeros((6, 5), dtype=np.float64)
    a = streamrt.tensor(a_np)
    a[::-1, 0] = streamrt.arange(6).to(streamrt.float64)
    a_np[::-1, 0] = np.arange(6)
    a[4:0:-2, 1:] = 7.0  # fill_
    a_np[4:0:-2, 1:] = 7.0
    a[:, ::-1][5] = np.array([1, 2, 3, 4, 5], dtype=np.float64)  # copy_ with a numpy source
    a_np[:, ::-1][5] = [1, 2, 3, 4, 5]
    a[::-2, ::-1].copy_(a[::2])  # rows 5, 3, 1 reversed <- rows 0, 2, 4
    a_np[::-2, ::-1] = a_np[::2]
    np.testing.assert_array_equal(a.numpy(), a_np)
    whole = streamrt.arange(10).to(streamrt.float32)
    whole[::-1].copy_(whole)  # in-place reversal through the overlap rule
    np.testing.assert_array_equal(whole.numpy(), np.arange(10)[::-1])
    with pytest.raises(ValueError, match="expanded"):
        streamrt.zeros(1).expand(3)[::-1].fill_(1.0)


def test_tracking_orders_work_through_reversed_views():
    """A write through a reversed view on a held stream, read of the base on another: the read
    waits (same storage), whatever the strides' signs."""
    base = streamrt.zeros(1000)
    base.wait()
    producer, gate = held_stream()
    consumer = streamrt.Stream()
    with streamrt.StreamContext(producer):
        base[::-1].copy_(streamrt.arange(1000).to(streamrt.float32))
    with streamrt.StreamContext(consumer):
        total = base[::-3].sum()
        doubled = base * 2
    assert not total.ready() and not doubled.ready()
    gate.set()
    np.testing.assert_array_equal(doubled.numpy(), np.arange(1000)[::-1] * 2.0)
    assert total.item() == float(np.arange(1000)[::-1][::-3].sum())
