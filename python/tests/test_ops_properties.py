"""Property tests of the ops against numpy: random shapes (size-0 and size-1 dimensions included),
broadcasting, non-contiguous views (transposed, sliced with steps, reversed with negative steps,
expanded) and mixed dtypes, with
the inputs made on one stream and the op run on another (dependency tracking orders them), at
several worker counts. Seeded, so a failure names a reproducible case."""

import numpy as np
import pytest

import streamrt

from helpers import WORKER_COUNTS

DTYPES = ["float32", "float64", "int32", "int64"]
TRIALS = 60

# torch's promotion (docs/ops.md): the higher kind wins whatever its width; numpy differs for
# int + float (it widens to float64).
KIND = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2}
SIZE = {"bool": 1, "int32": 4, "int64": 8, "float32": 4, "float64": 8}


def promote(a, b):
    if a == b:
        return a
    if KIND[a] != KIND[b]:
        return a if KIND[a] > KIND[b] else b
    return a if SIZE[a] >= SIZE[b] else b


def random_shape(rng, max_dims=4):
    ndim = int(rng.integers(0, max_dims + 1))
    return tuple(int(rng.choice([0, 1, 1, 2, 3, 4, 5], p=[0.04, 0.2, 0.2, 0.16, 0.16, 0.12, 0.12]))
                 for _ in range(ndim))


def broadcastable_to(rng, shape):
    """A shape that broadcasts with `shape`: some leading dims dropped, some sizes set to 1."""
    keep = int(rng.integers(0, len(shape) + 1))
    out = list(shape[len(shape) - keep:])
    for i in range(len(out)):
        if rng.random() < 0.3:
            out[i] = 1
    if rng.random() < 0.2:
        out = [1] * int(rng.integers(1, 3)) + out  # extra leading 1s broadcast too
    return tuple(out[-6:])


def random_values(rng, shape, dtype):
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-20, 21, size=shape).astype(dtype)


def make(rng, shape, dtype):
    """A tensor equal to a numpy array of `shape`, often through a non-contiguous view."""
    kind = rng.integers(0, 6) if len(shape) > 0 else 0
    if kind == 4:
        # Some dimensions reversed ([::-1]): negative strides, the offset at the last element.
        base = random_values(rng, shape, dtype)
        index = tuple(slice(None, None, -1) if rng.random() < 0.6 else slice(None) for _ in shape)
        return streamrt.tensor(base)[index], base[index]
    if kind == 5:
        # Every other element of a longer first dimension, backwards from a random end.
        big = (shape[0] * 2 + 1,) + tuple(shape[1:])
        base = random_values(rng, big, dtype)
        start = -1 - int(rng.integers(0, 2))
        return streamrt.tensor(base)[start::-2][:shape[0]], base[start::-2][:shape[0]]
    if kind == 1 and len(shape) >= 2:
        # A transposed view of the transposed data.
        base = random_values(rng, shape[::-1], dtype)
        t = streamrt.tensor(base).T
        return t, base.T
    if kind == 2:
        # Every other element of a twice-as-long first dimension.
        big = (shape[0] * 2,) + tuple(shape[1:])
        base = random_values(rng, big, dtype)
        return streamrt.tensor(base)[::2], base[::2]
    if kind == 3 and any(s == 1 for s in shape):
        # An expanded view: size-1 dimensions grow with stride 0, then are sliced back.
        base = random_values(rng, shape, dtype)
        grown = tuple(3 if s == 1 else s for s in shape)
        t = streamrt.tensor(base).expand(*grown)
        index = tuple(slice(0, 1) if s == 1 else slice(None) for s in shape)
        return t[index], np.broadcast_to(base, grown)[index]
    base = random_values(rng, shape, dtype)
    return streamrt.tensor(base), base


def check(result, expected, rtol=1e-5, atol=1e-6):
    got = result.numpy()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.fixture
def streams():
    made = [streamrt.Stream() for _ in range(3)]
    yield made
    streamrt.synchronize()


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "maximum": (streamrt.maximum, np.maximum),
    "minimum": (streamrt.minimum, np.minimum),
}

