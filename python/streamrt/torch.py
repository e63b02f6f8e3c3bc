"""streamrt.torch: torch's CPU streams made real (docs/torch.md).

``torch.cpu.Stream``, ``Event`` and ``StreamContext`` do nothing in torch (torch 1.13 does not have
them at all). After ``streamrt.torch.install()`` they are streamrt's, and torch code inside a
stream context is enqueued on the current streamrt stream and returns at once: every aten op on
CPU tensors (functions, methods, operators, ``torch.nn`` modules, in-place ops, ``out=``) runs on
a streamrt worker, in stream order, with dependency tracking across streams. Reading a pending
tensor on the host (``print``, ``item()``, ``numpy()``, ``tolist()``, ``data_ptr()``,
``__dlpack__``, indexing, any op outside a stream context, ``torch.save``) first waits for the
work that writes it::

    import torch, streamrt.torch
    streamrt.torch.install()
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    with torch.cpu.StreamContext(s1):
        C1 = torch.matmul(A, B)          # returns at once; runs on s1
    with torch.cpu.StreamContext(s2):
        C2 = torch.matmul(A, B)          # runs at the same time, on s2
    assert torch.allclose(C1, C2)        # waits for both

``uninstall()`` restores torch as it was. Without ``install()`` nothing about torch changes.
"""

import os
import threading

import torch as _torch

import streamrt as _pkg

from . import _streamrt as _C
from . import _torch_compat as _compat
from . import _torch_compile
from . import _torch_dynamo_defer
from . import _torch_graph
from . import _torch_mode as _mode
from . import _torch_submit as _submit
from . import _torch_tracking as _tracking

__all__ = [
    "CPUGraph",
    "Event",
    "HostOpWarning",
    "Stream",
    "StreamContext",
    "cache_stats",
    "current_stream",
    "empty_cache",
    "graph",
    "install",
    "is_installed",
    "queue_limit",
    "ready",
    "set_cache_limit",
    "set_queue_limit",
    "stream",
    "synchronize",
    "uninstall",
    "wait",
]

Event = _C.Event
HostOpWarning = _mode.HostOpWarning
CPUGraph = _torch_graph.CPUGraph
graph = _torch_graph.graph


class Stream(_C.Stream):
    """``torch.cpu.Stream``: a new streamrt CPU stream (``priority``: lower is more urgent, as
    torch; see ``Stream.priority_range()``)."""

    def __init__(self, priority=0, device=None):
        if device is not None and str(device).split(":")[0] != "cpu":
            raise ValueError(f"torch.cpu.Stream: expected a CPU device, got {device!r}")
        super().__init__("cpu", priority)


class _CudaStandIn(_C.Stream):
    """``torch.cuda.Stream`` on a machine without CUDA, after ``install(cuda=True)``: a CPU
    stream (``device`` is ignored: there is no CUDA device to put it on)."""

    def __init__(self, device=None, priority=0, **kwargs):
        super().__init__("cpu", priority)


class StreamContext(_C.StreamContext):
    """``torch.cpu.StreamContext(stream)``: makes ``stream`` current on this thread for the block
    (``None``: does nothing); torch ops in the block are enqueued on it."""

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, _C.Stream):
            raise TypeError(
                "torch.cpu.StreamContext: expected a CPU stream (torch.cpu.Stream() or a "
                f"streamrt.Stream) or None, got {type(stream).__module__}.{type(stream).__name__}"
            )
        super().__init__(stream)


def stream(stream):
    """``torch.cpu.stream(s)``: ``StreamContext(s)``."""
    return StreamContext(stream)


def current_stream(device=None):
    """``torch.cpu.current_stream()``: this thread's current streamrt stream."""
    return _C.current_stream()


def synchronize(device=None):
    """``torch.cpu.synchronize()``: waits for the work of every CPU stream; raises the first
    failure found."""
    _C.synchronize()


def ready(tensor):
    """True when no queued stream work writes ``tensor`` (a torch CPU tensor, or a streamrt one)
    any more. Never blocks."""
    if isinstance(tensor, _C.Tensor):
        return tensor.ready()
    h = _tracking.find(tensor)
    return h is None or h.ready()


