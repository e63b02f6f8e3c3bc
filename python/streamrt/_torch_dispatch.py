"""The torch dispatch mode of streamrt.torch (docs/torch.md, "How it works").

While streamrt.torch is installed, a thread that entered a stream context has this mode set
(torch's dispatch-mode slot, which is per thread). Every aten op of the thread then reaches
``_Mode.__torch_dispatch__`` below autograd, and:

* inside a stream context, the op is *enqueued*: its outputs' shapes, strides and dtypes come from
  running it on meta tensors (cached per op and argument layout), the outputs are allocated at
  once, and a work item that runs the real kernel into them (its ``out=`` overload when it has one)
  goes to the current stream after the tracked writers (and, for what it writes, readers) of its
  tensors on other streams. The call returns the outputs at once.
* ops that cannot be enqueued (random numbers, data-dependent results such as ``item()`` or
  ``nonzero``, ops without a meta kernel, metadata changes such as ``resize_``) run on the calling
  thread after waiting for the pending work on their tensors: *host ops*.
* outside a stream context every op is a host op: it waits for the pending work on its tensors
  (never reading them early), then runs as eager torch does. Views (metadata only) never wait.
"""

import importlib.util
import os
import threading
import time
import warnings

import torch

from . import _streamrt as _C
from . import _torch_compat as _compat
from . import _torch_tracking as _tracking

# Failures of torch ops run on streams name the user's line, not torch's Python wrappers
# (torch.nn.functional, torch._tensor) that called the op.
for _path in {torch.__file__, os.path.abspath(torch.__file__)}:
    _C._add_origin_skip(os.path.join(os.path.dirname(_path), ""))

_VIEW, _ALLOC, _HOST, _WRITE, _FUNCTIONAL = range(5)

_Tensor = torch.Tensor
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_strided = torch.strided
_cpu = torch.device("cpu")
_meta = torch.device("meta")
_exclude_set = torch._C._dispatch_tls_local_exclude_set
_data_ptr = _compat.TensorBase.data_ptr  # the C methods (install() wraps the Python ones)
_storage_offset = _compat.TensorBase.storage_offset
_element_size = _compat.TensorBase.element_size
_expired = torch.UntypedStorage._expired
_TorchExclude = torch._C.ExcludeDispatchKeyGuard


class _Exclude:
    """The dispatch keys a work item run through Python excludes: `keys`, and the native part's
    own (the fast path's and the pending marks', which torch's Python API cannot name), so that an
    item run on a guarded host thread helping with queued work neither waits for itself nor is
    enqueued again. Restored when the object goes."""

    __slots__ = ("_torch", "_ours")

    def __init__(self, keys):
        self._torch = _TorchExclude(keys)
        self._ours = _native.ExcludeOurs() if _native is not None else None
_empty_strided = torch.empty_strided
_enqueue_item = _C._torch_enqueue
_current_stream = _C.current_stream

# Ops with results that depend on the data, or that change a tensor's metadata or memory in place
# (pending work must not see that change): host ops.
_HOST_NAMES = frozenset(
    "aten::" + n
    for n in (
        "_local_scalar_dense item is_nonzero equal allclose set_ resize_ resize_as_ "
        "_resize_output_ record_stream nonzero masked_select unique _unique _unique2 "
        "unique_dim unique_consecutive bincount histc repeat_interleave _assert_async "
        "_copy_from _copy_from_and_resize"
        # torch 1.13's meta kernels give some of these outputs other sizes than the CPU kernel:
        " _embedding_bag _embedding_bag_forward_only"
    ).split()
)
# Ops that only make or ask about metadata or memory: they read no element, so they run at once.
_ALLOC_NAMES = frozenset(
    "aten::" + n
    for n in ("empty empty_strided empty_like new_empty new_empty_strided _unsafe_view lift_fresh "
              "alias detach is_pinned is_same_size is_set_to result_type can_cast promote_types "
              "is_floating_point is_complex is_signed is_conj is_neg _is_zerotensor is_inference "
              "size stride sym_size sym_stride sym_numel sym_storage_offset numel dim "
              "storage_offset _version _nnz sparse_dim dense_dim is_coalesced output_nr "
              "_has_same_storage_numel _debug_has_internal_overlap").split()
)
# torch.autograd.profiler.record_function's ops (the optimizer's step and zero_grad use it): they
# only mark a range for torch's profiler and touch no tensor data, so they run at once.
_IMMEDIATE_NAMES = frozenset(
    "profiler::" + n
    for n in ("_record_function_enter", "_record_function_enter_new", "_record_function_exit")
)
# Arguments torch 1.13's schemas do not mark as written although the op writes them.
_EXTRA_WRITES = {"aten::native_batch_norm": ("running_mean", "running_var")}
_REALLOCATING_OUT = _compat.REALLOCATING_OUT
# Keyword arguments of a functional op that its out= overload takes from the output tensor.
_OUTPUT_OPTIONS = frozenset(("dtype", "layout", "device", "pin_memory"))