COMPARE = {
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
}


def random_operands(rng):
    """Shapes and dtypes of a random binary op: two broadcastable shapes (either one the larger)
    and two dtypes."""
    sa = random_shape(rng)
    sb = broadcastable_to(rng, sa)
    if rng.random() < 0.5:
        sa, sb = sb, sa
    return sa, sb, rng.choice(DTYPES), rng.choice(DTYPES)

@pytest.mark.parametrize("n", WORKER_COUNTS)
def test_binary_ops_broadcast_and_promote(n, workers, streams):
    workers(n)
    rng = np.random.default_rng(1000 + n)
    for trial in range(TRIALS):
        sa, sb, da, db = random_operands(rng)
        with streamrt.stream(streams[trial % 3]):
            a, a_np = make(rng, sa, da)
            b, b_np = make(rng, sb, db)
        res = promote(da, db)
        name = list(BINARY)[trial % len(BINARY)]
        op, ref = BINARY[name]
        with streamrt.stream(streams[(trial + 1) % 3]):
            out = op(a, b)
        assert out.dtype == res, (name, da, db)
        check(out, ref(a_np.astype(res), b_np.astype(res)))
        cname = list(COMPARE)[trial % len(COMPARE)]
        cop, cref = COMPARE[cname]
        with streamrt.stream(streams[(trial + 2) % 3]):
            mask = cop(a, b)
        assert mask.dtype == streamrt.bool
        check(mask, cref(a_np.astype(res), b_np.astype(res)))


def test_float_division_and_where(workers, streams):
    workers(2)
    rng = np.random.default_rng(7)
    for trial in range(TRIALS):
        sa = random_shape(rng)
        sb = broadcastable_to(rng, sa)
        a, a_np = make(rng, sa, "float32")
        b, b_np = make(rng, sb, "float64")
        with streamrt.stream(streams[trial % 3]):
            check(a / b, a_np.astype("float64") / b_np)
            cond = a > 0
            picked = streamrt.where(cond, a, b)
            check(picked, np.where(a_np > 0, a_np.astype("float64"), b_np))
            check(streamrt.where(cond, a, -1.0), np.where(a_np > 0, a_np, np.float32(-1)))


UNARY = {
    "exp": (streamrt.exp, np.exp),
    "log": (lambda t: streamrt.log(streamrt.abs(t) + 0.5), lambda x: np.log(np.abs(x) + 0.5)),
    "tanh": (streamrt.tanh, np.tanh),
    "sigmoid": (streamrt.sigmoid, lambda x: 1 / (1 + np.exp(-x.astype("float64")))),
    "sqrt": (lambda t: streamrt.sqrt(streamrt.abs(t)), lambda x: np.sqrt(np.abs(x))),
    "neg": (lambda t: -t, np.negative),
    "abs": (abs, np.abs),
    "relu": (streamrt.relu, lambda x: np.maximum(x, 0)),
    "pow2": (lambda t: t**2, lambda x: x**2),
    "pow3": (lambda t: streamrt.pow(t, 3), lambda x: x**3),
    "clamp": (lambda t: t.clamp(-1, 2), lambda x: np.clip(x, -1, 2)),
    "clamp_min": (lambda t: streamrt.clamp(t, min=0), lambda x: np.maximum(x, 0)),
}


