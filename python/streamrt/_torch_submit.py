"""How a planned torch op becomes stream work, for streamrt.torch (docs/torch.md, "How it works").

Three ways to submit, one class each, chosen once by _torch_mode.use() (install() picks the best
one available):

* ``PythonPath``: trackers in the Python registry, work items that call the op through Python
  (bind_torch.cpp takes the GIL on the worker). What runs without ``_streamrt_torch``.
* ``RunnerPath``: ``_streamrt_torch``'s kernel runner calls the op through torch's dispatcher with
  no Python and no GIL; trackers live in its C++ registry, and tensors with pending work carry its
  mark, so that every thread's ops on them wait.
* ``FastPath``: the runner, plus the fast path: a C++ fallback that enqueues the ops of threads
  inside stream contexts without Python once this module has taught it what each op is. It also
  guards threads outside contexts in place of the dispatch mode.

The mode (_torch_mode.py) plans the op (_torch_plan.py) and hands it to the path's submit().
"""

import importlib.util
import warnings

import torch

from . import _streamrt as _C
from . import _torch_compat as _compat
from . import _torch_plan as _plan
from . import _torch_tracking as _tracking

_data_ptr = _compat.TensorBase.data_ptr  # the C methods (install() wraps the Python ones)
_storage_offset = _compat.TensorBase.storage_offset
_element_size = _compat.TensorBase.element_size
_expired = torch.UntypedStorage._expired
_empty_strided = torch.empty_strided
_enqueue_item = _C._torch_enqueue
_current_stream = _C.current_stream
_TorchExclude = torch._C.ExcludeDispatchKeyGuard

# ------------------------------------------------------------------------------------------------
# The native part: streamrt._streamrt_torch, on torch's C++ API, where it was built for this torch.


class _Native:
    """_streamrt_torch as loaded beside this torch (once): `module` or None, `why` there is none,
    and `fast_why` there is no fast path (None when there is)."""

    module = None
    why = "streamrt._streamrt_torch is not built (`pip install -v` says why)"
    fast_why = why


_native = None  # the _Native, once loaded
_on_miss = []  # the mode's dispatch(func, args, kwargs): where the fast path's misses go


def on_fast_path_miss(handler):
    """`handler(func, args, kwargs)` takes the ops of threads inside stream contexts that the fast
    path does not enqueue (the mode's dispatch; set once, at the mode's import)."""
    _on_miss[:] = [handler]


def _from_fast_path(func, args, kwargs):
    # (no dispatch mode is set there while the fast path is on: torch 2.x would hand it every op)
    return _on_miss[0](func, args, kwargs)


def _import_native(state):
    # Imports _streamrt_torch into `state`, or says in state.why why it is not used.
    try:
        built = importlib.util.find_spec(__package__ + "._streamrt_torch") is not None
    except ImportError:  # (an import hook that hides it)
        built = False
    if not built:
        return
    try:
        from . import _streamrt_torch as module
    except ImportError as e:
        state.why = f"streamrt._streamrt_torch does not load beside this torch: {e}"
        return
    if module.built_for != torch.__version__:
        state.why = (
            f"streamrt._streamrt_torch was built for torch {module.built_for}, not for this "
            f"torch {torch.__version__}: reinstall streamrt beside this torch "
            "(pip install <streamrt>)")
        return
    state.module = module


def native():
    """The _streamrt_torch module used beside this torch, or None (unavailable() says why).
    Loaded and connected to streamrt on the first call; warns there when it exists but cannot be
    used."""
    global _native
    if _native is not None:
        return _native.module
    state = _Native()
    _import_native(state)
    module = state.module
    if module is None:
        state.fast_why = state.why
        if not state.why.startswith("streamrt._streamrt_torch is not built"):
            warnings.warn(f"streamrt.torch runs on its Python path: {state.why}", stacklevel=3)
    else:
        state.why = None
        global _empty_output, _reusable_from
        _empty_output = module.empty_stream_output
        _reusable_from = module.reusable_from_nbytes
        module.set_handler(_from_fast_path)
        module.set_waiter(_tracking.wait_host)
        _C._set_torch_runner(module.runner)
        ok, why = module.connect(_C._torch_host())
        state.fast_why = None if ok else f"torch refused the fast path's dispatch key: {why}"
    _native = state
    return module


def loaded():
    """_streamrt_torch where native() has loaded it, else None (loads nothing)."""
    return None if _native is None else _native.module


