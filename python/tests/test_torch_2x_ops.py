"""Ops whose meta kernels may describe outputs other than their CPU kernels make them (torch.func,
scaled_dot_product_attention, bfloat16 and float16, channels_last, inference_mode, layouts that
unary kernels keep), inside a stream context on inputs with queued writes: the results equal eager
torch's, with its strides and dtypes, cold and warm (the fast path learns an op on its first call).
The inputs' writes are held behind a gate that opens a little later, so an op that did not wait
would see the old values. On every torch version the suite runs with."""

import pytest
import torch.nn.functional as F

from torch_streams_util import Gate, installed, srt, torch  # noqa: F401


def _inference_mode_double(x):
    with torch.inference_mode():
        return x * 2


CASES = {
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 4, 8, 16)] * 3, None),
    "sdpa causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    [(2, 4, 8, 16)] * 3, None),
    "bfloat16 matmul": (lambda a: a @ a, [(32, 32)], torch.bfloat16),
    "float16 sum": (lambda a: (a + a).sum(), [(64,)], torch.float16),
    "bfloat16 gelu": (F.gelu, [(64,)], torch.bfloat16),
    "bfloat16 layer_norm": (lambda x: F.layer_norm(x, (16,)), [(4, 16)], torch.bfloat16),
    "float16 softmax": (lambda x: x.softmax(-1), [(4, 16)], torch.float16),
    "channels_last conv2d": (lambda x: F.conv2d(x, torch.ones(4, 3, 3, 3)), [(2, 3, 8, 8)],
                             "channels_last"),
    "channels_last relu": (F.relu, [(2, 3, 8, 8)], "channels_last"),
    "channels_last batch_norm": (lambda x: F.batch_norm(x, None, None, training=True),
                                 [(2, 3, 8, 8)], "channels_last"),
    "inference_mode": (_inference_mode_double, [(8,)], None),
    "abs of a transposed tensor": (lambda x: x.t().abs(), [(4, 6)], None),
    "logical_not of a transposed tensor": (lambda x: x.t().logical_not(), [(4, 6)], None),
    "sqrt of a transposed tensor": (lambda x: x.t().abs().sqrt(), [(4, 6)], None),
}
if hasattr(torch, "func"):
    CASES["vmap"] = (lambda x: torch.func.vmap(torch.sum)(x), [(4, 5)], None)
    CASES["grad"] = (lambda x: torch.func.grad(lambda y: (y * y).sum())(x), [(5,)], None)


def _one_thread(fn, inputs):
    # Eager on one intra-op thread, as work items run (a reduction's bits depend on the count).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*inputs)
    finally:
        torch.set_num_threads(before)


def _inputs(shapes, kind):
    torch.manual_seed(0)
    out = []
    for shape in shapes:
        t = torch.randn(*shape)
        if kind == "channels_last":
            t = t.to(memory_format=torch.channels_last)
        elif kind is not None:
            t = t.to(kind)
        out.append(t)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_the_op_equals_eager_inside_a_context_on_pending_inputs(installed, name):
    fn, shapes, kind = CASES[name]
    try:
        expected = _one_thread(fn, [t + 1 for t in _inputs(shapes, kind)])
    except (AttributeError, RuntimeError) as e:  # torch 1.13: no SDPA, no float16 softmax
        pytest.skip(f"eager torch {torch.__version__} cannot run it: {e}")
    for _ in range(3):  # cold, then warm
        inputs = _inputs(shapes, kind)
        s1, s2 = srt.Stream(), srt.Stream()
        gate = Gate().hold(s1)
        with torch.cpu.StreamContext(s1):
            for t in inputs:
                t.add_(1)
        gate.open_later()  # (before the op: an op that runs on the host waits for the gate)
        with torch.cpu.StreamContext(s2):
            got = fn(*inputs)
        assert got.dtype == expected.dtype and got.stride() == expected.stride(), (
            got.dtype, got.stride(), expected.dtype, expected.stride())
        assert torch.equal(got, expected)


needs_sdpa = pytest.mark.skipif(not hasattr(F, "scaled_dot_product_attention"),
                                reason="torch 1.13 has no scaled_dot_product_attention")


@needs_sdpa
def test_attention_without_dropout_is_stream_work(installed):
    # Its CPU kernel is tagged random (for dropout); with no dropout it draws nothing.
    q = torch.randn(2, 4, 8, 16)
    s1, s2 = srt.Stream(), srt.Stream()
    gate = Gate().hold(s1)
    with torch.cpu.StreamContext(s1):
        q.add_(1)
    with torch.cpu.StreamContext(s2):
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert not srt.ready(out), "the host ran it: it would have waited for the held write"
    gate.open()
    assert torch.equal(out, F.scaled_dot_product_attention(q, q, q, is_causal=True))


@needs_sdpa
def test_attention_with_dropout_draws_eagers_numbers(installed):
    q = torch.randn(2, 4, 8, 16)
    torch.manual_seed(7)
    expected = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    torch.manual_seed(7)
    with torch.cpu.StreamContext(srt.Stream()):
        got = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert torch.equal(got, expected)
