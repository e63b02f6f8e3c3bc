"""streamrt: CUDA-style streams and events for CPU work, with real parallelism.

Streams are in-order queues that run concurrently with each other on a shared pool of worker
threads; events mark positions in streams and can be polled, waited on, timed and reset. Tensor
ops go to the current stream and return at once; reading a tensor on the host waits for the work
that writes it. The API follows torch's device-agnostic ``torch.Stream`` / ``torch.Event`` and the
``torch.cpu`` module (``streamrt.cpu``), so code written for them needs only its import changed.
"""

import atexit as _atexit
import ctypes as _ctypes
import os as _os
import sys as _sys

from . import _streamrt
from ._streamrt import (
    Cancelled,
    DependencyTracking,
    Device,
    Error,
    Event,
    Generator,
    Graph,
    LaunchHandle,
    OutOfMemoryError,
    Profiler,
    Stream,
    StreamContext,
    Tensor,
    TraceRecord,
    abs,
    add,
    allclose,
    arange,
    argmax,
    argmin,
    asarray,
    bool,
    cat,
    clamp,
    current_stream,
    default_generator,
    default_stream,
    dependency_tracking,
    div,
    dtype,
    empty,
    eq,
    equal,
    exp,
    float32,
    float64,
    from_dlpack,
    from_numpy,
    full,
    ge,
    get_num_threads,
    gt,
    is_current_stream_capturing,
    int32,
    int64,
    le,
    log,
    log_softmax,
    lt,
    manual_seed,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    neg,
    ones,
    permute,
    pow,
    profile,
    promote_types,
    rand,
    randn,
    relu,
    set_dependency_tracking,
    set_num_threads,
    set_worker_spin,
    get_worker_spin,
    set_worker_batch,
    get_worker_batch,
    set_fork_timeout,
    get_fork_timeout,
    set_launch_blocking,
    get_launch_blocking,
    set_stream,
    sigmoid,
    softmax,
    sqrt,
    stack,
    stream,
    sub,
    sum,
    synchronize,
    tanh,
    tensor,
    transpose,
    unsqueeze,
    wait_all,
    where,
    zeros,
)

# A failure of stream work names the line that launched it: the innermost frame outside this
# package (docs/reliability.md, "Failures that say where they came from").
for _path in {__file__, _os.path.abspath(__file__)}:
    _streamrt._add_origin_skip(_os.path.join(_os.path.dirname(_path), ""))

from . import cpu  # noqa: E402  (needs the names above)
from .graphs import graph  # noqa: E402

__version__ = _streamrt.__version__  # the library version, as set in CMakeLists.txt

__all__ = [
    "Cancelled",
    "DependencyTracking",
    "Device",
    "Error",
    "Event",
    "Generator",
    "Graph",
    "LaunchHandle",
    "OutOfMemoryError",
    "Profiler",
    "Stream",
    "StreamContext",
    "Tensor",
    "TraceRecord",
    "abs",
    "add",
    "allclose",
    "arange",
    "argmax",
    "argmin",
    "asarray",
    "bool",
    "cat",
    "clamp",
    "cpu",
    "current_stream",
    "default_generator",
    "default_stream",
    "dependency_tracking",
    "div",
    "dtype",
    "empty",
    "eq",
    "equal",
    "exp",
    "float32",
    "float64",
    "from_dlpack",
    "from_numpy",
    "full",
    "ge",
    "get_num_threads",
    "gt",
    "graph",
    "is_current_stream_capturing",
    "int32",
    "int64",
    "le",
    "log",
    "log_softmax",
    "lt",
    "manual_seed",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "ne",
    "neg",
    "ones",
    "permute",
    "pow",
    "profile",
    "promote_types",
    "rand",
    "randn",
    "relu",
    "set_dependency_tracking",
    "set_num_threads",
    "set_worker_spin",
    "get_worker_spin",
    "set_worker_batch",
    "get_worker_batch",
    "set_fork_timeout",
    "get_fork_timeout",
    "set_launch_blocking",
    "get_launch_blocking",
    "set_stream",
    "sigmoid",
    "softmax",
    "sqrt",
    "stack",
    "stream",
    "sub",
    "sum",
    "synchronize",
    "tanh",
    "tensor",
    "transpose",
    "unsqueeze",
    "wait_all",
    "where",
    "zeros",
]



