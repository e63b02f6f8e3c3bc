"""Importing strided memory without a copy: from_numpy, from_dlpack and asarray of a numpy view
(transposed, stepped, reversed, sliced with an offset, broadcast) make a streamrt view with the
same strides over the same memory; writes go both ways. Layouts whose elements overlap are
refused with a clear error (asarray copies them)."""

import numpy as np
import pytest

import streamrt

BASE = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
VIEWS = {
    "every-other-column": lambda a: a[:, :, ::2],
    "transposed": lambda a: a.T,
    "reversed": lambda a: a[::-1, :, ::-1],
    "offset-and-steps": lambda a: a[1:, 2:, 1::3],
    "permuted-reversed": lambda a: a.transpose(2, 0, 1)[::-2],
    "fortran-order": lambda a: np.asfortranarray(a),
    "one-column": lambda a: a[:, 3, :][:, 2],
}


def address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("name", list(VIEWS))
@pytest.mark.parametrize("importer", ["from_numpy", "from_dlpack", "asarray"])
def test_strided_numpy_views_are_shared_with_their_strides(name, importer):
    base = BASE.copy()
    view = VIEWS[name](base)
    t = getattr(streamrt, importer)(view)
    assert t.data_ptr() == address(view)  # the first element, no copy
    assert t.shape == view.shape
    assert t.stride() == tuple(s // 8 for s in view.strides)
    assert t.is_contiguous() == view.flags.c_contiguous
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_array_equal((t * 2 + 1).numpy(), view * 2 + 1)
    np.testing.assert_array_equal(t.sum(0).numpy(), view.sum(0))
    # Writes through the tensor reach numpy's memory at the view's places, and only those.
    expected = base.copy()
    VIEWS[name](expected)[...] = -np.arange(view.size, dtype=np.float64).reshape(view.shape)
    t.copy_(-streamrt.arange(view.size).reshape(*view.shape).to(streamrt.float64))
    t.wait()
    np.testing.assert_array_equal(base, expected)


def test_a_broadcast_view_is_shared_for_reading_and_refused_for_writing():
    row = np.arange(4.0)
    wide = np.lib.stride_tricks.as_strided(row, (3, 4), (0, 8))  # stride 0 over the rows
    t = streamrt.from_numpy(wide)
    assert t.data_ptr() == address(row) and t.stride() == (0, 1)
    np.testing.assert_array_equal((t + 1).numpy(), wide + 1)
    with pytest.raises(ValueError, match="expanded"):
        t.fill_(1.0)
    # numpy's own broadcast_to is read-only: an op reads it in place, asarray copies it.
    np.testing.assert_array_equal(streamrt.add(np.broadcast_to(row, (3, 4)), 1).numpy(), wide + 1)
    with pytest.raises(ValueError, match="read-only"):
        streamrt.from_numpy(np.broadcast_to(row, (3, 4)))


def test_overlapping_layouts_are_refused_or_copied():
    data = np.arange(10.0)
    windows = np.lib.stride_tricks.as_strided(data, (4, 3), (16, 8))  # rows overlap
    with pytest.raises(ValueError, match="from_numpy: distinct elements .* share memory"):
        streamrt.from_numpy(windows)
    with pytest.raises(ValueError, match="from_dlpack: distinct elements .* share memory"):
        streamrt.from_dlpack(windows)
    copied = streamrt.asarray(windows)
    assert copied.data_ptr() != address(data)
    np.testing.assert_array_equal(copied.numpy(), windows)
    # A capsule that was refused is still the producer's: it can be imported after a copy.
    capsule = np.ascontiguousarray(windows).__dlpack__()
    assert streamrt.from_dlpack(capsule).numpy().tolist() == windows.tolist()


def test_imported_views_keep_their_memory_alive():
    t = streamrt.from_numpy(np.arange(30.0).reshape(5, 6)[::-1, 1::2])
    import gc
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(30.0).reshape(5, 6)[::-1, 1::2])