def unavailable(name):
    """Why path `name` ("fast", "runner" or "python") cannot be used here, or None."""
    native()
    if name == "python":
        return None
    if name == "runner":
        return _native.why
    if name == "fast":
        return _native.fast_why
    raise ValueError(f"streamrt.torch: no submission path {name!r} (fast, runner or python)")


# ------------------------------------------------------------------------------------------------
# Work items run through Python on a streamrt worker. The common one is the op itself, called by
# bind_torch.cpp with the dispatch keys excluded where the op was called (autograd and
# ADInplaceOrView among them), so the kernel runs as it would have there, without recording
# autograd history or bumping version counters a second time. An op without an out= overload runs
# here, then its results are copied into the outputs handed out at the call.


class _Exclude:
    """The dispatch keys a work item run through Python excludes: `keys`, and the native part's
    own (the fast path's and the pending marks', which torch's Python API cannot name), so that an
    item run on a guarded host thread helping with queued work neither waits for itself nor is
    enqueued again. Restored when the object goes."""

    __slots__ = ("_torch", "_ours")

    def __init__(self, keys):
        self._torch = _TorchExclude(keys)
        module = loaded()
        # (the native part also sets one intra-op thread on this thread for the item, and gives a
        # host thread its own count back after it; without it, torch's setter: one from then on)
        self._ours = module.ExcludeOurs() if module is not None else None
        if module is None and torch.get_num_threads() != 1:
            torch.set_num_threads(1)


_C._set_torch_runtime(_Exclude)
_KEYS = []


def _keys():
    # The dispatch keys the work items exclude: those excluded below autograd (autograd,
    # ADInplaceOrView, ...), the same for every op; autocast (applied on the host already); and
    # the Python keys and the fast path's, so that an item run on a thread that has a dispatch
    # mode set (a host thread helping to run queued work) never reaches Python.
    if not _KEYS:
        keys = torch._C._dispatch_tls_local_exclude_set()
        for k in _compat.WORK_ITEM_EXCLUDED_KEYS:
            keys = keys | torch._C.DispatchKeySet(k)
        _KEYS.append(keys)
    return _KEYS[0]


def _run_copy(key, keys, fn, args, kwargs, outs):
    # A functional op, its results copied into the outputs handed out at the call, which must
    # have their layouts (copy_ would broadcast or convert silently): else the op runs as a host
    # op from now on and this call fails, loudly, once.
    guard = _Exclude(keys)
    try:
        results = _plan.flat(fn(*args, **kwargs), [])
        flat = _plan.flat(outs, [])
        got = [(tuple(r.shape), r.dtype) for r in results]
        if got != [(tuple(o.shape), o.dtype) for o in flat]:
            _plan.run_on_host_from_now(key)
            raise RuntimeError(
                f"streamrt.torch: {key[0].func} returned results of other sizes or dtypes than "
                f"the outputs known for these arguments ({got}). It runs as a host op from now "
                "on; run this call again")
        for o, r in zip(flat, results):
            o.copy_(r)
    finally:
        del guard


def _run_first(key, keys, fn, args, kwargs, outs):
    # The first run of an op with these layouts into outputs from its meta kernel: checks that
    # the kernel kept them (the same memory and sizes). torch 1.13 has meta kernels whose sizes
    # differ from the CPU kernel's and out= overloads that reallocate; such an op fails here,
    # loudly, once, and runs as a host op from then on.
    flat = _plan.flat(outs, [])
    before = [(_data_ptr(o), o.shape) for o in flat]
    guard = _Exclude(keys)
    try:
        fn(*args, **kwargs)
    finally:
        del guard
    after = [(_data_ptr(o), o.shape) for o in flat]
    if after != before:
        _plan.run_on_host_from_now(key)
        raise RuntimeError(
            f"streamrt.torch: {key[0].func} changed the outputs it was given (sizes or memory "
            f"{[tuple(b[1]) for b in before]} -> {[tuple(a[1]) for a in after]}): its meta kernel "
            "or out= overload does not match its CPU kernel in this torch. It runs as a host op "
            "from now on; run this call again")
    _plan.mark_checked(key)


def _out_kwargs(plan, kwargs, outs):
    # The out= overload's keyword arguments: the op's, less the output options, plus the outputs.
    kw = {k: v for k, v in kwargs.items() if k in plan.keep}
    for name, o in zip(plan.out_names, _plan.as_list(outs)):
        kw[name] = o
    return kw


# ------------------------------------------------------------------------------------------------
# The three paths