def wait(tensor):
    """Blocks (GIL released) until the queued stream work that writes ``tensor`` has finished;
    raises its failure. What every host read of a torch tensor does first after install()."""
    if isinstance(tensor, _C.Tensor):
        tensor.wait()
    else:
        _tracking.wait_host(tensor, False)


def empty_cache():
    """Gives the memory kept for new outputs back to the system, as ``torch.cuda.empty_cache()``
    does: the outputs of ops on streams are allocated at the call and most often freed by a
    worker, and their freed memory is kept (up to ``set_cache_limit()``) for the next outputs of
    its size (docs/torch.md, "Memory"). Memory of tensors alive stays. Never blocks but briefly."""
    native = _submit.native()
    if native is not None:
        native.empty_output_cache()


def set_cache_limit(nbytes):
    """How many bytes of freed outputs the cache of ``empty_cache()`` keeps (128 MiB unless set;
    0: none, every freed output goes back at once); frees what it holds beyond it now. Raises
    ValueError for a negative count, TypeError for anything but an int. Never blocks but
    briefly. Without streamrt's native torch part (``streamrt._streamrt_torch``) outputs are
    torch's own and nothing is cached."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"set_cache_limit: nbytes is an int count of bytes, not "
                        f"{type(nbytes).__name__}")
    if nbytes < 0:
        raise ValueError(f"set_cache_limit: nbytes is 0 or more, not {nbytes}")
    native = _submit.native()
    if native is not None:
        native.set_output_cache_limit(nbytes)


def cache_stats():
    """The output cache of ``empty_cache()``: a dict of ``cached_bytes`` (kept now),
    ``limit_bytes``, ``hits`` and ``misses`` (outputs allocated from kept memory or new memory
    so far) and ``reused`` (outputs that took the memory of an output only a queued op of their
    stream still held); all 0 without streamrt's native torch part. Never blocks but briefly."""
    native = _submit.native()
    if native is None:
        return {"cached_bytes": 0, "limit_bytes": 0, "hits": 0, "misses": 0, "reused": 0}
    return native.output_cache_stats()


def set_queue_limit(items=None, nbytes=None):
    """How far a thread launching torch ops may run ahead of its stream, as CUDA's launches wait
    when a stream's queue is full: once more than ``items`` work items (128 unless set), or more
    than ``nbytes`` bytes of the queued ops' new outputs (96 MiB unless set), are queued on the
    stream, the launch waits until at most half of each are. This bounds the host's run-ahead,
    and the memory of the outputs it allocated for ops not run yet (docs/torch.md, "Memory"); 0
    turns a limit off, None keeps it. A stream that finishes no item for a while (held by a user
    event, behind a long op) is not waited for, so this never hangs. Raises ValueError for
    ``items`` 1 or negative and ``nbytes`` negative, TypeError for anything but an int. Never
    blocks."""
    for name, value in (("items", items), ("nbytes", nbytes)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"set_queue_limit: {name} is an int count, not "
                            f"{type(value).__name__}")
    if items is not None and (items < 0 or items == 1):
        raise ValueError(f"set_queue_limit: items is 0 (no limit) or 2 or more, not {items}")
    if nbytes is not None and nbytes < 0:
        raise ValueError(f"set_queue_limit: nbytes is 0 (no limit) or more, not {nbytes}")
    if items is not None:
        _C._torch_set_queue_limit(items)
    if nbytes is not None:
        _C._torch_set_queue_bytes_limit(nbytes)


def queue_limit():
    """The limits of ``set_queue_limit()``: a dict of ``items`` and ``nbytes``. Never blocks."""
    return {"items": _C._torch_queue_limit(), "nbytes": _C._torch_queue_bytes_limit()}


# ------------------------------------------------------------------------------------------------
# What install() changes, to restore it in uninstall().

_lock = threading.RLock()
_saved = []  # (owner, name, had_it, old value), in the order of the changes
_settings = {}


def _patch(owner, name, value):
    had = name in vars(owner)
    _saved.append((owner, name, had, vars(owner).get(name)))
    setattr(owner, name, value)


