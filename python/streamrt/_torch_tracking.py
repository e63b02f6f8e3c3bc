"""Dependency tracking of torch tensors for streamrt.torch (docs/torch.md, "How it works").

Every torch storage that stream work touches gets a *tracker*: a streamrt tensor standing for its
memory, whose storage carries streamrt's tracking (last writer, readers per stream). Trackers are
found by the storage's start address, so every view of a storage, and every torch tensor made on
the same memory, finds the same one; trackers of overlapping memory reached from other start
addresses (``torch.from_numpy(a)`` and ``torch.from_numpy(a[4:])``) share their tracking through
streamrt's index of wrapped memory (docs/design.md, "Memory reached twice"). A streamrt tensor exported to torch (``torch.from_dlpack``)
is its own tracker, and a torch tensor imported into streamrt (``streamrt.from_dlpack``, or any
streamrt op taking it) shares its tracker's tracking: the memory is tracked once.

An entry lives while one of its torch storages does (weak references), or while work on it is
pending (pending work keeps its memory alive, so the address cannot have been reused).

Where streamrt._streamrt_torch is built, the registry is its C++ twin (so that its fast path, which
runs without the GIL, and this code find the same trackers): use_native() hands the entries over,
and every function here asks it. The Python registry below is used without that module.
"""

import threading

import torch

from . import _streamrt as _C
from . import _torch_compat as _compat

# The C methods, not the ones install() wraps (those wait for pending work).
_data_ptr = _compat.TensorBase.data_ptr
_storage_offset = _compat.TensorBase.storage_offset
_element_size = _compat.TensorBase.element_size
_storage = _compat.untyped_storage
_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref


class _Entry:
    """The tracker of the memory starting at one address, weak references to the torch storages
    on it, where the memory ends, and whether the tracker was made for it (not shared)."""

    __slots__ = ("tracker", "weak", "end", "wrapped")

    def __init__(self, tracker, weak, end, wrapped):
        self.tracker = tracker
        self.weak = [weak]
        self.end = end
        self.wrapped = wrapped

    def freed(self):
        """No storage left and no work pending: the memory was freed (maybe handed out again)."""
        return not self.alive() and _C._torch_idle(self.tracker)

    def alive(self):
        for w in self.weak:
            if not _expired(w):
                return True
        return False

    def __del__(self, _free=_free_weak_ref):
        # (_free bound at definition: at interpreter exit the module's globals may be gone.)
        for w in self.weak:
            _free(w)
        self.weak = []


_entries = {}  # storage start address -> _Entry
_lock = threading.Lock()  # serialises making entries (lookups need none: the GIL)
_sweep_at = 1024
native = None  # streamrt._streamrt_torch while its registry is the one used (use_native)


def use_native(module):
    """Makes `module`'s C++ registry the one used (None: this module's), handing the entries over
    with their weak references, so trackers and DLPack shares stay as they were."""
    global native
    if module is native:
        return
    with _lock:
        if native is None:
            items = []
            for base, e in _entries.items():
                items.append((base, e.tracker, e.weak, e.end, e.wrapped))
                e.weak = []  # handed over: the C++ registry frees them
            _entries.clear()
            module.registry_put(items)
        else:
            items = native.registry_take_all()
            if module is not None:
                module.registry_put(items)
            else:
                for base, tracker, weak, end, wrapped in items:
                    e = _Entry(tracker, None, end, wrapped)
                    e.weak = list(weak)
                    _entries[base] = e
        native = module


def tracked():
    """Whether any storage has a tracker (a cheap check before looking one up)."""
    if native is not None:
        return native.registry_size() > 0
    return bool(_entries)


def base_of(t):
    """The start address of `t`'s storage (0 for a tensor without memory: torch.compile's fake and
    functional tensors refuse to give a data pointer)."""
    try:
        ptr = _data_ptr(t)
    except RuntimeError:
        return 0
    return ptr - _storage_offset(t) * _element_size(t)


def _live(base):
    e = _entries.get(base)
    if e is None:
        return None
    if not e.freed():
        # Pending work keeps the memory it uses alive, so the address still means this memory.
        return e
    return None


