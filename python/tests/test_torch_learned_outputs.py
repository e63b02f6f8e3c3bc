"""Ops without a meta kernel whose outputs' layouts follow from their arguments (torch's fused
transformer and attention kernels): the first call with an argument layout runs on the host and
teaches its outputs' layouts; later calls with that layout are stream work, equal to eager. A
result that does not match what was learned fails that call loudly and the op runs on the host
from then on. Both submission paths, on every torch version the suite runs with."""

import warnings

import pytest

from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)
from streamrt import _torch_mode, _torch_plan

# (mask type 2: a mask of the input's shape, the type both torch versions take)
_masked_softmax = torch.ops.aten._masked_softmax.default


def _no_meta(func, *args):
    try:
        func(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in args])
    except Exception:  # noqa: BLE001  (any failure: no usable meta kernel)
        return True
    return False


@pytest.fixture
def fresh(installed):
    # Nothing learned or warned from earlier tests.
    _torch_plan._meta_cache.clear()
    _torch_mode._host_ops_warned.clear()
    yield installed
    _torch_plan._meta_cache.clear()


def _inputs(rows, cols):
    g = torch.Generator().manual_seed(rows * cols)
    x = torch.randn(rows, cols, generator=g)
    mask = torch.rand(rows, cols, generator=g) < 0.3
    return x, mask


def test_the_op_has_no_meta_kernel_here():
    # What the other tests rely on: without a meta kernel, the op is learned.
    assert _no_meta(_masked_softmax, *_inputs(2, 3), 1, 2)


def test_the_first_call_teaches_and_later_calls_are_stream_work(fresh):
    x, mask = _inputs(4, 8)
    expected = _masked_softmax(x, mask, 1, 2)  # outside contexts: eager
    s = srt.Stream()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gate = Gate().hold(s)
        with torch.cpu.StreamContext(s):
            first = _masked_softmax(x, mask, 1, 2)  # runs on the host: the stream is not needed
            assert srt.ready(first)
            second = _masked_softmax(x, mask, 1, 2)
        assert not srt.ready(second), "the host ran it: its stream is held"
        gate.open()
    assert torch.equal(first, expected) and torch.equal(second, expected)
    assert second.stride() == expected.stride() and second.dtype == expected.dtype
    named = [str(w.message) for w in caught if issubclass(w.category, srt.HostOpWarning)]
    assert len(named) == 1 and "teaches its outputs' layouts" in named[0], named


def test_another_layout_is_learned_again(fresh):
    s = srt.Stream()
    for rows, cols in ((4, 8), (3, 5)):
        x, mask = _inputs(rows, cols)
        gate = Gate().hold(s)
        with torch.cpu.StreamContext(s):
            first = _masked_softmax(x, mask, 1, 2)
            second = _masked_softmax(x, mask, 1, 2)
        assert srt.ready(first) and not srt.ready(second)
        gate.open()
        s.synchronize()
        assert torch.equal(second, _masked_softmax(x, mask, 1, 2))


def test_a_result_unlike_the_learned_one_fails_once_then_runs_on_the_host(fresh):
    x, mask = _inputs(4, 8)
    s = srt.Stream()
    with torch.cpu.StreamContext(s):
        _masked_softmax(x, mask, 1, 2)  # learned
    (key, outputs), = [(k, v) for k, v in _torch_plan._meta_cache.items() if v.learned]
    wrong = ((4, 9), (9, 1), torch.float32)  # a layout the kernel does not make
    _torch_plan._meta_cache[key] = _torch_plan.Outputs(wrong, False, True, wrong, (36 * 4,),
                                                       learned=True)
    with torch.cpu.StreamContext(s):
        bad = _masked_softmax(x, mask, 1, 2)
    with pytest.raises(RuntimeError, match="other sizes or dtypes than the outputs known"):
        s.synchronize()
    del bad
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        again = _masked_softmax(x, mask, 1, 2)
    assert srt.ready(again), "it was stream work again: the stream is held"
    gate.open()
    assert torch.equal(again, _masked_softmax(x, mask, 1, 2))


def test_an_encoder_layer_in_inference_runs_on_the_stream(fresh):
    # batch_first in eval without grad: torch's fused encoder-layer kernel where torch takes it.
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 6, 32)
    s = srt.Stream()
    with torch.no_grad():
        expected = layer(x)  # outside contexts: eager, at the same thread settings
        with torch.cpu.StreamContext(s):
            layer(x)  # teaches the fused kernel's outputs where it has no meta kernel
        gate = Gate().hold(s)
        with torch.cpu.StreamContext(s):
            got = layer(x)
        assert not srt.ready(got), "the host ran it: its stream is held"
        gate.open()
    assert torch.equal(got, expected)


_SORTED = torch.sort(torch.randn(10, generator=torch.Generator().manual_seed(1))).values
SEARCHES_AND_SCANS = {
    "searchsorted": lambda x: torch.searchsorted(_SORTED, x),
    "bucketize": lambda x: torch.bucketize(x, _SORTED),
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "mode": lambda x: torch.mode(x.round(), 1),
    "take": lambda x: torch.take(x, torch.tensor([0, 3, 5])),
}


@pytest.mark.parametrize("name", list(SEARCHES_AND_SCANS))
def test_searches_scans_and_reductions_are_stream_work_from_their_second_call(fresh, name):
    # (torch 1.13 has no meta kernel for these; later versions infer them from the first call)
    fn = SEARCHES_AND_SCANS[name]
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    expected = fn(x)
    s = srt.Stream()
    with torch.cpu.StreamContext(s):
        fn(x)
    gate = Gate().hold(s)
    with torch.cpu.StreamContext(s):
        got = fn(x)
    assert not any(srt.ready(t) for t in _torch_plan.flat(got, [])), "the host ran it"
    gate.open()
    for e, g in zip(_torch_plan.flat(expected, []), _torch_plan.flat(got, [])):
        assert torch.equal(g, e) and g.stride() == e.stride() and g.dtype == e.dtype
