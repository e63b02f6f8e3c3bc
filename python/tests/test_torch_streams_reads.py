"""Never read early: every way the host reads a torch tensor waits for the queued work that writes
it. Each test holds the writer behind a gate opened from another thread a little later, so a read
that did not wait would see the old zeros."""

import ctypes
import io

import numpy as np
import pytest

import streamrt
from torch_streams_util import held_write, installed, srt, torch  # noqa: F401  (fixture)

N = 6


def read_repr(t, capsys):
    text = repr(t)
    return [float(v) for v in text[text.index("[") + 1: text.index("]")].split(",")]


def read_print(t, capsys):
    print(t)
    text = capsys.readouterr().out
    return [float(v) for v in text[text.index("[") + 1: text.index("]")].split(",")]


def read_format(t, capsys):
    return [float(f"{t[i]:.1f}") for i in range(N)]


def read_data_ptr(t, capsys):
    return list((ctypes.c_float * N).from_address(t.data_ptr()))


def read_dlpack(t, capsys):
    return np.from_dlpack(t).tolist()


def read_save(t, capsys):
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    return torch.load(buf).tolist()


def read_streamrt_op(t, capsys):
    return streamrt.add(t, 0.0).numpy().tolist()


def read_streamrt_asarray(t, capsys):
    return streamrt.asarray(t).numpy().tolist()


def read_storage(t, capsys):
    return list(t.storage())


READS = {
    "repr": read_repr,
    "print": read_print,
    "format": read_format,
    "item": lambda t, c: [t[i].item() for i in range(N)],
    "float()": lambda t, c: [float(t[i]) for i in range(N)],
    "tolist": lambda t, c: t.tolist(),
    "numpy": lambda t, c: t.numpy().tolist(),
    "numpy.asarray": lambda t, c: np.asarray(t).tolist(),
    "__dlpack__": read_dlpack,
    "data_ptr": read_data_ptr,
    "storage": read_storage,
    "indexing": lambda t, c: t[torch.arange(N)].tolist(),
    "slice then op": lambda t, c: (t[0:N] + 0).tolist(),
    "op outside a context": lambda t, c: (t * 1).tolist(),
    "comparison": lambda t, c: [float(v) for v in (t == 5).tolist()] and (t * 1).tolist(),
    "torch.save": read_save,
    "streamrt op": read_streamrt_op,
    "streamrt.asarray": read_streamrt_asarray,
    "torch.equal": lambda t, c: [5.0] * N if torch.equal(t, torch.full((N,), 5.0)) else [0.0] * N,
}


@pytest.mark.parametrize("path", list(READS), ids=list(READS))
def test_every_host_read_waits_for_the_writer(installed, capsys, path):
    x = torch.zeros(N)
    s = torch.cpu.Stream()
    gate = held_write(s, x, 5.0)
    gate.open_later()
    assert READS[path](x, capsys) == [5.0] * N


@pytest.mark.parametrize("path", ["numpy", "data_ptr", "__dlpack__", "op outside a context"])
def test_host_writes_wait_for_queued_readers(installed, path):
    # Write after read from the host: a queued op still reads x; writing x on the host first
    # waits for it, or the op would read the new values.
    x = torch.full((N,), 1.0)
    s = torch.cpu.Stream()
    from torch_streams_util import Gate

    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        y = x * 10  # held: reads x later
    gate.open_later()
    if path == "numpy":
        x.numpy()[:] = 7.0
    elif path == "data_ptr":
        (ctypes.c_float * N).from_address(x.data_ptr())[:] = [7.0] * N
    elif path == "__dlpack__":
        np.from_dlpack(x)  # (numpy's DLPack arrays are read-only: exporting alone must wait)
        x.fill_(7.0)
    else:
        x.fill_(7.0)
    assert y.tolist() == [10.0] * N
    assert x.tolist() == [7.0] * N


def test_reads_of_views_wait_for_writes_to_the_base(installed):
    base = torch.zeros(4, N)
    s = torch.cpu.Stream()
    gate = held_write(s, base, 3.0)
    gate.open_later()
    assert base[2].tolist() == [3.0] * N
    assert base.t()[1].numpy().tolist() == [3.0] * 4


def test_a_failed_writer_is_raised_by_the_read(installed):
    s = torch.cpu.Stream()
    x = torch.zeros(3)
    with torch.cpu.StreamContext(s):
        bad = torch.index_select(x, 0, torch.tensor([0, 99]))  # fails on the worker
    with pytest.raises(IndexError, match="out of range"):
        bad.tolist()


def test_an_op_on_a_view_taken_before_the_write_waits(installed):
    # The view was made before the write was queued, so it does not carry the pending mark: the
    # guard of this thread (which installed streamrt.torch) finds the write by its memory.
    s = torch.cpu.Stream()
    x = torch.zeros(N)
    early = x[2:4]
    gate = held_write(s, x, 5.0)
    gate.open_later()
    assert (early * 1).tolist() == [5.0, 5.0]
