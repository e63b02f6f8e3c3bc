"""Device-agnostic stream code, written as FSDP-style training writes it, on real CPU streams.

The code never names a device's module: it asks torch for it (`torch.get_device_module(device)`)
and uses its `Stream`, `stream()`, `current_stream()` and events. On CUDA that overlaps the
hand-off of the next layer's weights with the current layer's compute. On CPU, torch 2.x's
`torch.cpu.Stream` is a stub that does nothing, so the same code runs everything in order; after
`streamrt.torch.install()` the module hands out streamrt's streams, and the hand-off (here the
"all-gather" of a layer's weight shards: a concatenation and a cast) runs on a side stream while the
main stream computes, an event ordering the two.

    python examples/python/device_agnostic_streams.py --layers 8 --width 512 --batch 512
"""

import argparse
import time

import torch

import streamrt.torch


def device_module(device):
    """torch.get_device_module(device) (torch 2.x); torch.cpu on torch 1.13, which lacks it."""
    get = getattr(torch, "get_device_module", None)
    return get(device) if get is not None else getattr(torch, device.type)


def gather(shards):
    """The hand-off: a layer's weight, gathered from its shards (kept in half precision)."""
    return torch.cat(shards).float().view(-1, shards[0].shape[1])


def forward_plain(shards_per_layer, x):
    for shards in shards_per_layer:
        x = torch.relu(x @ gather(shards))
    return x


def forward_streams(device, shards_per_layer, x):
    """The next layer's gather runs on a side stream while this layer computes on the main one."""
    mod = device_module(device)
    main, side = mod.current_stream(), mod.Stream()
    with mod.stream(side):
        weight = gather(shards_per_layer[0])
        ready = side.record_event()
    for i in range(len(shards_per_layer)):
        main.wait_event(ready)
        current = weight
        if i + 1 < len(shards_per_layer):
            with mod.stream(side):
                weight = gather(shards_per_layer[i + 1])
                ready = side.record_event()
        x = torch.relu(x @ current)
    main.synchronize()
    return x


def timed(fn, reps):
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(reps):
        out = fn()
    return out, (time.perf_counter() - start) / reps * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = args.width // args.shards
    shards_per_layer = [
        [(torch.randn(rows, args.width) / args.width**0.5).half() for _ in range(args.shards)]
        for _ in range(args.layers)
    ]
    x = torch.randn(args.batch, args.width)
    device = torch.device("cpu")

    _, plain_ms = timed(lambda: forward_plain(shards_per_layer, x), args.reps)
    streamrt.torch.install()
    got, streams_ms = timed(lambda: forward_streams(device, shards_per_layer, x), args.reps)
    # In order again, with the BLAS threads install() set (a thread count changes the bits).
    expected = forward_plain(shards_per_layer, x)
    streamrt.torch.uninstall()
    print(f"module: {device_module(device).__name__}, torch {torch.__version__}")
    print(f"in order: {plain_ms:.2f} ms per forward; streams: {streams_ms:.2f} ms per forward")
    print(f"matches the in-order result: {torch.equal(got, expected)}")


if __name__ == "__main__":
    main()