# (dynamic_output_shape is not among them: it marks aten::index, whose meta kernel infers the
# result for integer indices and refuses boolean masks, which then run as host ops.)
_HOST_TAGS = tuple(
    getattr(torch.Tag, n)
    for n in ("nondeterministic_seeded", "data_dependent_output", "inplace_view")
    if hasattr(torch.Tag, n)
)


class _Local(threading.local):
    depth = 0  # stream contexts entered on this thread since install()
    armed = False  # whether the mode is this thread's dispatch mode
    mode_off = False  # armed, but the mode is off while the fast path takes the thread's ops
    guard = None  # the native module guarding this thread (arm() with the fast path), or None


tls = _Local()
installed = False  # set by streamrt.torch.install()


class _Plan:
    """What an op is, from its schema (made once per op overload)."""

    __slots__ = ("kind", "names", "written", "returns", "out_op", "out_names", "keep", "fresh",
                 "device_kw", "label", "raw", "out_overload", "func", "written_at")

    def __init__(self, func):
        schema = func._schema
        name = schema.name
        args = schema.arguments
        self.names = [a.name for a in args if not a.kwarg_only]
        self.device_kw = any(a.name == "device" and a.kwarg_only for a in args)
        self.label = _C._torch_label(func)  # the profiler's "aten::mm"
        self.raw = func._op  # the C builtin behind the OpOverload (no Python frame per call)
        written = {a.name for a in args if a.alias_info is not None and a.alias_info.is_write}
        written.update(_EXTRA_WRITES.get(name, ()))
        self.written = frozenset(written)
        self.written_at = [n in written for n in self.names]
        self.out_op = None
        self.out_overload = None
        self.out_names = ()
        self.keep = None
        rets = schema.returns
        tensor_returns = all(_is_tensor_type(r.type) for r in rets)
        self.fresh = any(r.alias_info is None for r in rets)
        # Returns that alias a written argument: which argument (by alias set).
        sets = {}
        for a in args:
            if a.alias_info is not None and a.alias_info.is_write:
                sets[tuple(sorted(a.alias_info.before_set))] = a.name
        self.returns = [
            sets.get(tuple(sorted(r.alias_info.before_set))) if r.alias_info is not None else None
            for r in rets
        ]
        tags = getattr(func, "tags", ())
        if name in _ALLOC_NAMES or name in _IMMEDIATE_NAMES:
            self.kind = _ALLOC
        elif not name.startswith("aten::"):
            # Other libraries' ops (the profiler's record_function, quantized, custom ops): what
            # they return and do is not known from meta tensors.
            self.kind = _HOST
        elif name in _HOST_NAMES or any(t in tags for t in _HOST_TAGS) or not tensor_returns:
            self.kind = _HOST
        elif not rets and not written:
            self.kind = _HOST
        elif any(r.alias_info is not None and not r.alias_info.is_write for r in rets):
            self.kind = _HOST if written else _VIEW
        elif written:
            self.kind = _WRITE
            if self.fresh:
                self._find_out_op(func)
        else:
            self.kind = _FUNCTIONAL
            self._find_out_op(func)

    def _find_out_op(self, func):
        # The out= overload of a functional op: the same arguments (less output options such as
        # dtype, which the output tensor carries), plus one written keyword argument per return.
        schema = func._schema
        if schema.name in _REALLOCATING_OUT:
            return
        mine = {a.name: str(a.type) for a in schema.arguments}
        packet = func.overloadpacket
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op is func:
                continue
            theirs_args = op._schema.arguments  # (a new list of new objects at each access)
            outs = [a for a in theirs_args
                    if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
            if len(outs) != len(schema.returns) or not outs:
                continue
            out_names = {a.name for a in outs}
            rest = [a for a in theirs_args if a.name not in out_names]
            if any(mine.get(a.name) != str(a.type) for a in rest):
                continue
            theirs = {a.name for a in rest}
            if any(n not in theirs and n not in _OUTPUT_OPTIONS for n in mine):
                continue
            if any(n not in theirs for n in self.written):
                continue
            self.out_op = op._op
            self.out_overload = op
            self.out_names = tuple(a.name for a in outs)
            self.keep = frozenset(theirs)
            return


def _is_tensor_type(t):
    s = str(t)
    return s in ("Tensor", "Tensor?", "Tensor[]", "Optional[Tensor]", "List[Tensor]")


# Op overload -> plan, by id(): OpOverload.__hash__ is a Python function, a call per lookup. The
# overloads live as long as torch (its packets cache them), so an id is never reused for another.
_plans = {}


def plan_of(func):
    p = _plans.get(id(func))
    if p is None:
        p = _plans[id(func)] = _Plan(func)
        p.func = func  # (keeps it alive too)
    return p


# ------------------------------------------------------------------------------------------------
# Scanning arguments


class _Unsupported(Exception):
    """An argument streamrt.torch does not enqueue (not a CPU strided tensor): a host op."""


def _scan_value(v, written, tensors, key):
    if isinstance(v, _Tensor):
        if type(v) not in _PLAIN or not v.is_cpu or v.layout is not _strided:
            raise _Unsupported
        tensors.append((v, written))
        key.append((v.shape, v.stride(), v.dtype))
    elif isinstance(v, (list, tuple)):
        key.append(len(v))
        for x in v:
            _scan_value(x, written, tensors, key)
    elif isinstance(v, torch.device):
        if v.type != "cpu":
            raise _Unsupported
        key.append(v)
    else:
        key.append(v)


def _scan(plan, args, kwargs):
    tensors = []
    key = []
    written = plan.written_at  # per position
    for i, v in enumerate(args):
        if type(v) is _Tensor:  # the common case, inline
            if not v.is_cpu or v.layout is not _strided:
                raise _Unsupported
            tensors.append((v, i < len(written) and written[i]))
            key.append((v.shape, v.stride(), v.dtype))
        else:
            _scan_value(v, i < len(written) and written[i], tensors, key)
    if kwargs:
        for k, v in kwargs.items():
            key.append(k)
            _scan_value(v, k in plan.written, tensors, key)
    return tensors, tuple(key)


def _tensors_of(plan, args, kwargs):
    """(tensor, written) of every tensor argument, for a host op."""
    out = []
    names = plan.names
    written = plan.written

    def add(v, w):
        if isinstance(v, _Tensor):
            out.append((v, w))
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x, w)

    for i, v in enumerate(args):
        add(v, i < len(names) and names[i] in written)
    for k, v in kwargs.items():
        add(v, k in written)
    return out