def _openblas():
    # The OpenBLAS that libstreamrt loaded; torch's BLAS calls (Debian's libblas.so.3) go to the
    # same one. None when another BLAS is in use.
    try:
        return _ctypes.CDLL("libopenblas.so.0", mode=_os.RTLD_NOLOAD | _os.RTLD_NOW)
    except OSError:
        return None


def _blas_threads():
    """OpenBLAS's thread count for one call (process-wide), or None without OpenBLAS."""
    lib = _openblas()
    return None if lib is None else int(lib.openblas_get_num_threads())


def _set_blas_threads(n):
    """Sets OpenBLAS's thread count for one call, process-wide (docs/python.md, "Cores")."""
    lib = _openblas()
    if lib is not None:
        lib.openblas_set_num_threads(int(n))


# Importing streamrt changes no OpenBLAS setting (an eager torch product keeps its bits):
# streamrt.torch.install() sets one thread per call, and streamrt's own first product does
# (docs/python.md, "Cores: streamrt's workers, torch's threads and OpenBLAS").
# The caching allocator (docs/ops.md), as torch.cuda has it.
from ._streamrt import (  # noqa: E402
    empty_cache,
    memory_stats,
    reset_peak_memory_stats,
    set_memory_cache_limit,
)

__all__ += ["empty_cache", "memory_stats", "reset_peak_memory_stats", "set_memory_cache_limit"]

# print(t) shows the values, as torch does (it waits for the tensor's writer first).
from ._tensor_repr import tensor_repr as _tensor_repr  # noqa: E402

Tensor.__repr__ = Tensor.__str__ = _tensor_repr

def _exit_timeout_setting(text):
    """STREAMRT_EXIT_TIMEOUT in seconds, or None when unset (docs/reliability.md, "Exit")."""
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise ValueError(
            f"STREAMRT_EXIT_TIMEOUT={text!r} is not a number of seconds: set it to a finite "
            "number >= 0 (how long exit waits for queued stream work), or unset it to wait "
            "without limit (Ctrl-C still leaves)"
        )
    return value


_EXIT_TIMEOUT = _exit_timeout_setting(_os.environ.get("STREAMRT_EXIT_TIMEOUT"))
# How long exit waits when STREAMRT_EXIT_TIMEOUT is unset (None: without limit). An MPI rank has
# no terminal to press Ctrl-C in, so streamrt.distributed sets a bound.
_exit_default_timeout = None
# Called with the exit code when exit gives up waiting, before the process ends:
# streamrt.distributed aborts the MPI job, so that the other ranks do not wait for this one.
_leave_hooks = []


def _at_exit():
    # Pending work may be Python callables, which need a live interpreter: finish it here, before
    # finalization, with the GIL released (C++'s own exit handler runs only after finalization).
    _streamrt._end_open_captures()
    timeout = _EXIT_TIMEOUT if _EXIT_TIMEOUT is not None else _exit_default_timeout
    how = _streamrt._shutdown_at_exit(timeout)
    if how == "done":
        return
    # Ctrl-C or the time-out: the user's answer is to leave. The work still queued or running
    # cannot finish after the interpreter is gone, so the process ends here, saying so.
    code = 130 if how == "interrupted" else 124
    why = "Ctrl-C" if how == "interrupted" else f"the exit time-out of {timeout:g} s passed"
    try:
        _sys.stdout.flush()
    except Exception:  # noqa: BLE001 (a closed stdout must not stop the exit)
        pass
    _sys.stderr.write(
        f"streamrt: leaving at exit without the stream work still queued or running ({why}); "
        f"exit code {code}\n"
    )
    _sys.stderr.flush()
    for hook in list(_leave_hooks):
        try:
            hook(code)
        except Exception:  # noqa: BLE001
            pass
    _os._exit(code)


_atexit.register(_at_exit)

# os.fork() (multiprocessing, DataLoader workers) waits for queued stream work first, so that the
# child reads finished results (docs/torch.md, "fork and multiprocessing"). The wait runs here,
# with the GIL released: os.fork() holds the GIL through the C++ fork handler, and stream work may
# need it. In the child, the Python references of the parent's work dropped there are released once
# the interpreter is usable again (after_in_child). The hooks never raise.
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(
        before=_streamrt._finish_work_before_fork,
        after_in_child=_streamrt._after_fork_in_child,
    )
