"""Inside a stream context, torch ops on CPU tensors are enqueued on the current stream and return
at once (functions, methods, operators, torch.nn modules, in-place ops, out=), with outputs whose
shape, strides and dtype are eager torch's; the ops that cannot be inferred ahead run as host ops,
in stream order, with the host waiting (docs/torch.md lists them)."""

import pytest

import streamrt
from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)

F = torch.nn.functional


def _linear():
    torch.manual_seed(0)
    return torch.nn.Linear(6, 4)


FORMS = {
    "function": lambda x, y: torch.add(x, y),
    "method": lambda x, y: x.mul(y),
    "operator": lambda x, y: x @ y.T - 1,
    "nn module": lambda x, y, _m=_linear(): _m(x),
    "functional": lambda x, y: F.softmax(x, dim=1),
    "in-place": lambda x, y: x.clone().add_(y),
    "out=": lambda x, y: torch.mul(x, y, out=torch.empty(3, 6)),
    "factory": lambda x, y: torch.ones(3, 6) * torch.arange(6.0),
    "tuple result": lambda x, y: torch.max(x, dim=1),
    "index": lambda x, y: x[torch.tensor([2, 0])],
}


@pytest.mark.parametrize("form", list(FORMS), ids=list(FORMS))
def test_ops_are_enqueued_and_return_at_once(installed, form):
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(1))
    y = torch.randn(3, 6, generator=torch.Generator().manual_seed(2))
    expected = FORMS[form](x, y)  # eager (outside a context)
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        got = FORMS[form](x, y)
    results = got if isinstance(got, tuple) else (got,)
    # The call returned while the stream is held: the outputs exist (eager torch's metadata) but
    # their work is queued, not run.
    assert not any(srt.ready(r) for r in results)
    for r, e in zip(results, expected if isinstance(expected, tuple) else (expected,)):
        assert r.shape == e.shape and r.dtype == e.dtype and r.stride() == e.stride()
    gate.open()
    for r, e in zip(results, expected if isinstance(expected, tuple) else (expected,)):
        assert torch.allclose(r, e, rtol=1e-5, atol=1e-6)  # allclose outside: waits first


def test_in_place_and_out_write_the_tensors_given(installed):
    s = torch.cpu.Stream()
    x = torch.zeros(5)
    out = torch.empty(5)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        r1 = x.add_(2)
        r2 = torch.mul(x, 3, out=out)
    assert r1 is x and r2 is out
    raw_x = torch.Tensor.numpy.__wrapped_orig__(x)  # the memory itself, no wait
    assert raw_x.tolist() == [0.0] * 5  # not run yet
    gate.open()
    assert out.tolist() == [6.0] * 5 and x.tolist() == [2.0] * 5


OPS = {
    "matmul": lambda a, b: torch.matmul(a, b),
    "sum dim": lambda a, b: a.sum(dim=0, keepdim=True),
    "transpose contiguous": lambda a, b: a.t().contiguous(),
    "cat": lambda a, b: torch.cat([a, b, a], dim=1),
    "stack": lambda a, b: torch.stack([a, b]),
    "log_softmax": lambda a, b: F.log_softmax(a, dim=-1),
    "layer_norm": lambda a, b: F.layer_norm(a, (8,)),
    "conv1d": lambda a, b: F.conv1d(a.unsqueeze(0), b.reshape(8, 8, 1)),
    "max_pool1d": lambda a, b: F.max_pool1d(a.unsqueeze(0), 2),
    "embedding": lambda a, b: F.embedding(torch.tensor([1, 3, 3]), a),
    "where": lambda a, b: torch.where(a > 0, a, b),
    "to float64": lambda a, b: a.to(torch.float64),
    "argmax": lambda a, b: a.argmax(dim=1),
    "sort": lambda a, b: torch.sort(a, dim=1),
    "expand add": lambda a, b: a[:, :1].expand(8, 8) + b,
}


@pytest.mark.parametrize("op", list(OPS), ids=list(OPS))
def test_outputs_match_eager_torch(installed, op):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    expected = OPS[op](a, b)
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        got = OPS[op](a, b)
    if isinstance(expected, tuple):
        for x, e in zip(got, expected):
            assert x.shape == e.shape and x.dtype == e.dtype
            assert torch.equal(x, e)
    else:
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert got.stride() == expected.stride()
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)


# Ops whose result size depends on the data, whose result is a Python value, that draw random
# numbers, or that have no meta kernel in torch 1.13: host ops. Each runs after a held write to
# its input (so reading early would see zeros), still inside the stream context.
HOST_OPS = {
    "nonzero": lambda x: torch.nonzero(x),
    "masked_select": lambda x: torch.masked_select(x, x > 1),
    "unique": lambda x: torch.unique(x),
    "boolean index": lambda x: x[x > 1],
    "item": lambda x: x[3].item(),
    "tolist": lambda x: x.tolist(),
    "bool()": lambda x: bool(x.sum() > 1),
    "allclose": lambda x: torch.allclose(x, torch.full((6,), 2.0)),
    "equal": lambda x: torch.equal(x, torch.full((6,), 2.0)),
    "no meta kernel (take)": lambda x: torch.take(x, torch.tensor([0, 5])),
    "no meta kernel (searchsorted)": lambda x: torch.searchsorted(x, torch.tensor([1.0, 3.0])),
    "random (dropout)": lambda x: F.dropout(x, 0.5, training=True),
    "random (bernoulli_)": lambda x: x.clone().bernoulli_(0.5),
}


