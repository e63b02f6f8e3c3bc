"""streamrt: CUDA-style streams and events for CPU work, with real parallelism.

Streams are in-order queues that run concurrently with each other on a shared pool of worker
threads; events mark positions in streams and can be polled, waited on, timed and reset. Tensor
ops go to the current stream and return at once; reading a tensor on the host waits for the work
that writes it. The API follows torch's device-agnostic ``torch.Stream`` / ``torch.Event`` and the
``torch.cpu`` module (``streamrt.cpu``), so code written for them needs only its import changed.
"""

import atexit as _atexit

from . import _streamrt
from ._streamrt import (
    Cancelled,
    DependencyTracking,
    Device,
    Error,
    Event,
    Generator,
    Profiler,
    Stream,
    StreamContext,
    Tensor,
    TraceRecord,
    add,
    allclose,
    arange,
    asarray,
    current_stream,
    default_generator,
    default_stream,
    dependency_tracking,
    div,
    dtype,
    empty,
    equal,
    float32,
    float64,
    from_dlpack,
    from_numpy,
    full,
    get_num_threads,
    int32,
    int64,
    manual_seed,
    matmul,
    mean,
    mul,
    ones,
    profile,
    rand,
    randn,
    relu,
    set_dependency_tracking,
    set_num_threads,
    set_stream,
    stream,
    sub,
    sum,
    synchronize,
    tensor,
    wait_all,
    zeros,
)

from . import cpu  # noqa: E402  (needs the names above)

__all__ = [
    "Cancelled",
    "DependencyTracking",
    "Device",
    "Error",
    "Event",
    "Generator",
    "Profiler",
    "Stream",
    "StreamContext",
    "Tensor",
    "TraceRecord",
    "add",
    "allclose",
    "arange",
    "asarray",
    "cpu",
    "current_stream",
    "default_generator",
    "default_stream",
    "dependency_tracking",
    "div",
    "dtype",
    "empty",
    "equal",
    "float32",
    "float64",
    "from_dlpack",
    "from_numpy",
    "full",
    "get_num_threads",
    "int32",
    "int64",
    "manual_seed",
    "matmul",
    "mean",
    "mul",
    "ones",
    "profile",
    "rand",
    "randn",
    "relu",
    "set_dependency_tracking",
    "set_num_threads",
    "set_stream",
    "stream",
    "sub",
    "sum",
    "synchronize",
    "tensor",
    "wait_all",
    "zeros",
]

# The caching allocator (docs/ops.md), as torch.cuda has it.
from ._streamrt import (  # noqa: E402
    empty_cache,
    memory_stats,
    reset_peak_memory_stats,
    set_memory_cache_limit,
)

__all__ += ["empty_cache", "memory_stats", "reset_peak_memory_stats", "set_memory_cache_limit"]

# Pending work may be Python callables, which need a live interpreter: finish it at exit, before
# finalization, with the GIL released (C++'s own exit handler runs only after finalization).
_atexit.register(_streamrt._shutdown_at_exit)