class PythonPath:
    """Submits through Python work items, with the Python tracker registry."""

    name = "python"
    native = None  # the _streamrt_torch module this path uses, or None
    guard = None  # the module whose fallback guards threads and takes context ops, or None

    def missed(self):
        """Whether the op at hand is one the fast path missed (the planner then teaches it)."""
        return False

    def teach_kind(self, func, kind):
        """The fast path missed `func`, a view or allocation (ALLOC) or a host op (HOST)."""

    def _teach(self, func, how, written, out_op, out_names, spec):
        """The fast path missed `func` and it was enqueued `how` ("write", "out" or "copy")."""

    def accesses(self, tensors):
        """The trackers the op reads and writes, from scan()'s (tensor, written) pairs (inlined
        _tracking.tracker: the hot path of the Python registry)."""
        accesses = {}
        entries = _tracking._entries
        for t, written in tensors:
            e = entries.get(_data_ptr(t) - _storage_offset(t) * _element_size(t))
            if e is not None and not _expired(e.weak[0]):
                h = e.tracker
            else:
                h = _tracking.tracker(t)
                if h is None:
                    continue
            if written or id(h) not in accesses:
                accesses[id(h)] = (h, written)
        return ([h for h, w in accesses.values() if not w],
                [h for h, w in accesses.values() if w])

    def _enqueue_out(self, stream, plan, args, kw, reads, writes, nbytes):
        # The out= overload into the outputs, its first run checked already.
        _enqueue_item(stream, plan.label, _keys(), plan.out_op, args, kw, reads, writes, nbytes)

    def _enqueue_op(self, stream, plan, func, args, kwargs, reads, writes):
        # The op itself: it writes only its arguments.
        _enqueue_item(stream, plan.label, _keys(), plan.raw, args, kwargs or None, reads, writes)

    def mark(self, tensors):
        """The tensors have work pending now (the native part marks them)."""

    def submit(self, func, plan, args, kwargs, tensors, outputs, key, teach):
        """Enqueues the op on this thread's current stream after the work on its tensors (scan()'s
        `tensors`), into new outputs allocated now as `outputs` says; returns them (None when the
        op has none). `teach`: what this did is taught to the fast path."""
        reads, writes = self.accesses(tensors)
        outs = _allocate(outputs, writes)
        stream = _current_stream()  # (the thread's, as the fast path's: set_stream() included)
        teach_new = teach and plan.kind == _plan.FUNCTIONAL
        if outs is None:
            self._enqueue_op(stream, plan, func, args, kwargs, reads, writes)
            if teach:
                self._teach(func, "write", tuple(plan.written), None, (), None)
        elif not outputs.use_out:
            held, listed = _held_outputs(outs, outputs.nbytes)
            args, listed = _held_inputs(args, tensors, listed)
            _enqueue_item(stream, plan.label, None, _run_copy,
                          (key, _keys(), plan.raw, args, kwargs, held), None, reads, writes,
                          outputs.nbytes, listed)
            if teach_new:
                self._teach(func, "copy", (), None, (), outputs.spec)
        elif not outputs.checked:
            held, listed = _held_outputs(outs, outputs.nbytes)
            args, listed = _held_inputs(args, tensors, listed)
            kw = _out_kwargs(plan, kwargs, held)
            _enqueue_item(stream, plan.label, None, _run_first,
                          (key, _keys(), plan.out_op, args, kw, held), None, reads, writes,
                          outputs.nbytes, listed)
        else:
            self._enqueue_out(stream, plan, args, _out_kwargs(plan, kwargs, outs), reads, writes,
                              outputs.nbytes)
            if teach_new:
                self._teach(func, "out", (), plan.out_overload, plan.out_names, outputs.spec)
        self.mark([t for t, _ in tensors] + (_plan.flat(outs, []) if outs is not None else []))
        return outs


# Outputs from this many bytes on may hand their memory on once only their queued op holds them
# (the native module's empty_stream_output); None: nothing is handed on (no native module).
_reusable_from = None


def _held_outputs(outs, nbytes):
    # The outputs as a Python work item holds them, and the list of them it hands to the native
    # module to be handed on (None: none). Large ones are held through tensors of their own: the
    # caller's tensor objects would hide whether the caller still holds them, which the memory's
    # reuse by later outputs of the stream counts on. Else `outs` itself, unlisted.
    if _reusable_from is None or nbytes < _reusable_from:
        return outs, None
    held = _detached(outs)
    return held, _plan.flat(held, [])