def _restore():
    while _saved:
        owner, name, had, old = _saved.pop()
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


# streamrt's own contexts: entering one while installed arms the thread and counts the depth.
# The hooks stay after uninstall() (they are streamrt's own classes, and do nothing then), so that
# a thread inside a context while another uninstalls stops being guarded when it leaves it.


def _wrap_enter(orig, is_context):
    def __enter__(self):
        active = _mode.installed and (not is_context or self.stream is not None)
        if active:
            _mode.arm()
        result = orig(self)
        if active:
            _mode.context_entered()
        return result

    return __enter__


def _wrap_exit(orig, is_context):
    def __exit__(self, *exc):
        result = orig(self, *exc)
        if not is_context or self.stream is not None:
            _mode.context_left()
        return result

    return __exit__


_contexts_hooked = []


def _hook_contexts():
    if _contexts_hooked:
        return
    for cls, is_context in ((_C.StreamContext, True), (_C.Stream, False)):
        cls.__enter__ = _wrap_enter(vars(cls)["__enter__"], is_context)
        cls.__exit__ = _wrap_exit(vars(cls)["__exit__"], is_context)
    _contexts_hooked.append(True)


# Host reads through torch methods that do not go through torch's dispatcher: they wait first.


def _reader(orig, for_write):
    def method(self, *args, **kwargs):
        if self.is_cpu and _tracking.tracked():
            _tracking.wait_host(self, for_write)
        return orig(self, *args, **kwargs)

    method.__name__ = getattr(orig, "__name__", "method")
    method.__doc__ = getattr(orig, "__doc__", None)
    return method


_HOST_READS = (
    ("numpy", True),  # the array may be written
    ("tolist", False),
    ("item", False),
    ("data_ptr", True),  # the address may be used to write
    ("__dlpack__", True),
    ("__array__", True),
    ("__repr__", False),
    ("__format__", False),
    ("__reduce_ex__", False),  # torch.save, pickle, copy.deepcopy
    ("storage", True),
)


def _record_stream(orig):
    def record_stream(self, stream):
        """As torch.Tensor.record_stream on CUDA: the tensor's memory is not freed before the work
        queued on `stream` so far has run (a streamrt stream here)."""
        if isinstance(stream, _C.Stream):
            stream.launch(_keep, self)
            return None
        return orig(self, stream)

    return record_stream


def _keep(tensor):
    # Holds the tensor (so its memory) until the stream reaches this point.
    return None


def _dlpack_hook(obj):
    # streamrt.from_dlpack(t) and streamrt ops on torch tensors: share the tracker's tracking, and
    # take the capsule without the host wait (stream work orders itself through the tracker).
    if not isinstance(obj, _torch.Tensor) or not obj.is_cpu:
        return None
    h = _tracking.tracker(obj)
    if h is None:
        return None
    return h, _torch.Tensor.__dlpack__.__wrapped_orig__(obj)


def _adopt(r):
    # A torch tensor just made over memory that was already there (numpy, a buffer, DLPack): when
    # that memory is wrapped or exposed elsewhere, its tracker joins that tracking, and while work
    # on it is pending it carries the pending mark, so that every thread's ops on it wait.
    if not isinstance(r, _torch.Tensor) or not r.is_cpu:
        return r
    nbytes = _compat.untyped_storage(r).nbytes()
    if nbytes and _C._memory_tracked(_tracking.base_of(r), nbytes):
        h = _tracking.tracker(r)
        if h is not None and not _C._torch_idle(h):
            _mode.path().mark([r])
    return r


def _adopting(orig):
    def adopting(*args, **kwargs):
        return _adopt(orig(*args, **kwargs))

    adopting.__name__ = getattr(orig, "__name__", "adopting")
    adopting.__doc__ = getattr(orig, "__doc__", None)
    return adopting


def _from_dlpack(orig):
    def from_dlpack(ext_tensor):
        r = orig(ext_tensor)
        if isinstance(ext_tensor, _C.Tensor):
            _tracking.share(r, ext_tensor)  # torch work on r is tracked as work on ext_tensor
            return r
        return _adopt(r)

    from_dlpack.__doc__ = orig.__doc__
    return from_dlpack


