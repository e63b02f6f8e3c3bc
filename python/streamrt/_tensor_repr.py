"""``repr(t)`` and ``print(t)`` of a streamrt tensor, as torch shows a tensor: its values.

Reading the values waits for the work that writes the tensor (with the GIL released, Ctrl-C
raising KeyboardInterrupt, as ``numpy()``), and a failure of that work is raised here, as by any
host read. numpy formats the values (and summarises large tensors with ``...`` as torch does)."""

from . import _streamrt

# torch leaves out the dtype for its defaults: float32, int64 and bool.
_DEFAULT_DTYPES = (_streamrt.float32, _streamrt.int64, _streamrt.bool)
_PREFIX = "streamrt.tensor("


def tensor_repr(t):
    import numpy as np  # noqa: PLC0415  (only when a tensor is shown)

    values = t.numpy(writable=False)
    body = np.array2string(values, separator=", ", prefix=_PREFIX)
    extra = ""
    if values.size == 0 and values.ndim != 1:
        extra += ", size=" + str(tuple(values.shape))
    if t.dtype not in _DEFAULT_DTYPES:
        extra += ", dtype=" + repr(t.dtype)
    return _PREFIX + body + extra + ")"