# ------------------------------------------------------------------------------------------------
# Output inference on meta tensors

_HOST_RESULT = object()  # cached: this op with these layouts must run as a host op
_meta_cache = {}
_META_CACHE_MAX = 20000


def _to_meta(v):
    if isinstance(v, _Tensor):
        return _empty_strided(v.shape, v.stride(), dtype=v.dtype, device=_meta)
    if isinstance(v, list):
        return [_to_meta(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_to_meta(x) for x in v)
    if isinstance(v, torch.device):
        return _meta
    return v


def _spec(r):
    if isinstance(r, _Tensor):
        return (tuple(r.shape), r.stride(), r.dtype)
    if isinstance(r, (list, tuple)):
        return type(r)(_spec(x) for x in r)
    return r


_QUANTIZED = {getattr(torch, n) for n in ("quint8", "qint8", "qint32", "quint4x2", "quint2x4")
              if hasattr(torch, n)}


def _quantized(x):
    return (isinstance(x, torch.dtype) and x in _QUANTIZED) or (
        isinstance(x, _Tensor) and x.is_quantized)


def _infer(func, plan, args, kwargs):
    """The outputs' (shape, stride, dtype), as the structure the op returns; _HOST_RESULT when
    the op must run on the host (no meta kernel, data-dependent, an error to raise as eager does,
    an out= argument the op would resize, or quantized tensors)."""
    if (func._schema.name.startswith("aten::quantize_") or any(_quantized(a) for a in args)
            or any(_quantized(v) for v in kwargs.values())):
        # A quantized output carries its quantizer, which no output made from the meta result
        # has (torch 2.x's meta kernel for quantize_per_tensor even returns float32; a dtype
        # argument may reach here as a plain int, so the op is also known by its name).
        return _HOST_RESULT
    margs = [_to_meta(a) for a in args]
    mkwargs = {k: _to_meta(v) for k, v in kwargs.items()}
    if plan.device_kw:
        mkwargs["device"] = _meta  # a factory: make the meta twin (None meant the CPU)
    try:
        r = func(*margs, **mkwargs)
    except Exception:
        # No meta kernel, or an error: the host op gives exactly eager torch's behaviour.
        return _HOST_RESULT
    if plan.written:
        # A written argument whose meta twin changed shape would be resized: a host op.
        for i, name in enumerate(plan.names[: len(args)]):
            if name in plan.written and not _same_shape(args[i], margs[i]):
                return _HOST_RESULT
        for k in kwargs:
            if k in plan.written and not _same_shape(kwargs[k], mkwargs[k]):
                return _HOST_RESULT
    if not plan.fresh:
        return (None, False, True, None, ())
    fresh = [x for x, src in zip(_as_list(r), plan.returns) if src is None]
    if len(fresh) != len(plan.returns):
        return _HOST_RESULT
    spec = _spec(r)
    flat = _flat_spec(spec, [])
    sizes = tuple(_nbytes(*f) for f in flat)
    single = isinstance(r, _Tensor)
    return (spec, plan.out_op is not None and _out_op_keeps(plan, margs, mkwargs, spec), False,
            flat[0] if single else None, sizes)


def _out_op_keeps(plan, margs, mkwargs, spec):
    # Whether the out= overload fills outputs of exactly these layouts without resizing them
    # (a resize reallocates the memory a tracker stands for): torch 1.13's are not all like their
    # functional op (mse_loss.out resizes its 0-d result to the elementwise shape and back, with
    # a warning). Checked on meta tensors; else the op runs functionally and its results are
    # copied into the outputs.
    outs = _allocate(spec, _meta)
    kw = {k: v for k, v in mkwargs.items() if k in plan.keep}
    for name, o in zip(plan.out_names, _as_list(outs)):
        kw[name] = o
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            plan.out_op(*margs, **kw)
        except Exception:
            return False
    if caught:
        return False
    return all(_spec(o) == sp for o, sp in zip(_flat(outs, []), _flat_spec(spec, [])))


def _flat_spec(spec, out):
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype):
        out.append(spec)
    elif isinstance(spec, (list, tuple)):
        for x in spec:
            _flat_spec(x, out)
    return out