@pytest.mark.parametrize("n", [1, 4])
def test_allclose_broadcasts_like_numpy(n, workers, streams):
    """np.allclose broadcasts its operands (and compares across dtypes); so does streamrt's, on
    views read in place. Half the trials perturb one element of one operand, so both answers
    occur; the answer must be numpy's either way."""
    workers(n)
    rng = np.random.default_rng(6000 + n)
    answers = set()
    for trial in range(TRIALS):
        sa, sb, da, db = random_operands(rng)
        with streamrt.stream(streams[trial % 3]):
            a, a_np = make(rng, sa, da)
        # b: a's values, taken at index 0 along the dimensions where b has size 1 (or none): close
        # to a when a does not vary there (or b covers a), else not.
        target = np.broadcast_shapes(sa, sb)
        lead = len(target) - len(sb)
        index = tuple(slice(0, 1) if i < lead or sb[i - lead] == 1 else slice(None)
                      for i in range(len(target)))
        taken = np.broadcast_to(a_np, target)[index]
        b_np = (taken.reshape(sb) if taken.size == int(np.prod(sb)) else
                random_values(rng, sb, "float64")).astype(db)  # a is empty where b has size 1
        if b_np.size and rng.random() < 0.5:
            b_np = b_np.copy()
            b_np.flat[int(rng.integers(0, b_np.size))] += 1
        with streamrt.stream(streams[(trial + 1) % 3]):
            b = streamrt.tensor(b_np)
        with streamrt.stream(streams[(trial + 2) % 3]):
            got = streamrt.allclose(a, b)
            got_swapped = streamrt.allclose(b, a, rtol=1e-5, atol=1e-6)
        assert got == np.allclose(a_np, b_np), (sa, sb, da, db)
        assert got_swapped == np.allclose(b_np, a_np, rtol=1e-5, atol=1e-6), (sa, sb, da, db)
        answers.add(got)
    assert answers == {True, False}


def test_allclose_takes_numbers_and_names_both_shapes():
    assert streamrt.allclose(streamrt.full((2, 3), 2.0), 2)
    assert not streamrt.allclose(2.5, streamrt.full((2, 3), 2.0))
    assert streamrt.allclose(streamrt.ones(3, 1), np.ones(4)) == np.allclose(np.ones((3, 1)),
                                                                             np.ones(4))
    with pytest.raises(ValueError,
                       match=r"allclose: shapes \[2, 3\] and \[4\] cannot be broadcast"):
        streamrt.allclose(streamrt.zeros(2, 3), streamrt.zeros(4))
    with pytest.raises(ValueError, match="rtol and atol"):
        streamrt.allclose(streamrt.zeros(2), streamrt.zeros(2), rtol=-1)
    # equal is numpy's array_equal: no broadcasting, so different shapes are not equal.
    assert not streamrt.equal(streamrt.ones(2, 3), streamrt.ones(3))
    assert not np.array_equal(np.ones((2, 3)), np.ones(3))


@pytest.mark.parametrize("n", [1, 4])
def test_unary_ops(n, workers, streams):
    workers(n)
    rng = np.random.default_rng(2000 + n)
    for trial in range(TRIALS):
        dtype = "float64" if trial % 3 == 0 else "float32"
        a, a_np = make(rng, random_shape(rng), dtype)
        for name, (op, ref) in UNARY.items():
            with streamrt.stream(streams[trial % 3]):
                out = op(a)
            expected = np.asarray(ref(a_np)).astype(dtype)
            check(out, expected, rtol=2e-5 if dtype == "float32" else 1e-12)


def test_integer_inputs_promote_like_torch(streams):
    ints = streamrt.tensor(np.array([[1, -2, 3]], dtype=np.int32))
    assert streamrt.exp(ints).dtype == streamrt.float32
    assert (ints + 0.5).dtype == streamrt.float32
    check(ints + 0.5, np.array([[1.5, -1.5, 3.5]], dtype=np.float32))
    assert (ints * 2).dtype == streamrt.int32
    assert (ints ** 0.5).dtype == streamrt.float32
    assert abs(ints).dtype == streamrt.int32
    check(ints.clamp(0.5), np.array([[1, 0.5, 3]], dtype=np.float32))
    b = ints > 0
    assert (b + 1).dtype == streamrt.int64
    # bool tensors share memory with numpy's bool arrays both ways.
    np.testing.assert_array_equal(b.numpy(), [[True, False, True]])
    flags = np.array([True, False])
    assert streamrt.from_numpy(flags).dtype == streamrt.bool
    assert streamrt.sum(streamrt.from_numpy(flags)).item() == 1
    assert streamrt.promote_types(streamrt.int64, np.float32) == streamrt.float32