def _as_tensor(orig):
    def as_tensor(data, dtype=None, device=None):
        if isinstance(data, _C.Tensor):
            r = _torch.from_dlpack(data)  # shares the memory (waits for its pending work first)
            if dtype is not None or device is not None:
                r = r.to(dtype=dtype, device=device)
            return r
        return _adopt(orig(data, dtype=dtype, device=device))

    as_tensor.__doc__ = orig.__doc__
    return as_tensor


def _tensor(orig):
    def tensor(data, *args, dtype=None, device=None, requires_grad=False, pin_memory=False):
        if isinstance(data, _C.Tensor):
            r = _torch.from_dlpack(data)
            r = r.to(dtype=dtype, device=device, copy=True)
            return r.requires_grad_(requires_grad) if requires_grad else r
        return orig(data, *args, dtype=dtype, device=device, requires_grad=requires_grad,
                    pin_memory=pin_memory)

    tensor.__doc__ = orig.__doc__
    return tensor


def _asarray(orig):
    def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
        if isinstance(obj, _C.Tensor):
            r = _torch.from_dlpack(obj)
            if dtype is not None or device is not None or copy:
                r = r.to(dtype=dtype, device=device, copy=bool(copy))
            return r.requires_grad_(requires_grad) if requires_grad else r
        return _adopt(orig(obj, dtype=dtype, device=device, copy=copy,
                           requires_grad=requires_grad))

    asarray.__doc__ = orig.__doc__
    return asarray


def _torch_cpu_names(cuda):
    names = {
        "Stream": Stream,
        "Event": Event,
        "StreamContext": StreamContext,
        "stream": stream,
        "current_stream": current_stream,
        "synchronize": synchronize,
    }
    mods = [(_torch.cpu, names)]
    if cuda:
        mods.append((_torch.cuda, dict(names, Stream=_CudaStandIn,
                                       default_stream=lambda device=None: _C.default_stream())))
    return mods


def is_installed():
    """True between install() and uninstall()."""
    return _mode.installed


def install(cuda=False):
    """Makes torch's CPU stream API real (idempotent; see the module's doc and docs/torch.md).

    Sets ``torch.cpu.Stream``, ``Event``, ``StreamContext``, ``stream``, ``current_stream`` and
    ``synchronize`` to streamrt's; makes torch ops inside a stream context (torch's or
    streamrt's) stream work; makes host reads of torch tensors wait for pending work; makes
    ``torch.from_dlpack``, ``torch.as_tensor``, ``torch.tensor`` and ``torch.asarray`` accept
    streamrt tensors, with one dependency tracking for memory shared through DLPack; makes the
    tensors ``torch.from_numpy``, ``torch.frombuffer``, ``torch.as_tensor``, ``torch.asarray`` and
    ``torch.from_dlpack`` build over memory that stream work uses join its tracking; sets torch's
    intra-op threads and OpenBLAS's threads per call to 1 (the streams are the parallelism: one
    worker per core); runs the workers under SCHED_BATCH (``streamrt.set_worker_batch``), so that
    a woken worker does not preempt the thread enqueuing ops, unless ``STREAMRT_WORKER_BATCH`` is
    set. With
    ``cuda=True`` on a machine where torch has no CUDA, the ``torch.cuda`` stream names are CPU
    streams too, so code written for CUDA streams runs unchanged. Blocks only to set up; not for
    use while another thread runs torch ops."""
    with _lock:
        if _mode.installed:
            return
        if cuda and _torch.cuda.is_available():
            raise RuntimeError(
                "streamrt.torch.install(cuda=True): torch has CUDA here, so torch.cuda's streams "
                "are real CUDA streams and stay as they are; call install() without cuda=True")
        for module, names in _torch_cpu_names(cuda):
            for name, value in names.items():
                _patch(module, name, value)
        _hook_contexts()
        for name, for_write in _HOST_READS:
            orig = getattr(_torch.Tensor, name)
            wrapped = _reader(orig, for_write)
            wrapped.__wrapped_orig__ = orig
            _patch(_torch.Tensor, name, wrapped)
        _patch(_torch.Tensor, "record_stream", _record_stream(_torch.Tensor.record_stream))
        _patch(_torch, "from_dlpack", _from_dlpack(_torch.from_dlpack))
        _patch(_torch.utils.dlpack, "from_dlpack", _torch.from_dlpack)
        _patch(_torch, "as_tensor", _as_tensor(_torch.as_tensor))
        _patch(_torch, "tensor", _tensor(_torch.tensor))
        _patch(_torch, "asarray", _asarray(_torch.asarray))
        for name in ("from_numpy", "frombuffer"):
            _patch(_torch, name, _adopting(getattr(_torch, name)))
        if hasattr(_torch, "compile"):
            _patch(_torch, "compile", _torch_compile.wrap_compile(_torch.compile))
        # (torch's intra-op threads stay: this thread's ops outside contexts, and host ops, run
        # with eager's; each work item sets one on the thread that runs it,
        # python/src/torch/torch_runner_threads.cpp)
        # One OpenBLAS thread per call (process-wide: OpenBLAS has no per-thread setting): each
        # stream's products run on its worker's core instead of queueing for OpenBLAS's pool.
        _settings["blas"] = _pkg._blas_threads()
        _pkg._set_blas_threads(1)
        _give_workers_way()
        _C._set_torch_dlpack_hook(_dlpack_hook)
        _torch_dynamo_defer.defer(_torch)  # torch 2.x: no torch._dynamo import for streamrt's ops
        if _mode.path() is None:
            _mode.use()  # the best submission path available here (_torch_submit.py)
        _mode.set_installed(True)
        _mode.arm()


