"""What a torch op is and what it returns, for streamrt.torch (docs/torch.md, "How it works").

An op overload gets a *plan* once, from its schema: a view or allocation (metadata only, run at
once), a host op (run on the calling thread after waiting), an op that writes some of its
arguments, or a functional op with the ``out=`` overload its work item runs into new outputs. Its
outputs' shapes, strides and dtypes come from running it on meta tensors, cached per op and
argument layout. Nothing here submits work or knows about streams: _torch_submit.py does that,
_torch_mode.py decides when.
"""

import warnings

import torch

from . import _streamrt as _C
from . import _torch_compat as _compat
from . import _torch_meta_fixes as _meta_fixes

# Kinds of op, in an order the mode tests with `<=`: views and allocations first.
VIEW, ALLOC, HOST, WRITE, FUNCTIONAL = range(5)

_Tensor = torch.Tensor
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_strided = torch.strided
_cpu = torch.device("cpu")
_meta = torch.device("meta")
_empty_strided = torch.empty_strided

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
# Ops without a meta kernel in some torch this supports whose outputs' layouts follow from their
# arguments' layouts and values alone, never from their data (torch's fused transformer and
# attention kernels, and torch 1.13's searches, scans and reductions below): the first call with
# an argument layout runs on the host and teaches the layouts of its outputs; later calls with
# that layout are stream work into outputs of them.
_LEARNED_NAMES = frozenset(
    "aten::" + n
    for n in ("_transformer_encoder_layer_fwd _native_multi_head_attention _masked_softmax "
              "_transform_bias_rescale_qkv take searchsorted bucketize logcumsumexp _logcumsumexp "
              "mode").split()
)
# Arguments torch 1.13's schemas do not mark as written although the op writes them.
_EXTRA_WRITES = {"aten::native_batch_norm": ("running_mean", "running_var")}
# Keyword arguments of a functional op that its out= overload takes from the output tensor.
_OUTPUT_OPTIONS = frozenset(("dtype", "layout", "device", "pin_memory"))


def _written_sets(args):
    # Written argument -> its alias set, by the set: which argument a returned alias is.
    return {tuple(sorted(a.alias_info.before_set)): a.name
            for a in args if a.alias_info is not None and a.alias_info.is_write}


