"""streamrt: CUDA-style streams and events for CPU work, with real parallelism.

Streams are in-order queues that run concurrently with each other on a shared pool of worker
threads; events mark positions in streams and can be polled, waited on, timed and reset. The API
follows torch's device-agnostic ``torch.Stream`` / ``torch.Event`` and the ``torch.cpu`` module
(``streamrt.cpu``), so code written for them needs only its import changed.
"""

import atexit as _atexit

from . import _streamrt
from ._streamrt import (
    Cancelled,
    Device,
    Error,
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    get_num_threads,
    set_num_threads,
    set_stream,
    stream,
    synchronize,
    wait_all,
)

from . import cpu  # noqa: E402  (needs the names above)

__all__ = [
    "Cancelled",
    "Device",
    "Error",
    "Event",
    "Stream",
    "StreamContext",
    "cpu",
    "current_stream",
    "default_stream",
    "get_num_threads",
    "set_num_threads",
    "set_stream",
    "stream",
    "synchronize",
    "wait_all",
]

# Pending work may be Python callables, which need a live interpreter: finish it at exit, before
# finalization, with the GIL released (C++'s own exit handler runs only after finalization).
_atexit.register(_streamrt._shutdown_at_exit)