def _held_inputs(args, tensors, listed):
    # The positional arguments as a Python work item holds them, and `listed` with the large
    # inputs it only reads: those through tensors of its own, as its outputs (_held_outputs), so
    # that a storage the caller dropped and only queued ops hold may be handed on. Only what the
    # item holds is listed: a listed tensor counts as one reference of the item's. Inputs the op
    # writes and keyword arguments stay the caller's tensors, unlisted.
    if _reusable_from is None:
        return args, listed
    written = {id(t) for t, w in tensors if w}
    read = {id(t) for t, w in tensors if not w and id(t) not in written}
    own = {}
    args = _swapped(args, read, own)
    if not own:
        return args, listed
    return args, (listed or []) + list(own.values())


def _swapped(r, read, own):
    # `r` with each large tensor of `read` (ids) replaced by a tensor of its own, kept in `own`.
    # (a module function: a nested one calling itself would keep `own` alive in a cycle until the
    # garbage collector runs, and with it the memory the item is done with)
    if isinstance(r, torch.Tensor):
        if id(r) not in own:
            if id(r) not in read or r.numel() * r.element_size() < _reusable_from:
                return r
            own[id(r)] = r.detach()
        return own[id(r)]
    if isinstance(r, (list, tuple)):
        return type(r)(_swapped(x, read, own) for x in r)
    return r


def _detached(r):
    if isinstance(r, torch.Tensor):
        return r.detach()
    if isinstance(r, (list, tuple)):
        return type(r)(_detached(x) for x in r)
    return r


def _empty_strided_cpu(sizes, strides, dtype):
    return _empty_strided(sizes, strides, dtype=dtype)


# New outputs of (sizes, strides, dtype): on _streamrt_torch's output cache once it is loaded.
_empty_output = _empty_strided_cpu


def _allocate(outputs, writes):
    # The op's new outputs, each with a fresh tracker appended to `writes`; None when it has none.
    single = outputs.single
    if single is not None:  # one output: the common case
        outs = _empty_output(single[0], single[1], single[2])
        if outputs.sizes[0]:
            writes.append(_tracking.new_tracker(outs, _data_ptr(outs), outputs.sizes[0]))
        return outs
    if outputs.spec is None:
        return None
    outs = _plan.allocate(outputs.spec, empty=_empty_output)
    for o, nbytes in zip(_plan.flat(outs, []), outputs.sizes):
        if nbytes:
            writes.append(_tracking.new_tracker(o, _data_ptr(o), nbytes))
    return outs


class RunnerPath(PythonPath):
    """Submits through _streamrt_torch's kernel runner, with its C++ registry and pending marks."""

    name = "runner"

    def __init__(self, module):
        self.native = module
        self._registry_tracker = module.registry_tracker
        self._enqueue_native = _C._torch_enqueue_native
        self.mark = module.mark

    def accesses(self, tensors):
        accesses = {}
        for t, written in tensors:
            h = self._registry_tracker(t)
            if h is None:
                continue
            if written or id(h) not in accesses:
                accesses[id(h)] = (h, written)
        return ([h for h, w in accesses.values() if not w],
                [h for h, w in accesses.values() if w])

    def _enqueue_out(self, stream, plan, args, kw, reads, writes, nbytes):
        self._enqueue_native(stream, plan.label, plan.out_overload, args, kw, reads, writes,
                             nbytes)

    def _enqueue_op(self, stream, plan, func, args, kwargs, reads, writes):
        self._enqueue_native(stream, plan.label, func, args, kwargs or None, reads, writes)


class FastPath(RunnerPath):
    """The runner, with the fast path taught by the planner what each op it missed was."""

    name = "fast"

    def __init__(self, module):
        super().__init__(module)
        self.guard = module
        self.missed = module.pending
        self._kinds = {_plan.ALLOC: module.Kind.META, _plan.HOST: module.Kind.HOST}
        self._modes = {"write": module.Mode.WRITE, "out": module.Mode.OUT,
                       "copy": module.Mode.COPY}

    def teach_kind(self, func, kind):
        self.native.teach_kind(func, self._kinds[kind])

    def _teach(self, func, how, written, out_op, out_names, spec):
        outs = _plan.flat_spec(spec, []) if spec is not None else ()
        self.native.teach(func, self._modes[how], written, out_op, out_names, outs)


PATHS = ("fast", "runner", "python")  # best first


def best():
    """The name of the best path available here."""
    return next(name for name in PATHS if unavailable(name) is None)


def make(name):
    """A new path object of path `name` (see PATHS); ValueError where it is unavailable."""
    why = unavailable(name)
    if why is not None:
        raise ValueError(f"streamrt.torch: the {name} path is unavailable: {why}")
    if name == "python":
        return PythonPath()
    return (FastPath if name == "fast" else RunnerPath)(native())