def find(t):
    """The tracker of `t`'s storage, or None when no stream work has used it."""
    if native is not None:
        return native.registry_find(t)
    if not _entries:
        return None
    e = _live(base_of(t))
    return None if e is None else e.tracker


def tracker(t):
    """The tracker of `t`'s storage, made on first use; None for a tensor without memory."""
    if native is not None:
        return native.registry_tracker(t)
    base = base_of(t)
    e = _entries.get(base)
    if e is not None and e.alive():
        return e.tracker
    if base == 0:
        return None
    with _lock:
        e = _live(base)
        if e is not None:
            e.weak.append(_storage(t)._weak_ref())
            return e.tracker
        st = _storage(t)
        _drop_dead_overlaps(base, base + st.nbytes())
        h = _C._torch_tracker(base, st.nbytes())
        _entries[base] = _Entry(h, st._weak_ref(), base + st.nbytes(), True)
        _maybe_sweep()
        return h


def _drop_dead_overlaps(base, end):
    # Entries over [base, end) whose storages are gone and whose work has finished stand for
    # memory freed since (maybe handed out again): a tracker made there must not join them. A walk
    # of every entry, only when a storage that no stream work made is first used. (_lock held.)
    dead = [b for b, e in _entries.items()
            if b < end and e.end > base and e.freed()]
    for b in dead:
        _release(_entries.pop(b))


def _release(e):
    # A tracker made for memory that was freed: later trackers made over it must not join it,
    # even while something still holds it (a queued work item, a Python reference).
    if e.wrapped:
        _C._torch_release(e.tracker)


def new_tracker(t, base, nbytes):
    """The tracker of `t`, a tensor just allocated at `base` with `nbytes` of storage: an entry
    found at that address belongs to memory freed before (pending work would have kept it), so
    it is replaced without asking."""
    if native is not None:
        return native.registry_fresh(t)
    h = _C._torch_tracker(base, nbytes, True)
    entry = _Entry(h, _storage(t)._weak_ref(), base + nbytes, True)
    # Under the lock: a sweep on another thread walks the entries (and may be switched out of the
    # GIL in the middle of the walk).
    with _lock:
        old = _entries.get(base)
        _entries[base] = entry
        if old is not None:
            _release(old)
        _maybe_sweep()
    return h


def share(t, streamrt_tensor):
    """Records that torch tensor `t` was made on `streamrt_tensor`'s memory (torch.from_dlpack):
    torch work on `t` is tracked as work on the streamrt tensor's storage."""
    if native is not None:
        native.registry_share(t, streamrt_tensor)
        return
    base = base_of(t)
    if base == 0:
        return
    with _lock:
        e = _live(base)
        if e is not None:
            e.weak.append(_storage(t)._weak_ref())
            return
        _entries[base] = _Entry(streamrt_tensor, _storage(t)._weak_ref(),
                                base + _storage(t).nbytes(), False)
        _maybe_sweep()


def _maybe_sweep():
    # Drops the entries of dead storages with nothing pending; amortised over the insertions.
    global _sweep_at
    if len(_entries) < _sweep_at:
        return
    for base in [b for b, e in _entries.items() if e.freed()]:
        _release(_entries.pop(base))  # (every writer of _entries holds _lock, as the caller does)
    _sweep_at = max(1024, 2 * len(_entries))


def sweep():
    """Drops every entry whose storages are gone and whose work has finished (tests, uninstall)."""
    global _sweep_at
    if native is not None:
        native.registry_sweep()
        return
    with _lock:
        _sweep_at = 0
        _maybe_sweep()


def entry_count():
    """Entries alive now (a test's leak check)."""
    if native is not None:
        return native.registry_size()
    return len(_entries)


def wait_host(t, for_write):
    """Host access to torch tensor `t`: waits (GIL released) for the pending writes to its storage,
    and its pending reads too when `for_write`; raises the failure of the work waited for."""
    if native is not None:
        h = native.registry_find(t)
        if h is not None:
            _C._torch_host_access(h, for_write)
        return
    if not _entries:
        return
    e = _live(base_of(t))
    if e is not None:
        _C._torch_host_access(e.tracker, for_write)