def _same_shape(real, meta):
    if isinstance(real, _Tensor):
        return real.shape == meta.shape and real.stride() == meta.stride()
    if isinstance(real, (list, tuple)):
        return all(_same_shape(a, b) for a, b in zip(real, meta))
    return True


def _as_list(r):
    return list(r) if isinstance(r, tuple) else [r]


_itemsize = {}


def _nbytes(shape, stride, dtype):
    """The storage bytes torch allocates for a tensor of this layout (0 when it is empty)."""
    if 0 in shape:
        return 0
    size = _itemsize.get(dtype)
    if size is None:
        size = _itemsize[dtype] = torch.empty((), dtype=dtype).element_size()
    return (1 + sum((n - 1) * st for n, st in zip(shape, stride))) * size


_KEYS = []


def _keys():
    # The dispatch keys the work items exclude: those excluded below autograd (autograd,
    # ADInplaceOrView, ...), the same for every op; autocast (applied on the host already); and
    # the Python keys and the fast path's, so that an item run on a thread that has a dispatch
    # mode set (a host thread helping to run queued work) never reaches Python.
    keys = _exclude_set()
    for name in ("AutocastCPU", "AutocastCUDA", "AutocastXPU", "Python", "PythonTLSSnapshot",
                 "PythonDispatcher", "PreDispatch", "Fake", "DeferredInit"):
        k = getattr(torch._C.DispatchKey, name, None)
        if k is not None:
            keys = keys | torch._C.DispatchKeySet(k)
    _KEYS.append(keys)
    return keys