@pytest.mark.parametrize("op", list(HOST_OPS), ids=list(HOST_OPS))
def test_host_ops_run_in_stream_order_with_the_host_waiting(installed, op):
    torch.manual_seed(5)
    expected = HOST_OPS[op](torch.full((6,), 2.0))
    x = torch.zeros(6)
    s = torch.cpu.Stream()
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        x.add_(2)  # held
        gate.open_later()
        torch.manual_seed(5)
        got = HOST_OPS[op](x)  # must see the 2s
    if isinstance(expected, torch.Tensor):
        assert torch.equal(got, expected)
    else:
        assert got == expected


def test_random_factories_give_eager_torchs_numbers(installed):
    torch.manual_seed(11)
    eager = (torch.randn(4, 4), torch.rand(3), torch.randint(0, 10, (5,)))
    s = torch.cpu.Stream()
    torch.manual_seed(11)
    with torch.cpu.StreamContext(s):
        got = (torch.randn(4, 4), torch.rand(3), torch.randint(0, 10, (5,)))
    for g, e in zip(got, eager):
        assert torch.equal(g, e)


def test_many_tensors_in_one_op(installed):
    # More storages than one tracked submission takes (a foreach op, cat of many tensors).
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    params = [torch.zeros(4) for _ in range(20)]
    gate = Gate().hold(s1)
    with torch.cpu.StreamContext(s1):
        torch._foreach_add_(params, 1.0)  # held: writes 20 storages
    with torch.cpu.StreamContext(s2):
        total = torch.cat(params).sum()  # reads them on another stream: waits for all
    gate.open()
    assert total.item() == 80.0


def test_ops_on_other_devices_or_layouts_are_left_to_torch(installed):
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        m = torch.empty(3, device="meta") + 1
        sp = torch.eye(3).to_sparse()
        d = (sp + sp).to_dense()
    assert m.device.type == "meta"
    assert torch.equal(d, 2 * torch.eye(3))


def _nn_inputs():
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(16, 8, generator=g), torch.randn(16, 8, generator=g)
    p, t = torch.rand(16, 8, generator=g), torch.randint(0, 8, (16,), generator=g)
    w = torch.randn(2, 1, 3, 3, generator=g)
    return x, y, p, t, w


NN_OPS = {
    "mse_loss": lambda x, y, p, t, w: F.mse_loss(x, y),
    "l1_loss": lambda x, y, p, t, w: F.l1_loss(x, y),
    "smooth_l1_loss": lambda x, y, p, t, w: F.smooth_l1_loss(x, y),
    "huber_loss": lambda x, y, p, t, w: F.huber_loss(x, y),
    "soft_margin_loss": lambda x, y, p, t, w: F.soft_margin_loss(x, y.sign()),
    "binary_cross_entropy": lambda x, y, p, t, w: F.binary_cross_entropy(p, p.round()),
    "cross_entropy": lambda x, y, p, t, w: F.cross_entropy(x, t),
    "kl_div": lambda x, y, p, t, w: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1),
                                             reduction="batchmean"),
    "embedding_bag": lambda x, y, p, t, w: F.embedding_bag(t, x, torch.tensor([0, 8])),
    "conv2d": lambda x, y, p, t, w: F.conv2d(x.reshape(1, 1, 16, 8), w),
    "max_pool2d indices": lambda x, y, p, t, w: F.max_pool2d(x.reshape(1, 1, 16, 8), 2,
                                                             return_indices=True),
    "group_norm": lambda x, y, p, t, w: F.group_norm(x.reshape(2, 8, 8), 2),
    "var": lambda x, y, p, t, w: torch.var(x, 1),
    "median": lambda x, y, p, t, w: x.median(1),
    "cdist": lambda x, y, p, t, w: torch.cdist(x, y),
    "gather": lambda x, y, p, t, w: torch.gather(x, 1, t.reshape(16, 1)),
    "index_add": lambda x, y, p, t, w: torch.zeros(16, 8).index_add(0, t, x),
}


@pytest.mark.parametrize("op", list(NN_OPS), ids=list(NN_OPS))
def test_outputs_keep_the_memory_they_were_handed_out_with(installed, op):
    # A kernel that reallocated its output (some out= overloads of torch 1.13 do) would change the
    # tensor's memory under the host after the call returned.
    inputs = _nn_inputs()
    expected = NN_OPS[op](*inputs)
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        got = NN_OPS[op](*inputs)
    results = got if isinstance(got, tuple) else (got,)
    raw = torch._C._TensorBase.data_ptr
    before = [(raw(r), tuple(r.shape)) for r in results]
    s.synchronize()
    assert [(raw(r), tuple(r.shape)) for r in results] == before
    for r, e in zip(results, expected if isinstance(expected, tuple) else (expected,)):
        assert torch.allclose(r.double(), e.double(), atol=1e-6)


def test_torch_ops_are_refused_in_a_graph_capture(installed):
    g = streamrt.Graph()
    with pytest.raises(streamrt.Error, match="cannot be captured"):
        with streamrt.graph(g):
            torch.ones(3) + 1


def test_ops_go_to_the_threads_current_stream(installed):
    # streamrt.set_stream() inside a context moves the thread's later ops, on every path.
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()
    x = torch.zeros(10)
    for _ in range(3):  # the checked first run, then what the fast path learns from
        with torch.cpu.StreamContext(s1):
            x + 1
        s1.synchronize()
    gate = Gate().hold(s2)
    with torch.cpu.StreamContext(s1):
        streamrt.set_stream(s2)
        try:
            y = x + 1
            z = x * 3  # a first call: the dispatch mode's path
        finally:
            streamrt.set_stream(s1)
    s1.synchronize()
    assert not srt.ready(y) and not srt.ready(z)  # queued behind the gate on s2
    gate.open()
    assert y.tolist() == [1.0] * 10 and z.tolist() == [0.0] * 10