def _give_workers_way():
    # The thread that enqueues torch ops shares the cores with the workers (one per core), and the
    # streams wait for it: under the default policy a worker woken by a push preempts it in the
    # middle of its enqueues, a few times per step of a loop of small ops. SCHED_BATCH workers run
    # when it sleeps or at the scheduler's tick instead, and still start at once on an idle core
    # (docs/design.md, "Workers that give way"). The user's STREAMRT_WORKER_BATCH wins; a refusal
    # (a sandbox) keeps the default policy, which is slower here, never wrong.
    if "STREAMRT_WORKER_BATCH" in os.environ or _pkg.get_worker_batch():
        return
    try:
        _pkg.set_worker_batch(True)
    except _pkg.Error:
        return
    _settings["worker_batch"] = True


def _restore_worker_policy():
    # Only what install() changed, and only if nobody changed it since.
    if _settings.pop("worker_batch", False) and _pkg.get_worker_batch():
        _pkg.set_worker_batch(False)


# How long uninstall() waits for other threads' enqueues that started before it switched off.
_QUIESCE_S = 60.0


def _stop_enqueues():
    # Switches enqueuing off, waits for the enqueues already started on other threads, and then for
    # their work, so that no torch work is pending once uninstall() has returned (a host read of
    # its result would no longer wait). The failure of that late work, or None.
    _mode.set_installed(False)
    if not _mode.quiesce(_QUIESCE_S):
        return RuntimeError(
            f"streamrt.torch.uninstall(): another thread was still enqueuing a torch op after "
            f"{_QUIESCE_S:.0f} s; streamrt.torch is uninstalled, but that op's work may still be "
            "pending: call streamrt.synchronize() before reading its results")
    try:
        _C.synchronize()
    except Exception as e:  # raised once the rest is restored
        return e
    return None


def uninstall():
    """Restores torch as it was before install() (idempotent). Waits for all stream work first,
    and raises its failure if it failed (then nothing is changed; call it again). Ops that other
    threads enqueue meanwhile are waited for too (their failure is raised once everything is
    restored); ops after the switch run as eager torch."""
    with _lock:
        if not _mode.installed:
            return
        _C.synchronize()
        late = _stop_enqueues()
        _C._set_torch_dlpack_hook(None)
        _restore()
        _torch_dynamo_defer.restore()
        blas = _settings.pop("blas", None)
        if blas is not None:
            _pkg._set_blas_threads(blas)
        _restore_worker_policy()
        _mode.disarm()
        _tracking.sweep()
        if late is not None:
            raise late