def _allocate(spec, device=_cpu):
    if spec is None:
        return None
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype):
        return _empty_strided(spec[0], spec[1], dtype=spec[2], device=device)
    return type(spec)(_allocate(x, device) for x in spec)


def _flat(r, out):
    if isinstance(r, _Tensor):
        out.append(r)
    elif isinstance(r, (list, tuple)):
        for x in r:
            _flat(x, out)
    return out


# ------------------------------------------------------------------------------------------------
# Work items run on a streamrt worker. The common one is the op itself, called by bind_torch.cpp
# with the dispatch keys excluded where the op was called (autograd and ADInplaceOrView among
# them), so the kernel runs as it would have there, without recording autograd history or bumping
# version counters a second time. An op without an out= overload runs here, then its results
# are copied into the outputs handed out at the call.


def _run_copy(keys, fn, args, kwargs, outs):
    guard = _Exclude(keys)
    try:
        results = _flat(fn(*args, **kwargs), [])
        for o, r in zip(_flat(outs, []), results):
            o.copy_(r)
    finally:
        del guard


_raw_data_ptr = _compat.TensorBase.data_ptr


def _run_first(key, keys, fn, args, kwargs, outs):
    # The first run of an op with these layouts into outputs from its meta kernel: checks that
    # the kernel kept them (the same memory and sizes). torch 1.13 has meta kernels whose sizes
    # differ from the CPU kernel's and out= overloads that reallocate; such an op fails here,
    # loudly, once, and runs as a host op from then on.
    flat = _flat(outs, [])
    before = [(_raw_data_ptr(o), o.shape) for o in flat]
    guard = _Exclude(keys)
    try:
        fn(*args, **kwargs)
    finally:
        del guard
    after = [(_raw_data_ptr(o), o.shape) for o in flat]
    if after != before:
        _meta_cache[key] = _HOST_RESULT
        raise RuntimeError(
            f"streamrt.torch: {key[0].func} changed the outputs it was given (sizes or memory "
            f"{[tuple(b[1]) for b in before]} -> {[tuple(a[1]) for a in after]}): its meta kernel "
            "or out= overload does not match its CPU kernel in this torch. It runs as a host op "
            "from now on; run this call again")
    current = _meta_cache.get(key)  # (the host may have cleared the cache meanwhile)
    if current is not None and current is not _HOST_RESULT:
        _meta_cache[key] = current[:2] + (True,) + current[3:]


# ------------------------------------------------------------------------------------------------
# The mode


def host_op(func, plan, args, kwargs):
    """Runs `func` now on this thread, after the pending work on its tensors (writers; for the
    tensors it writes, readers too)."""
    if _tracking.tracked():
        for t, written in _tensors_of(plan, args, kwargs):
            if t.is_cpu and t.layout is _strided:
                _tracking.wait_host(t, written)
    return func(*args, **kwargs)