def test_operators_take_numpy_numbers_and_reflect():
    ints = streamrt.tensor(np.array([1, -2, 3], dtype=np.int32))
    flags = ints > 0
    # numpy numbers promote as the Python numbers of their kind (np.float32 is no float subclass,
    # np.float64 is).
    assert (ints * np.float32(0.5)).dtype == streamrt.float32
    check(np.float64(0.5) * ints, np.array([0.5, -1.0, 1.5], dtype=np.float32))
    assert (ints + np.int64(1)).dtype == streamrt.int32
    check(flags + np.int64(1), np.array([2, 1, 2], dtype=np.int64))
    # Reflected operators: the number on the left.
    check(10 - ints, np.array([9, 12, 7], dtype=np.int32))
    check(3.0 / ints, np.array([3.0, -1.5, 1.0], dtype=np.float32))
    check(1 < ints, np.array([False, False, True]))
    check(np.float32(1.5) >= ints, np.array([True, True, False]))
    check(-ints, np.array([-1, 2, -3], dtype=np.int32))
    check(abs(ints), np.array([1, 2, 3], dtype=np.int32))


def test_operators_defer_to_other_types_and_raise_their_errors():
    t = streamrt.tensor([1.0, 2.0])

    class Other:
        def __radd__(self, other):
            return "radd"

        def __rtruediv__(self, other):
            return "rtruediv"

        def __gt__(self, other):  # what Python tries for t < Other()
            return "gt"

    assert t.__add__("x") is NotImplemented
    assert t.__lt__(Other()) is NotImplemented
    assert t + Other() == "radd"
    assert t / Other() == "rtruediv"
    assert (t < Other()) == "gt"
    assert (t == None) is False  # noqa: E711 (identity fallback, as for any other object)
    with pytest.raises(TypeError, match="unsupported operand"):
        t - "x"
    with pytest.raises(TypeError, match="unsupported operand"):
        t + True  # bool is not a number to add, as before
    with pytest.raises(TypeError):
        t.__sub__()
    # An error converting an operand keeps its type (numpy's ValueError for a ragged list).
    with pytest.raises(ValueError, match="inhomogeneous"):
        t + [1.0, [2.0]]
    with pytest.raises(ValueError, match=r"sub: .*\[2\] and \[3\]"):
        t - streamrt.zeros(3)


def test_operators_launch_while_stream_work_waits_for_the_gil(workers):
    """Operators keep the GIL while they launch (a launch never waits for a worker): Python work
    queued between them, which takes the GIL on a worker, still runs, in stream order."""
    workers(2)
    s = streamrt.Stream()
    seen = []
    with streamrt.stream(s):
        t = streamrt.zeros(4)
        for i in range(200):
            t = -(t + 1) * -1.0
            s.launch(seen.append, i)
    s.synchronize()
    assert seen == list(range(200))
    check(t, np.full(4, 200.0, dtype=np.float32))


@pytest.mark.parametrize("n", [1, 2, 8])
def test_reductions_over_a_dim(n, workers, streams):
    workers(n)
    rng = np.random.default_rng(3000 + n)
    for trial in range(TRIALS):
        shape = random_shape(rng)
        dtype = rng.choice(DTYPES)
        with streamrt.stream(streams[trial % 3]):
            a, a_np = make(rng, shape, dtype)
        dim = int(rng.integers(-len(shape), len(shape))) if shape else None
        keep = bool(rng.integers(0, 2))
        with streamrt.stream(streams[(trial + 1) % 3]):
            total = a.sum(dim=dim, keepdim=keep)
        acc = "int64" if dtype.startswith("int") else dtype
        check(total, a_np.astype("float64").sum(axis=dim, keepdims=keep).astype(acc))
        if dtype.startswith("float"):
            if a_np.size > 0 and (dim is None or a_np.shape[dim] > 0):
                check(streamrt.mean(a, dim, keepdim=keep),
                      a_np.astype("float64").mean(axis=dim, keepdims=keep).astype(dtype))
        reducible = a_np.size > 0 if dim is None else a_np.shape[dim] > 0
        if reducible:
            check(a.max(dim, keep), a_np.max(axis=dim, keepdims=keep))
            check(streamrt.min(a, dim=dim, keepdim=keep), a_np.min(axis=dim, keepdims=keep))
            check(a.argmax(dim, keep), np.asarray(np.argmax(a_np, axis=dim, keepdims=keep)))
            check(a.argmin(dim), np.asarray(np.argmin(a_np, axis=dim)))
        else:
            with pytest.raises(ValueError, match="empty"):
                a.max(dim)


