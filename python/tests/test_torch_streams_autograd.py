"""Autograd inside a stream context: forward and backward of a small MLP give eager torch's
gradients, and backward's ops run on the stream too (they are queued when backward() returns)."""

import pytest

from torch_streams_util import Gate, installed, srt, torch  # noqa: F401  (fixture)


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 4),
    )


def data(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(64, 16, generator=g), torch.randn(64, 4, generator=g)


def loss_of(net, x, y):
    return torch.nn.functional.mse_loss(net(x), y)


def grads(net):
    return [p.grad.clone() for p in net.parameters()]


def eager_and_held(seed):
    """Data, a network trained one backward step eagerly, its twin (same weights) for the stream,
    and a stream held by a gate: the set-up of the tests where the stream's work must wait."""
    x, y = data(seed)
    eager, streamed = mlp(seed + 1), mlp(seed + 1)
    loss_of(eager, x, y).backward()
    s = torch.cpu.Stream()
    return x, y, eager, streamed, s, Gate().hold(s)


def test_mlp_forward_and_backward_give_eager_gradients(installed):
    x, y = data(1)
    eager, streamed = mlp(0), mlp(0)
    loss_of(eager, x, y).backward()
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        loss = loss_of(streamed, x, y)
        loss.backward()
    for e, g in zip(grads(eager), grads(streamed)):
        assert torch.allclose(e, g, rtol=1e-5, atol=1e-6)
    assert loss.item() == pytest.approx(loss_of(eager, x, y).item(), rel=1e-6)


def test_backward_ops_are_queued_on_the_stream(installed):
    x, y, eager, streamed, s, gate = eager_and_held(2)
    with torch.cpu.StreamContext(s):
        loss = loss_of(streamed, x, y)
        loss.backward()  # returns with the stream still held: its ops are queued
    params = list(streamed.parameters())
    assert all(p.grad is not None for p in params)
    assert not any(srt.ready(p.grad) for p in params)
    gate.open()
    for e, g in zip(grads(eager), grads(streamed)):
        assert torch.allclose(e, g, rtol=1e-5, atol=1e-6)


def test_training_steps_with_an_optimizer_match_eager(installed):
    x, y = data(4)
    eager, streamed = mlp(5), mlp(5)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_s = torch.optim.SGD(streamed.parameters(), lr=0.1, momentum=0.9)
    for _ in range(5):
        opt_e.zero_grad()
        loss_of(eager, x, y).backward()
        opt_e.step()
    s = torch.cpu.Stream()
    with torch.cpu.StreamContext(s):
        for _ in range(5):
            opt_s.zero_grad()
            loss_of(streamed, x, y).backward()
            opt_s.step()
    for pe, ps in zip(eager.parameters(), streamed.parameters()):
        assert torch.allclose(pe, ps, rtol=1e-5, atol=1e-6)


def test_backward_outside_the_context_waits_for_the_forward(installed):
    x, y, eager, streamed, s, gate = eager_and_held(6)
    with torch.cpu.StreamContext(s):
        loss = loss_of(streamed, x, y)  # held
    gate.open_later()
    loss.backward()  # eager: its ops wait for the forward's results
    for e, g in zip(grads(eager), grads(streamed)):
        assert torch.allclose(e, g, rtol=1e-5, atol=1e-6)