def enqueue(func, args, kwargs):
    plan = _plans.get(id(func)) or plan_of(func)
    kind = plan.kind
    teach = _fast is not None and _fast.pending()  # the fast path missed this call: teach it
    if kind <= _ALLOC:  # a view or an allocation: metadata only
        if teach:
            _fast.teach_kind(func, _FAST_META)
        return func(*args, **kwargs)
    if kind == _HOST:
        if teach:
            _fast.teach_kind(func, _FAST_HOST)
        return host_op(func, plan, args, kwargs)
    try:
        tensors, key = _scan(plan, args, kwargs)
    except _Unsupported:
        return host_op(func, plan, args, kwargs)
    # (the plan, not the op: its hash is cheap; the default dtype decides factories' results)
    key = (plan, key, torch.get_default_dtype())
    inferred = _meta_cache.get(key)
    if inferred is None:
        if len(_meta_cache) >= _META_CACHE_MAX:
            _meta_cache.clear()
        inferred = _meta_cache[key] = _infer(func, plan, args, kwargs)
    if inferred is _HOST_RESULT:
        return host_op(func, plan, args, kwargs)
    spec, use_out, checked, single, sizes = inferred

    # The trackers of the tensors read and written (inlined _tracking.tracker: the hot path of
    # the Python registry; the C++ registry gives one Python object per tracker too).
    accesses = {}
    entries = _tracking._entries
    native_registry = _tracking.native is not None
    for t, written in tensors:
        if native_registry:
            h = _tracking.tracker(t)
            if h is None:
                continue
        else:
            e = entries.get(_data_ptr(t) - _storage_offset(t) * _element_size(t))
            if e is not None and not _expired(e.weak[0]):
                h = e.tracker
            else:
                h = _tracking.tracker(t)
                if h is None:
                    continue
        if written or id(h) not in accesses:
            accesses[id(h)] = (h, written)
    reads = [h for h, w in accesses.values() if not w]
    writes = [h for h, w in accesses.values() if w]
    outs = None
    if single is not None:  # one output: the common case
        outs = _empty_strided(single[0], single[1], dtype=single[2])
        if sizes[0]:
            writes.append(_tracking.new_tracker(outs, _data_ptr(outs), sizes[0]))
    elif spec is not None:
        outs = _allocate(spec)
        for o, nbytes in zip(_flat(outs, []), sizes):
            if nbytes:
                writes.append(_tracking.new_tracker(o, _data_ptr(o), nbytes))

    keys = _KEYS[0] if _KEYS else _keys()
    stream = _current_stream()  # (the thread's, as the fast path's: set_stream() included)
    if outs is not None and use_out:
        kw = {k: v for k, v in kwargs.items() if k in plan.keep}
        for name, o in zip(plan.out_names, _as_list(outs)):
            kw[name] = o
        if checked and _enqueue_native is not None:
            _enqueue_native(stream, plan.label, plan.out_overload, args, kw, reads, writes)
            if teach and kind == _FUNCTIONAL:
                _fast.teach(func, _FAST_OUT, (), plan.out_overload, plan.out_names,
                            _flat_spec(spec, []))
        elif checked:
            _enqueue_item(stream, plan.label, keys, plan.out_op, args, kw, reads, writes)
        else:
            _enqueue_item(stream, plan.label, None, _run_first,
                          (key, keys, plan.out_op, args, kw, outs), None, reads, writes)
    elif outs is not None:
        _enqueue_item(stream, plan.label, None, _run_copy, (keys, plan.raw, args, kwargs, outs),
                      None, reads, writes)
        if teach and kind == _FUNCTIONAL:
            _fast.teach(func, _FAST_COPY, (), None, (), _flat_spec(spec, []))
    elif _enqueue_native is not None:
        _enqueue_native(stream, plan.label, func, args, kwargs or None, reads, writes)
        if teach:
            _fast.teach(func, _FAST_WRITE, tuple(plan.written), None, (), ())
    else:
        _enqueue_item(stream, plan.label, keys, plan.raw, args, kwargs or None, reads, writes)
    if _mark is not None:  # the pending state travels with the tensors (any thread waits)
        _mark([t for t, _ in tensors] + (_flat(outs, []) if outs is not None else []))
    return _result(plan, args, kwargs, outs)


def _result(plan, args, kwargs, outs):
    if plan.kind == _FUNCTIONAL:
        return outs
    # Returns that are written arguments, and fresh ones in order.
    fresh = iter(_as_list(outs)) if outs is not None else iter(())
    values = []
    names = plan.names
    for src in plan.returns:
        if src is None:
            values.append(next(fresh))
        elif src in kwargs:
            values.append(kwargs[src])
        else:
            values.append(args[names.index(src)])
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return tuple(values)


