"""Several small independent networks trained at the same time, one CPU stream each (an ensemble,
as in reinforcement learning: what PyTorch users have asked CPU streams for). The training code is
plain torch; the stream contexts make each network's forward, backward and optimizer step stream
work, so the networks run side by side on streamrt's workers (docs/torch.md).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/ensemble_torch_streams.py \
        [--nets 4] [--width 512] [--batch 128] [--steps 20]
"""

import argparse
import time

import torch

import streamrt.torch


def make_net(width, seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
        torch.nn.ReLU(), torch.nn.Linear(width, 1))
    return net, torch.optim.SGD(net.parameters(), lr=1e-3)


def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", type=int, default=4)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()

    streamrt.torch.install()
    nets = [make_net(args.width, seed) for seed in range(args.nets)]
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(args.batch, args.width, generator=g),
             torch.randn(args.batch, 1, generator=g)) for _ in nets]
    streams = [torch.cpu.Stream() for _ in nets]

    start = time.perf_counter()
    losses = [None] * len(nets)
    for _ in range(args.steps):
        for i, (net, opt) in enumerate(nets):
            with torch.cpu.StreamContext(streams[i]):  # network i's work goes to stream i
                losses[i] = train_step(net, opt, *data[i])  # returns at once
    torch.cpu.synchronize()
    elapsed = time.perf_counter() - start
    for i, loss in enumerate(losses):
        print(f"net {i}: loss {loss.item():.4f}")  # item() would wait by itself, too
    print(f"{args.steps} steps of {args.nets} networks: {elapsed / args.steps * 1e3:.2f} ms per step")
    streamrt.torch.uninstall()


if __name__ == "__main__":
    main()