@pytest.mark.parametrize("n", [1, 4])
def test_softmax_and_log_softmax(n, workers, streams):
    workers(n)
    rng = np.random.default_rng(4000 + n)
    for trial in range(TRIALS):
        shape = random_shape(rng) or (3,)  # not 0-d
        dtype = "float64" if trial % 2 else "float32"
        a, a_np = make(rng, shape, dtype)
        dim = int(rng.integers(-len(shape), len(shape)))
        x = a_np.astype("float64")
        shifted = x - x.max(axis=dim, keepdims=True) if x.size else x
        e = np.exp(shifted)
        soft = e / e.sum(axis=dim, keepdims=True) if x.size else e
        with streamrt.stream(streams[trial % 3]):
            check(a.softmax(dim), soft.astype(dtype), rtol=1e-5, atol=1e-6)
            check(streamrt.log_softmax(a, dim), np.log(soft).astype(dtype), rtol=1e-4, atol=1e-5)


def test_cat_and_stack(streams):
    rng = np.random.default_rng(5)
    for trial in range(TRIALS):
        shape = random_shape(rng) or (2,)  # not 0-d
        dim = int(rng.integers(-len(shape), len(shape)))
        parts, parts_np = [], []
        for i in range(int(rng.integers(1, 4))):
            s = list(shape)
            s[dim] = int(rng.integers(0, 4))
            with streamrt.stream(streams[i % 3]):
                t, t_np = make(rng, tuple(s), rng.choice(["float32", "float64"]))
            parts.append(t)
            parts_np.append(t_np)
        res = parts_np[0].dtype
        for p in parts_np[1:]:
            res = np.promote_types(res, p.dtype)
        with streamrt.stream(streams[trial % 3]):
            check(streamrt.cat(parts, dim), np.concatenate([p.astype(res) for p in parts_np], dim))
            same = [p for p in parts if p.shape == parts[0].shape]
            same_np = [p for p in parts_np if p.shape == parts_np[0].shape]
            sdim = int(rng.integers(-len(shape) - 1, len(shape) + 1))
            check(streamrt.stack(same, sdim),
                  np.stack([p.astype(res) for p in same_np], sdim).astype(
                      np.result_type(*[p.dtype for p in same_np])))