# Python-path enqueues under way (uninstall() waits for them before it synchronizes: one that
# checked `installed` before the switch may release the GIL before its work is queued).
_in_flight = threading.Condition()
_in_flight_count = 0


def _enter_enqueue():
    # Counts an enqueue in; False when streamrt.torch was uninstalled meanwhile.
    global _in_flight_count
    with _in_flight:
        if not installed:
            return False
        _in_flight_count += 1
        return True


def _leave_enqueue():
    global _in_flight_count
    with _in_flight:
        _in_flight_count -= 1
        if _in_flight_count == 0:
            _in_flight.notify_all()


def set_installed(on):
    """Switches `installed` (streamrt.torch.install and uninstall), under the lock that counts
    enqueues in, so none starts after the switch off."""
    global installed
    with _in_flight:
        installed = on


def quiesce(timeout_s):
    """After set_installed(False): waits until no enqueue that started before is under way (the
    Python path's and the fast path's). False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    with _in_flight:
        if not _in_flight.wait_for(lambda: _in_flight_count == 0, timeout_s):
            return False
    if _native is not None:
        return _native.quiesce(max(0.0, deadline - time.monotonic()))
    return True


def dispatch(func, args, kwargs):
    """An op of this thread, below autograd: enqueued inside a stream context, else a host op
    that waits for the pending work on its tensors (views and allocations never wait)."""
    if tls.depth > 0 and installed and _enter_enqueue():
        try:
            return enqueue(func, args, kwargs)
        finally:
            _leave_enqueue()
    plan = _plans.get(id(func)) or plan_of(func)
    if plan.kind <= _ALLOC or not _tracking.tracked():
        return func(*args, **kwargs)
    return host_op(func, plan, args, kwargs)


def _from_fast_path(func, args, kwargs):
    # The ops of a thread inside a stream context that the fast path did not enqueue (no dispatch
    # mode is set there while the fast path is on: torch 2.x would hand it every op first).
    return dispatch(func, args, kwargs)


class Mode(torch.utils._python_dispatch.TorchDispatchMode):
    """streamrt.torch's dispatch mode (set per thread; see the module's doc)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _compat.MODE_STAYS_SET_IN_DISPATCH:
            _compat.pop_mode(self)
        try:
            if kwargs is None:
                kwargs = {}
            for t in types:
                if t not in _PLAIN:
                    # Another subclass (a fake tensor...): its own __torch_dispatch__ decides.
                    return func(*args, **kwargs)
            return dispatch(func, args, kwargs)
        finally:
            if tls.armed:
                if installed:
                    if _compat.MODE_STAYS_SET_IN_DISPATCH:
                        _compat.push_mode(self)
                elif _compat.MODE_STAYS_SET_IN_DISPATCH:
                    # Uninstalled from another thread: not pushed back, so this thread is left.
                    # (Where torch keeps the mode set, it stays until the thread leaves its
                    # context: context_left.)
                    tls.armed = False


MODE = Mode()
_C._set_torch_runtime(_Exclude)

# The native part on torch's C++ API (built where Debian's libtorch-dev is installed): work items
# run with no GIL at all, trackers live in its C++ registry, and small ops seen before are enqueued
# by its fast path without Python (torch_runner_fast.cpp), taught by enqueue() above. Without it
# work items call the op through Python (bind_torch.cpp) and everything else is this file's.
# why there is no fast path, or None
fast_unavailable = "streamrt._streamrt_torch is not built (`pip install -v` says why)"
_native = None
try:
    _built = importlib.util.find_spec(__package__ + "._streamrt_torch") is not None
except ImportError:  # (an import hook that hides it)
    _built = False
if _built:
    try:
        from . import _streamrt_torch as _native
    except ImportError as e:
        fast_unavailable = f"streamrt._streamrt_torch does not load beside this torch: {e}"
if _native is not None and _native.built_for != torch.__version__:
    fast_unavailable = (
        f"streamrt._streamrt_torch was built for torch {_native.built_for}, not for this torch "
        f"{torch.__version__}: reinstall streamrt beside this torch (pip install <streamrt>)")
    _native = None