class Plan:
    """What an op is, from its schema (made once per op overload)."""

    __slots__ = ("kind", "names", "written", "returns", "out_op", "out_names", "keep", "fresh",
                 "device_kw", "label", "raw", "out_overload", "func", "written_at")

    def __init__(self, func, deterministic=False):
        schema = func._schema
        args = schema.arguments
        self.func = func  # (keeps it alive too: plans are found by the op's id)
        self.names = [a.name for a in args if not a.kwarg_only]
        self.device_kw = any(a.name == "device" and a.kwarg_only for a in args)
        self.label = _C._torch_label(func)  # the profiler's "aten::mm"
        self.raw = func._op  # the C builtin behind the OpOverload (no Python frame per call)
        written = {a.name for a in args if a.alias_info is not None and a.alias_info.is_write}
        written.update(_EXTRA_WRITES.get(schema.name, ()))
        self.written = frozenset(written)
        self.written_at = [n in written for n in self.names]
        self.out_op = self.out_overload = self.keep = None
        self.out_names = ()
        rets = schema.returns
        self.fresh = any(r.alias_info is None for r in rets)
        sets = _written_sets(args)
        self.returns = [
            sets.get(tuple(sorted(r.alias_info.before_set))) if r.alias_info is not None else None
            for r in rets
        ]
        self.kind = _kind(func, written, deterministic)
        if self.kind == FUNCTIONAL or (self.kind == WRITE and self.fresh):
            self._find_out_op(func)

    def _find_out_op(self, func):
        # The out= overload of a functional op: the same arguments (less output options such as
        # dtype, which the output tensor carries), plus one written keyword argument per return.
        schema = func._schema
        if schema.name in _compat.REALLOCATING_OUT:
            return
        mine = {a.name: str(a.type) for a in schema.arguments}
        packet = func.overloadpacket
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op is not func and self._take_out_op(op, mine, len(schema.returns)):
                return

    def _take_out_op(self, op, mine, n_returns):
        # Whether `op` is the out= overload of this plan's op (then it is taken).
        theirs_args = op._schema.arguments  # (a new list of new objects at each access)
        outs = [a for a in theirs_args
                if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
        if len(outs) != n_returns or not outs:
            return False
        out_names = {a.name for a in outs}
        rest = [a for a in theirs_args if a.name not in out_names]
        if any(mine.get(a.name) != str(a.type) for a in rest):
            return False
        theirs = {a.name for a in rest}
        if any(n not in theirs and n not in _OUTPUT_OPTIONS for n in mine):
            return False
        if any(n not in theirs for n in self.written):
            return False
        self.out_op = op._op
        self.out_overload = op
        self.out_names = tuple(a.name for a in outs)
        self.keep = frozenset(theirs)
        return True


# aten's tag of ops that draw random numbers (torch's generators advance at the call).
_RANDOM_TAG = getattr(torch.Tag, "nondeterministic_seeded", None)


def is_random(func):
    """Whether op overload `func` draws random numbers (its tags say so)."""
    return _RANDOM_TAG is not None and _RANDOM_TAG in getattr(func, "tags", ())


def _kind(func, written, deterministic=False):
    # The plan's kind (VIEW ... FUNCTIONAL) from the op's schema, name and tags; `deterministic`:
    # for a call of a random op that draws no random numbers (dropout_deterministic_plan).
    schema = func._schema
    name = schema.name
    rets = schema.returns
    tags = getattr(func, "tags", ())
    if deterministic:
        tags = [t for t in tags if t != _RANDOM_TAG]
    if name in _ALLOC_NAMES or name in _IMMEDIATE_NAMES:
        return ALLOC
    if not name.startswith("aten::"):
        # Other libraries' ops (the profiler's record_function, quantized, custom ops): what
        # they return and do is not known from meta tensors.
        return HOST
    if (name in _HOST_NAMES or any(t in tags for t in _compat.HOST_TAGS)
            or not all(_is_tensor_type(r.type) for r in rets)):
        return HOST
    if not rets and not written:
        return HOST
    if any(r.alias_info is not None and not r.alias_info.is_write for r in rets):
        return HOST if written else VIEW
    return WRITE if written else FUNCTIONAL


def _is_tensor_type(t):
    s = str(t)
    return s in ("Tensor", "Tensor?", "Tensor[]", "Optional[Tensor]", "List[Tensor]")


# Op overload -> plan, by id(): OpOverload.__hash__ is a Python function, a call per lookup. The
# overloads live as long as torch (its packets cache them), so an id is never reused for another.
plans = {}


def plan_of(func):
    """The plan of op overload `func`, made on first use."""
    p = plans.get(id(func))
    if p is None:
        p = plans[id(func)] = Plan(func)
    return p


# Ops tagged random only for their dropout, and where their dropout probability is (position,
# name): called with 0, as in inference, they draw no random numbers, their results depend on
# their inputs alone, and their meta kernels describe them, so they can be stream work.
_DROPOUT_ARGUMENT = {"aten::_scaled_dot_product_flash_attention_for_cpu": (3, "dropout_p")}
_deterministic_plans = {}


def dropout_deterministic_plan(func, args, kwargs):
    """The plan of a call of `func` without dropout (a random op in _DROPOUT_ARGUMENT called with
    dropout probability 0), planned as the op it then is; None for any other call."""
    where = _DROPOUT_ARGUMENT.get(func._schema.name)
    if where is None:
        return None
    at, name = where
    p = args[at] if len(args) > at else kwargs.get(name, 0.0)
    if p != 0:
        return None
    plan = _deterministic_plans.get(id(func))
    if plan is None:
        plan = _deterministic_plans[id(func)] = Plan(func, deterministic=True)
    return plan


# ------------------------------------------------------------------------------------------------
# Scanning arguments


class Unsupported(Exception):
    """An argument streamrt.torch does not enqueue (not a CPU strided tensor): a host op."""


def _scan_value(v, written, tensors, key):
    if isinstance(v, _Tensor):
        if type(v) not in _PLAIN or not v.is_cpu or v.layout is not _strided:
            raise Unsupported
        tensors.append((v, written))
        key.append((v.shape, v.stride(), v.dtype))
    elif isinstance(v, (list, tuple)):
        key.append(len(v))
        for x in v:
            _scan_value(x, written, tensors, key)
    elif isinstance(v, torch.device):
        if v.type != "cpu":
            raise Unsupported
        key.append(v)
    else:
        key.append(v)


def scan(plan, args, kwargs):
    """(tensor, written) of every tensor argument, and the key of the arguments' layouts and
    values (the meta cache's); raises Unsupported for an argument that is not enqueued."""
    tensors = []
    key = []
    written = plan.written_at  # per position
    for i, v in enumerate(args):
        if type(v) is _Tensor:  # the common case, inline
            if not v.is_cpu or v.layout is not _strided:
                raise Unsupported
            tensors.append((v, i < len(written) and written[i]))
            key.append((v.shape, v.stride(), v.dtype))
        else:
            _scan_value(v, i < len(written) and written[i], tensors, key)
    if kwargs:
        for k, v in kwargs.items():
            key.append(k)
            _scan_value(v, k in plan.written, tensors, key)
    # (the plan, not the op: its hash is cheap; the default dtype decides factories' results)
    return tensors, (plan, tuple(key), torch.get_default_dtype())


def tensors_of(plan, args, kwargs):
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


def result(plan, args, kwargs, outs):
    """What the op returns: its new outputs `outs`, and the written arguments it returns."""
    if plan.kind == FUNCTIONAL:
        return outs
    # Returns that are written arguments, and fresh ones in order.
    fresh = iter(as_list(outs)) if outs is not None else iter(())
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


# ------------------------------------------------------------------------------------------------
# Output inference on meta tensors


class Outputs:
    """An op's new outputs for one argument layout, inferred on meta tensors: `spec` their
    (shape, stride, dtype) as the structure the op returns (None: the op returns only written
    arguments), `single` the layout of a lone tensor output (None otherwise), `sizes` their
    storage bytes, `use_out` whether the work item runs the out= overload into them,
    `checked` whether a first run confirmed that the kernel keeps them, `learned` whether
    they were learned from a host run (learn()) rather than inferred, and `nbytes` the sum of
    `sizes` (counted against the stream's queue limit)."""

    __slots__ = ("spec", "use_out", "checked", "single", "sizes", "learned", "nbytes")

    def __init__(self, spec, use_out, checked, single, sizes, learned=False):
        self.spec = spec
        self.use_out = use_out
        self.checked = checked
        self.single = single
        self.sizes = sizes
        self.learned = learned
        self.nbytes = sum(sizes)


HOST_RESULT = object()  # cached: this op with these layouts must run as a host op
LEARN = object()  # cached: this op with these layouts runs on the host once, to learn()
_NO_OUTPUTS = Outputs(None, False, True, None, ())
_meta_cache = {}
_META_CACHE_MAX = 20000


def outputs_of(func, plan, args, kwargs, key):
    """The op's Outputs for the argument layout `key` (scan()'s), cached; HOST_RESULT when the op
    must run on the host."""
    inferred = _meta_cache.get(key)
    if inferred is None:
        if len(_meta_cache) >= _META_CACHE_MAX:
            _meta_cache.clear()
        inferred = _meta_cache[key] = _infer(func, plan, args, kwargs)
    return inferred


def run_on_host_from_now(key):
    """The op with the layout `key` failed its first run's check: a host op from now on."""
    _meta_cache[key] = HOST_RESULT


def mark_checked(key):
    """The first run of the op with the layout `key` kept its outputs: later calls need no check."""
    current = _meta_cache.get(key)  # (the host may have cleared the cache meanwhile)
    if current is not None and current is not HOST_RESULT and not current.checked:
        _meta_cache[key] = Outputs(current.spec, current.use_out, True, current.single,
                                   current.sizes)


def learn(key, plan, r):
    """The results `r` of the host run of a LEARN op with the layout `key`: their layouts are its
    outputs' from now on (a host op from now on where they cannot be: not all fresh CPU strided
    tensors, or a result whose elements share memory, which no copy can fill)."""
    rs = as_list(r)
    if (len(rs) != len(plan.returns) or any(src is not None for src in plan.returns)
            or not all(_fillable(t) for t in rs)):
        _meta_cache[key] = HOST_RESULT
        return
    spec = _spec(r)
    flat = flat_spec(spec, [])
    _meta_cache[key] = Outputs(spec, False, True, flat[0] if isinstance(r, _Tensor) else None,
                               tuple(_nbytes(*f) for f in flat), learned=True)


def _fillable(t):
    # A CPU strided tensor whose elements each have their own memory (a copy can fill it).
    return (type(t) in _PLAIN and t.is_cpu and t.layout is _strided
            and all(st != 0 or n <= 1 for n, st in zip(t.shape, t.stride())))


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


def _quantized(x):
    return (isinstance(x, torch.dtype) and x in _compat.QUANTIZED_DTYPES) or (
        isinstance(x, _Tensor) and x.is_quantized)


def _infer(func, plan, args, kwargs):
    """The op's Outputs, or HOST_RESULT when the op must run on the host (no meta kernel,
    data-dependent, an error to raise as eager does, an out= argument the op would resize, or
    quantized tensors)."""
    if (func._schema.name.startswith("aten::quantize_") or any(_quantized(a) for a in args)
            or any(_quantized(v) for v in kwargs.values())):
        # A quantized output carries its quantizer, which no output made from the meta result
        # has (torch 2.x's meta kernel for quantize_per_tensor even returns float32; a dtype
        # argument may reach here as a plain int, so the op is also known by its name).
        return HOST_RESULT
    margs = [_to_meta(a) for a in args]
    mkwargs = {k: _to_meta(v) for k, v in kwargs.items()}
    if plan.device_kw:
        mkwargs["device"] = _meta  # a factory: make the meta twin (None meant the CPU)
    try:
        r = _meta_fixes.correct(func, margs, func(*margs, **mkwargs))
    except Exception:
        # No meta kernel, or an error: the host op gives exactly eager torch's behaviour (and
        # teaches the outputs' layouts where they follow from the arguments').
        if plan.kind == FUNCTIONAL and func._schema.name in _LEARNED_NAMES:
            return LEARN
        return HOST_RESULT
    if plan.written and _resizes_written(plan, args, kwargs, margs, mkwargs):
        return HOST_RESULT
    if not plan.fresh:
        return _NO_OUTPUTS
    fresh = [x for x, src in zip(as_list(r), plan.returns) if src is None]
    if len(fresh) != len(plan.returns):
        return HOST_RESULT
    spec = _spec(r)
    flat = flat_spec(spec, [])
    sizes = tuple(_nbytes(*f) for f in flat)
    single = isinstance(r, _Tensor)
    return Outputs(spec, plan.out_op is not None and _out_op_keeps(plan, margs, mkwargs, spec),
                   False, flat[0] if single else None, sizes)


def _resizes_written(plan, args, kwargs, margs, mkwargs):
    # Whether a written argument's meta twin changed shape: the op would resize it.
    for i, name in enumerate(plan.names[: len(args)]):
        if name in plan.written and not _same_shape(args[i], margs[i]):
            return True
    for k in kwargs:
        if k in plan.written and not _same_shape(kwargs[k], mkwargs[k]):
            return True
    return False


def _out_op_keeps(plan, margs, mkwargs, spec):
    # Whether the out= overload fills outputs of exactly these layouts without resizing them
    # (a resize reallocates the memory a tracker stands for): torch 1.13's are not all like their
    # functional op (mse_loss.out resizes its 0-d result to the elementwise shape and back, with
    # a warning). Checked on meta tensors; else the op runs functionally and its results are
    # copied into the outputs.
    outs = allocate(spec, _meta)
    kw = {k: v for k, v in mkwargs.items() if k in plan.keep}
    for name, o in zip(plan.out_names, as_list(outs)):
        kw[name] = o
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            plan.out_op(*margs, **kw)
        except Exception:
            return False
    if caught:
        return False
    return all(_spec(o) == sp for o, sp in zip(flat(outs, []), flat_spec(spec, [])))


def flat_spec(spec, out):
    """The (shape, stride, dtype) of every tensor in `spec`, appended to `out`."""
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype):
        out.append(spec)
    elif isinstance(spec, (list, tuple)):
        for x in spec:
            flat_spec(x, out)
    return out


def _same_shape(real, meta):
    if isinstance(real, _Tensor):
        return real.shape == meta.shape and real.stride() == meta.stride()
    if isinstance(real, (list, tuple)):
        return all(_same_shape(a, b) for a, b in zip(real, meta))
    return True


def as_list(r):
    """The op's results as a list (one tensor, or the tuple it returns)."""
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


def allocate(spec, device=_cpu, empty=None):
    """New tensors of the layouts in `spec`, in its structure (None for None); on `device`, or
    made by `empty(sizes, strides, dtype)` when given."""
    if spec is None:
        return None
    if isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[2], torch.dtype):
        if empty is not None:
            return empty(spec[0], spec[1], spec[2])
        return _empty_strided(spec[0], spec[1], dtype=spec[2], device=device)
    return type(spec)(allocate(x, device, empty) for x in spec)


def flat(r, out):
    """The tensors in `r` (a tensor, or lists and tuples of them), appended to `out`."""
    if isinstance(r, _Tensor):
        out.append(r)
    elif isinstance(r, (list, tuple)):
        for x in r:
            flat(x, out)
    return out