def test_views_match_numpy_without_copies():
    rng = np.random.default_rng(6)
    for _ in range(TRIALS):
        shape = random_shape(rng, 4)
        if not shape:
            continue
        base_np = random_values(rng, shape, "float32")
        base = streamrt.tensor(base_np)
        perm = rng.permutation(len(shape))
        views = [
            (base.T, base_np.T),
            (base.permute(*perm), base_np.transpose(perm)),
            (base.transpose(0, -1), np.swapaxes(base_np, 0, -1)),
            (base[1:], base_np[1:]),
            (base[..., ::2], base_np[..., ::2]),
            (base[::-1], base_np[::-1]),
            (base[..., ::-2], base_np[..., ::-2]),
            (base[-2::-3], base_np[-2::-3]),
            (base[::-1].T, base_np[::-1].T),
            (base[None, :, ...], base_np[None, :, ...]),
            (base.unsqueeze(-1), base_np[..., None]),
        ]
        if shape[0] > 0:
            i = int(rng.integers(-shape[0], shape[0]))
            views.append((base[i], base_np[i]))
        if len(shape) >= 2 and shape[1] > 0:
            views.append((base[:, -1], base_np[:, -1]))
        for view, view_np in views:
            assert view.shares_storage(base)
            if view_np.size > 1:  # strides of size-1 dimensions are arbitrary
                got = [s for s, n in zip(view.stride(), view_np.shape) if n > 1]
                want = [s // 4 for s, n in zip(view_np.strides, view_np.shape) if n > 1]
                assert got == want
            check(view, view_np)
            check(view.contiguous(), np.array(view_np, order="C"))


def test_setitem_writes_through_views(streams):
    a_np = np.zeros((4, 5), dtype=np.float32)
    a = streamrt.tensor(a_np)
    with streamrt.stream(streams[0]):
        a[1] = 2.0
        a[:, 3] = streamrt.arange(4).to(streamrt.float32)
    with streamrt.stream(streams[1]):
        a[2:, ::2] = np.array([7, 8, 9], dtype=np.float32)  # broadcast over the rows
        total = a.sum(dim=0)
    a_np[1] = 2.0
    a_np[:, 3] = np.arange(4)
    a_np[2:, ::2] = [7, 8, 9]
    check(a, a_np)
    check(total, a_np.sum(axis=0))


def test_matmul_with_transposed_views_matches_numpy():
    rng = np.random.default_rng(8)
    for _ in range(20):
        m, k, n = (int(x) for x in rng.integers(1, 40, size=3))
        a_np = rng.standard_normal((k, m)).astype(np.float32)
        b_np = rng.standard_normal((n, k)).astype(np.float32)
        a, b = streamrt.tensor(a_np), streamrt.tensor(b_np)
        check(a.T @ b.T, a_np.T @ b_np.T, rtol=1e-4, atol=1e-4)
        check(streamrt.matmul(a.T, streamrt.tensor(b_np.T.copy())), a_np.T @ b_np.T,
              rtol=1e-4, atol=1e-4)


def test_errors_name_both_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \[2, 3\] and \[4\] cannot be broadcast"):
        streamrt.zeros(2, 3) + streamrt.zeros(4)
    with pytest.raises(ValueError, match=r"\[3\].*\[2, 4\]"):
        streamrt.zeros(3).expand(2, 4)
    with pytest.raises(IndexError, match="out of range"):
        streamrt.zeros(3)[3]
    with pytest.raises(IndexError, match="too many indices"):
        streamrt.zeros(3)[0, 0]
    with pytest.raises(ValueError, match="step cannot be zero"):
        streamrt.zeros(3)[::0]
    with pytest.raises(ValueError, match="must be bool"):
        streamrt.where(streamrt.zeros(2), 1.0, 2.0)
    with pytest.raises(ValueError, match="expanded"):
        streamrt.zeros(1).expand(3).fill_(1.0)
    with pytest.raises(ValueError, match="out of range"):
        streamrt.zeros(2, 2).sum(dim=2)


def test_mlp_step_on_two_streams(streams):
    """The ops a two-layer MLP needs, end to end against numpy: x @ W1.T + b1, tanh, @ W2.T + b2,
    log_softmax, mean loss, and the weight gradient through transposed views."""
    rng = np.random.default_rng(9)
    x_np = rng.standard_normal((16, 8)).astype(np.float32)
    w1_np = rng.standard_normal((12, 8)).astype(np.float32)
    b1_np = rng.standard_normal(12).astype(np.float32)
    w2_np = rng.standard_normal((3, 12)).astype(np.float32)
    x, w1, b1, w2 = (streamrt.tensor(v) for v in (x_np, w1_np, b1_np, w2_np))
    with streamrt.stream(streams[0]):
        h = streamrt.tanh(x @ w1.T + b1)
    with streamrt.stream(streams[1]):
        logits = h @ w2.T
        lp = streamrt.log_softmax(logits, dim=1)
        loss = -lp.max(dim=1).mean()
        grad_w2 = streamrt.softmax(logits, 1).T @ h / 16
    h_np = np.tanh(x_np @ w1_np.T + b1_np)
    logits_np = h_np @ w2_np.T
    lp_np = logits_np - logits_np.max(1, keepdims=True)
    lp_np = lp_np - np.log(np.exp(lp_np).sum(1, keepdims=True))
    check(h, h_np, rtol=1e-4, atol=1e-5)
    assert loss.item() == pytest.approx(float(-lp_np.max(1).mean()), rel=1e-4)
    check(grad_w2, np.exp(lp_np).T @ h_np / 16, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [2, 4])
def test_large_strided_ops_split_across_workers(n, workers, streams):
    """Shapes past the parallel grain, so strided walks start chunks in the middle of rows and
    carry across dimensions; the results still match numpy exactly."""
    workers(n)
    rng = np.random.default_rng(10 + n)
    a_np = rng.standard_normal((301, 517)).astype(np.float32)
    b_np = rng.standard_normal((517, 1)).astype(np.float32)
    c_np = rng.integers(-9, 10, size=(3, 301, 1, 517)).astype(np.int64)
    a, b, c = streamrt.tensor(a_np), streamrt.tensor(b_np), streamrt.tensor(c_np)
    with streamrt.stream(streams[0]):
        check(a.T + b, a_np.T + b_np)  # transposed + broadcast column: the strided walk
        check(a[::2, 1:] * 2.0, a_np[::2, 1:] * 2)
        check(c[:, ::3].transpose(1, 3) - c[0, ::3, 0, 0],
              np.swapaxes(c_np[:, ::3], 1, 3) - c_np[0, ::3, 0, 0])
        check(streamrt.where(a.T > 0, a.T, b), np.where(a_np.T > 0, a_np.T, b_np))
    with streamrt.stream(streams[1]):
        check(a.T.sum(dim=1), a_np.astype(np.float64).T.sum(axis=1).astype(np.float32))
        check(a.sum(dim=0, keepdim=True), a_np.astype(np.float64).sum(0, keepdims=True)
              .astype(np.float32))
        check(c.sum(dim=1), c_np.sum(axis=1))
        check(a.T.argmax(dim=0), np.argmax(a_np.T, axis=0))
        check(a.T.contiguous(), np.ascontiguousarray(a_np.T))


@pytest.mark.parametrize("n", [1, 4])
def test_advanced_indexing_on_read_matches_numpy(n, workers, streams):
    """t[int list / array / tensor] gathers along dimension 0 and t[bool mask] selects, as numpy:
    copies made on the current stream from inputs made on another, over strided views too."""
    workers(n)
    rng = np.random.default_rng(9000 + n)
    for trial in range(TRIALS):
        shape = random_shape(rng) or (3,)  # not 0-d
        dtype = rng.choice(DTYPES)
        with streamrt.stream(streams[trial % 3]):
            a, a_np = make(rng, shape, dtype)
        size = shape[0]
        picks = rng.integers(-size, size, size=(int(rng.integers(0, 6)),)) if size else \
            np.zeros(0, dtype=np.int64)
        k = int(rng.integers(1, len(shape) + 1))
        mask = rng.random(shape[:k]) < 0.5
        with streamrt.stream(streams[(trial + 1) % 3]):
            by_list = a[picks.tolist()]
            by_array = a[picks.reshape(1, -1)]
            by_tensor = a[streamrt.tensor(picks.astype(np.int32))]
            by_mask = a[mask]
            by_mask_tensor = a[streamrt.tensor(mask)]
        check(by_list, a_np[picks.tolist()] if picks.size else a_np[np.zeros(0, dtype=int)])
        check(by_array, a_np[picks.reshape(1, -1)])
        check(by_tensor, a_np[picks])
        check(by_mask, a_np[mask])
        check(by_mask_tensor, a_np[mask])
        assert not by_list.shares_storage(a)


def test_advanced_indexing_errors_name_the_index_and_size():
    t = streamrt.zeros(3, 2)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
        t[[0, 3]]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds .* size 3"):
        t[np.array([-4])]
    with pytest.raises(IndexError, match="boolean index did not match .* dimension is 3 .* has 2"):
        t[[True, False]]
    with pytest.raises(IndexError, match="integer or boolean"):
        t[np.array([0.5])]
    # A tensor index is read when the gather runs: out of range fails the stream, naming it.
    picked = t[streamrt.tensor(np.array([1, 5]))]
    with pytest.raises(streamrt.Error, match=r"index 5 \(entry 1\) is out of range .* size 3"):
        picked.numpy()
    streamrt.synchronize()
    with pytest.raises(TypeError, match="assigning through"):
        t[[0]] = 1.0