if _native is None and not fast_unavailable.startswith("streamrt._streamrt_torch is not built"):
    warnings.warn(f"streamrt.torch runs on its Python path: {fast_unavailable}", stacklevel=2)
_enqueue_native = None
_mark = None  # _native.mark while the native part is used
_fast = None  # _native while its fast path is used
if _native is not None:
    _native.set_handler(_from_fast_path)
    _native.set_waiter(_tracking.wait_host)
    _C._set_torch_runner(_native.runner)
    # What teach_kind and teach take: torch_runner_fast.hpp's enums, as the module binds them.
    _FAST_META, _FAST_HOST = _native.Kind.META, _native.Kind.HOST
    _FAST_WRITE, _FAST_OUT, _FAST_COPY = _native.Mode.WRITE, _native.Mode.OUT, _native.Mode.COPY
    _ok, _why = _native.connect(_C._torch_host())
    fast_unavailable = None if _ok else f"torch refused the fast path's dispatch key: {_why}"


def set_native(on):
    """streamrt.torch's native part (True, where built: the runner, the C++ registry and the fast
    path) or its Python path alone (False), as without _streamrt_torch: the tests run both.
    Returns whether the native part is used now. Not while stream contexts are open."""
    global _enqueue_native, _fast, _mark
    use = bool(on) and _native is not None
    _enqueue_native = _C._torch_enqueue_native if use else None
    _mark = _native.mark if use else None
    _tracking.use_native(_native if use else None)
    _fast = _native if use and fast_unavailable is None else None
    _update_fast()
    return use


def set_fast(on):
    """The fast path on (where available) or off, the rest of the native part staying as it is:
    how the benchmark and the tests run the dispatch mode's path. Returns whether it is on.
    Threads already inside a stream context take it from their next outermost context."""
    global _fast
    _fast = _native if on and _tracking.native is not None and fast_unavailable is None else None
    _update_fast()
    return _fast is not None


def _update_fast():
    # The fast path runs while installed, with the native part. The calling thread's guard
    # follows the switch at once (arm() picks the fast path's or the mode); other guarded threads
    # at their next arm().
    if _native is not None:
        _native.set_enabled(installed and _fast is not None)
    if tls.armed and tls.depth == 0 and tls.guard is not _fast:
        disarm()
        arm()


def context_entered():
    """A stream context was entered on this thread (after arm())."""
    tls.depth += 1
    if tls.depth == 1 and _fast is not None:
        # The fast path's fallback takes every op of the context; the mode stays off meanwhile.
        _fast.set_active(True)
        if tls.armed and tls.guard is None:
            _compat.pop_mode(MODE)
            tls.mode_off = True


def context_left():
    """A stream context of this thread was left."""
    if tls.depth > 0:
        tls.depth -= 1
        if tls.depth == 0 and _native is not None:
            _native.set_active(False)
        if tls.depth == 0 and tls.mode_off:
            tls.mode_off = False
            if tls.armed and installed:
                _compat.push_mode(MODE)
        if tls.depth == 0 and not installed:
            disarm()  # uninstalled from another thread meanwhile: no mode left on this thread


set_native(True)


def arm():
    """Guards this thread (streamrt.torch is installed and the thread installed it or entered a
    context): with the fast path, its fallback waits for the pending work of every op's tensors
    outside contexts (no dispatch mode at all); without it, the dispatch mode does."""
    if not tls.armed:
        if _compat.other_modes_active():
            raise RuntimeError(
                "streamrt.torch: a torch dispatch mode (a `with SomeMode():` block) is active on "
                "this thread; enter the stream context outside it")
        tls.armed = True
        tls.guard = _fast
        if tls.guard is not None:
            tls.guard.set_guarded(True)
        else:
            _compat.push_mode(MODE)


def disarm():
    """Stops guarding this thread."""
    if tls.armed:
        tls.armed = False
        if tls.guard is not None:
            tls.guard.set_guarded(False)
            tls.guard = None
        else:
            _compat.pop_mode(MODE)
