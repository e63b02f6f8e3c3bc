"""streamrt streams against what a PyTorch user would do otherwise, in the same run.

Each case runs its variants in turn (interleaved repetitions, medians) and prints one line per
variant and ratios against the baselines measured in the same run:

* ``ensemble``: 4 MLPs 512 wide, batch 128, forward + backward + SGD per step: one stream per
  network (install()) against eager torch with its default threads, two plain Python threads
  (each training half of the networks, one intra-op and one BLAS thread each) and two spawned
  processes (the cores' ceiling without a GIL); and each network's step captured once into a
  ``streamrt.torch.CPUGraph`` and replayed on its stream (the host enqueues one item per step).
* ``transformer``: a ``torch.nn.TransformerEncoderLayer(512, 8, 2048)`` in eval mode under
  ``no_grad``, two requests (seq 128 x batch 8 each), with ``batch_first=False`` and with
  ``batch_first=True`` (torch's fused ``_transformer_encoder_layer_fwd``): each request on its own
  stream against both requests eager one after the other and two plain Python threads; the
  outputs are compared across the variants.
* ``pipeline``: preprocessing (normalisation, elementwise ops, a blur and a resize of 32 images
  3x64x64) then a small CNN over a series of batches: preprocessing of batch i+1 on one stream
  while the model runs batch i on another (an event hands each batch over), against eager torch
  one batch after the other and a producer thread feeding the model's thread through a
  ``queue.Queue``; each stage alone on one thread gives what two cores allow (the slower stage
  bounds a pipeline with a stage per core). The streams once more with each stage captured into
  a ``CPUGraph`` (two of each, alternating: preprocessing of batch i+1 writes the other input
  while the model reads batch i's) and replayed on a static input filled per batch.
* ``dataloader``: a ``DataLoader`` (num_workers=0, batch 32) feeding a 256-wide 3-layer MLP
  (forward + backward + SGD): the training step inside a stream context while the loader runs on
  the host thread, against eager torch.

* ``memory``: resident memory (peak: ``VmHWM``, reset at the loop's start; final:
  ``/proc/self/statm`` after the loop and a synchronize; then again after ``malloc_trim(0)``,
  which shows what glibc keeps freed) of the transformer inference loop (both layouts) and of
  the ensemble's training, each variant in a fresh process: eager torch, a stream synchronized
  after every call, and a stream synchronized once at the end (the host then runs ahead as far
  as streamrt.torch's queue limit lets it; the variant stops enqueuing once the process would
  pass ``--memory-cap`` MB and says so).

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/torch_vs_threads.py [--quick] [--reps N]
       [--only NAME] [--memory-cap MB]
(torch 2.x: PYTHONPATH=build/python-torch1 and the torch 2.x environment's interpreter.)
Figures count only on an idle machine: the load average is printed before and after.
"""

import argparse
import ctypes
import json
import os
import queue
import subprocess
import sys
import threading
import time
import warnings

import torch
import torch.nn.functional as F

import streamrt
import streamrt.torch as srt
from streamrt import _torch_compat
from torch_install import (CORES, EnsembleProcesses, _PassThrough, eager_defaults,
                           eager_one_thread, interleave, make_mlps, step, with_settings)


def run_threads(fns):
    """Runs each function on its own plain Python thread with one intra-op thread (OpenMP's count
    is per thread; eager_one_thread sets one OpenBLAS thread, process-wide); their results, in
    order. Raises the first failure."""
    results, errors = [None] * len(fns), []

    def body(i, fn):
        torch.set_num_threads(1)
        try:
            results[i] = fn()
        except BaseException as e:  # raised on the calling thread below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def measure(cases, reps):
    """interleave() once as a warm-up, then `reps` times: the medians."""
    interleave(cases, 1)
    return interleave(cases, reps)


def print_times(m, per, unit):
    """One line per variant: the median divided by `per`, in ms per `unit`."""
    for name, v in m.items():
        print(f"  {name:30s} {v / per * 1e3:8.2f} ms per {unit}")


def ratio(label, m, base, new, target=""):
    """A ratio line: how many times faster `new` is than `base` (base time / new time)."""
    note = f"  (target {target})" if target else ""
    print(f"  {label:38s} {m[base] / m[new]:5.2f}x{note}")


# ------------------------------------------------------------------------------------------------


def ensemble(args):
    """4 MLPs trained side by side; each variant trains its own copy of the networks (the same
    initial weights), so no variant trains another's networks."""
    k, width, batch = 4, 512, 128
    steps = 3 if args.quick else 20
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(batch, width, generator=g), torch.randn(batch, 1, generator=g))
            for _ in range(k)]
    nets = {name: make_mlps(k, width) for name in ("eager", "streams", "threads", "graphs")}
    streams = [torch.cpu.Stream() for _ in range(k)]
    graphs = []

    def train(mine, which):
        for _ in range(steps):
            for i in which:
                step(*mine[i], *data[i])

    def on_streams():
        for _ in range(steps):
            for i, (net, opt) in enumerate(nets["streams"]):
                with torch.cpu.StreamContext(streams[i]):
                    step(net, opt, *data[i])
        for s in streams:
            s.synchronize()

    def threads():
        run_threads([lambda p=p: train(nets["threads"], range(p, k, 2)) for p in range(2)])

    def replayed():
        if not graphs:
            graphs.extend(captured_steps(nets["graphs"], data, streams))
        for _ in range(steps):
            for g in graphs:
                g.replay()
        for s in streams:
            s.synchronize()

    procs = EnsembleProcesses(k, width, data, steps)
    cases = {"eager (default threads)": with_settings(eager_defaults,
                                                      lambda: train(nets["eager"], range(k))),
             "streams (one per network)": on_streams,
             "two plain threads": with_settings(eager_one_thread, threads),
             "two processes (ceiling)": procs.run,
             "streams, steps captured": replayed}
    try:
        m = measure(cases, args.reps)
    finally:
        procs.close()
    print(f"ensemble: {k} MLPs {width} wide, batch {batch}, forward+backward+SGD, per step of "
          f"the {k} (median of {args.reps} x {steps} steps)")
    print_times(m, steps, "step")
    ratio("streams vs two plain threads", m, "two plain threads", "streams (one per network)")
    ratio("streams vs eager defaults", m, "eager (default threads)", "streams (one per network)",
          ">= 1.3, as bench/torch_install.py")
    ceiling = m["two processes (ceiling)"] / m["streams (one per network)"] * 100
    print(f"  streams reach {ceiling:5.1f}% of the two processes (two plain threads "
          f"{m['two processes (ceiling)'] / m['two plain threads'] * 100:5.1f}%)")
    ratio("captured steps vs two plain threads", m, "two plain threads", "streams, steps captured")
    ratio("captured steps vs streams", m, "streams (one per network)", "streams, steps captured")
    ratio("captured steps vs eager defaults", m, "eager (default threads)",
          "streams, steps captured")


def captured_steps(nets, data, streams):
    """Each network's training step captured into a CPUGraph on its stream, after two warm-up
    steps there (the capture runs a step as well)."""
    for _ in range(2):
        for i, (net, opt) in enumerate(nets):
            with torch.cpu.StreamContext(streams[i]):
                step(net, opt, *data[i])
        for s in streams:
            s.synchronize()
    graphs = []
    for i, (net, opt) in enumerate(nets):
        g = srt.CPUGraph()
        with srt.graph(g, stream=streams[i]):
            step(net, opt, *data[i])
        graphs.append(g)
    return graphs


# ------------------------------------------------------------------------------------------------


def transformer(args):
    """Both layouts: batch_first=False (separate ops) and True (the fused layer op)."""
    for batch_first in (False, True):
        transformer_layout(args, batch_first)


class _OpNames(_PassThrough):
    """A pass-through dispatch mode that notes the names of the ops it runs."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.name())
        return super().__torch_dispatch__(func, types, args, kwargs)


def uses_fused_layer(layer, x):
    """Whether eager torch runs the layer through aten::_transformer_encoder_layer_fwd."""
    ops = _OpNames()
    with eager_defaults(), torch.no_grad():
        _torch_compat.push_mode(ops)
        try:
            layer(x)
        finally:
            _torch_compat.pop_mode(ops)
    return "aten::_transformer_encoder_layer_fwd" in ops.names


def transformer_layout(args, batch_first):
    """Two inference requests through one encoder layer."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=batch_first).eval()
    seq, batch = 128, 8
    shape = (batch, seq, 512) if batch_first else (seq, batch, 512)
    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(*shape, generator=g) for _ in range(2)]
    streams = [torch.cpu.Stream() for _ in xs]
    outs = {}

    def infer(x):
        with torch.no_grad():  # per thread: the plain threads enter it themselves
            return layer(x)

    def eager():
        outs["eager (sequential)"] = [infer(x) for x in xs]

    def on_streams():
        res = []
        with torch.no_grad():
            for s, x in zip(streams, xs):
                with torch.cpu.StreamContext(s):
                    res.append(layer(x))
        for s in streams:
            s.synchronize()
        outs["streams (one per request)"] = res

    def threads():
        outs["two plain threads"] = run_threads([lambda x=x: infer(x) for x in xs])

    cases = {"eager (sequential)": with_settings(eager_defaults, eager),
             "streams (one per request)": on_streams,
             "two plain threads": with_settings(eager_one_thread, threads)}
    m = measure(cases, args.reps)
    fused = uses_fused_layer(layer, xs[0])
    print(f"transformer: encoder layer 512/8/2048, batch_first={batch_first} (fused layer op: "
          f"{'yes' if fused else 'no'}), eval, no_grad, 2 requests of seq {seq} x batch {batch}, "
          f"per pair (median of {args.reps})")
    print_times(m, 1, "pair")
    ratio("streams vs eager sequential", m, "eager (sequential)", "streams (one per request)")
    ratio("streams vs two plain threads", m, "two plain threads", "streams (one per request)")
    check_outputs(outs, "eager (sequential)")


def check_outputs(outs, base):
    """Prints how each variant's outputs compare with the baseline's; a WARNING where they
    differ beyond a tight tolerance."""
    for name, res in outs.items():
        if name == base:
            continue
        pairs = list(zip(res, outs[base]))
        if all(torch.equal(a, b) for a, b in pairs):
            print(f"  outputs: {name} equal to {base}")
            continue
        diff = max((a - b).abs().max().item() for a, b in pairs)
        if all(torch.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in pairs):
            print(f"  outputs: {name} close to {base} (max abs diff {diff:.1e})")
        else:
            print(f"  WARNING: {name}'s outputs differ from {base}'s (max abs diff {diff:.1e})")


# ------------------------------------------------------------------------------------------------

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
BLUR = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]).div(16).view(1, 1, 3, 3)


def preprocess(raw):
    """uint8 images to gamma-corrected, normalised, slightly blurred float images at half the
    size. The blur is one convolution over the images' planes: the same as a depthwise one
    (groups=3), which mkldnn runs about ten times slower here (7 ms against 0.6-1.2)."""
    x = raw.float().div_(255).pow_(0.9)
    x = ((x - MEAN) / STD).clamp_(-3, 3)
    n, c, h, w = x.shape
    x = F.conv2d(x.view(n * c, 1, h, w), BLUR, padding=1).view(n, c, h, w)
    return F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)


def make_cnn():
    """A small CNN for 32x32 images with 10 classes, in eval mode."""
    torch.manual_seed(4)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()


def pipeline(args):
    """Preprocessing then a CNN's forward, batch after batch."""
    n = 8 if args.quick else 50
    g = torch.Generator().manual_seed(3)
    raws = [torch.randint(0, 256, (32, 3, 64, 64), dtype=torch.uint8, generator=g)
            for _ in range(n)]
    model = make_cnn()
    prep_s, model_s = torch.cpu.Stream(), torch.cpu.Stream()
    outs = {}

    def eager():
        with torch.no_grad():
            outs["eager (sequential)"] = [model(preprocess(raw)) for raw in raws]

    def on_streams():
        outs["streams (prep | model)"] = pipelined(raws, model, prep_s, model_s)

    def threads():
        q = queue.Queue(maxsize=2)
        outs["producer + consumer threads"] = run_threads(
            [lambda: producer(raws, q), lambda: consumer(model, q)])[1]

    stages = []

    def replayed():
        if not stages:
            stages.extend(captured_stages(raws[:2], model, prep_s, model_s))
        outs["streams, stages captured"] = replay_pipelined(raws, stages, prep_s, model_s)

    def stage(fn):
        def run():
            with torch.no_grad():
                fn()
        return with_settings(eager_one_thread, run)

    xs = [preprocess(raw) for raw in raws]
    cases = {"eager (sequential)": with_settings(eager_defaults, eager),
             "streams (prep | model)": on_streams,
             "producer + consumer threads": with_settings(eager_one_thread, threads),
             "streams, stages captured": replayed,
             "preprocessing alone, 1 thread": stage(lambda: [preprocess(raw) for raw in raws]),
             "model alone, 1 thread": stage(lambda: [model(x) for x in xs])}
    m = measure(cases, args.reps)
    print(f"pipeline: preprocessing (32 images 3x64x64: gamma, normalise, blur, resize) then a "
          f"CNN forward, {n} batches, per batch (median of {args.reps})")
    print_times(m, n, "batch")
    ratio("streams vs eager", m, "eager (sequential)", "streams (prep | model)", ">= 1.25")
    ratio("streams vs producer + consumer threads", m, "producer + consumer threads",
          "streams (prep | model)")
    print_pipeline_ceiling(m)
    ratio("captured stages vs eager", m, "eager (sequential)", "streams, stages captured")
    ratio("captured stages vs producer + consumer threads", m, "producer + consumer threads",
          "streams, stages captured")
    check_outputs(outs, "eager (sequential)")


def print_pipeline_ceiling(m):
    """What two cores allow: a pipeline with a stage per core runs, at best, each stage at the
    speed it has alone, so a batch takes the slower stage's time; any split of the work over two
    cores takes at least half the stages' sum (eager torch spreads every op over both)."""
    prep, model = m["preprocessing alone, 1 thread"], m["model alone, 1 thread"]
    eager, bound = m["eager (sequential)"], max(prep, model)
    print(f"  the cores' ceiling: the slower stage alone {eager / bound:4.2f}x eager (a pipeline's "
          f"bound), half the stages' sum {eager / ((prep + model) / 2):4.2f}x eager (any split); "
          f"of the pipeline's bound the streams reach {bound / m['streams (prep | model)'] * 100:5.1f}%, "
          f"the threads {bound / m['producer + consumer threads'] * 100:5.1f}%, the captured "
          f"stages {bound / m['streams, stages captured'] * 100:5.1f}%")


def pipelined(raws, model, prep_s, model_s, depth=4):
    """Preprocessing of the next batches on prep_s while model_s runs the model; an event hands
    each batch over. The host runs at most `depth` batches ahead of the model (bounded memory):
    4, as far as the threads' producer runs ahead (it starts batch i once the consumer took batch
    i - 3 from the queue of 2, that is once the model finished batch i - 4)."""
    outs, done = [], []
    with torch.no_grad():
        for i, raw in enumerate(raws):
            if i >= depth:
                done[i - depth].synchronize()
            with torch.cpu.StreamContext(prep_s):
                x = preprocess(raw)
            ready = torch.cpu.Event()
            ready.record(prep_s)
            with torch.cpu.StreamContext(model_s):
                ready.wait(model_s)
                outs.append(model(x))
            done.append(torch.cpu.Event())
            done[-1].record(model_s)
    model_s.synchronize()
    return outs


def captured_stages(first_raws, model, prep_s, model_s):
    """Two (static input, preprocessing graph, model graph, static output) sets, each stage
    captured on its stream after two warm-up runs there."""
    sets = []
    with torch.no_grad():
        for first in first_raws:
            raw = first.clone()
            for _ in range(2):
                with torch.cpu.StreamContext(prep_s):
                    x = preprocess(raw)
                with torch.cpu.StreamContext(model_s):
                    model(x)
                model_s.synchronize()
            prep_g, model_g = srt.CPUGraph(), srt.CPUGraph()
            with srt.graph(prep_g, stream=prep_s):
                x = preprocess(raw)
            with srt.graph(model_g, stream=model_s):
                out = model(x)
            sets.append((raw, prep_g, model_g, out))
    model_s.synchronize()
    return sets


def replay_pipelined(raws, sets, prep_s, model_s, depth=4):
    """pipelined() with the captured stages: batch i goes through set i % 2 (its input filled on
    prep_s, its output copied on model_s); the tracking orders each replay after the work whose
    tensors it touches."""
    outs, done = [], []
    with torch.no_grad():
        for i, r in enumerate(raws):
            if i >= depth:
                done[i - depth].synchronize()
            raw, prep_g, model_g, out = sets[i % len(sets)]
            with torch.cpu.StreamContext(prep_s):
                raw.copy_(r)
                prep_g.replay()
            with torch.cpu.StreamContext(model_s):
                model_g.replay()
                outs.append(out.clone())
            done.append(torch.cpu.Event())
            done[-1].record(model_s)
    model_s.synchronize()
    return outs


def producer(raws, q):
    """Preprocesses every batch into `q`, then puts None (also after a failure: the consumer
    stops)."""
    try:
        with torch.no_grad():
            for raw in raws:
                q.put(preprocess(raw))
    finally:
        q.put(None)


def consumer(model, q):
    """Runs the model on each batch from `q` until None; the outputs. After a failure it still
    takes the batches until None, so the producer never blocks on a full queue."""
    outs = []
    try:
        with torch.no_grad():
            while (x := q.get()) is not None:
                outs.append(model(x))
    except BaseException:
        while q.get() is not None:
            pass
        raise
    return outs


# ------------------------------------------------------------------------------------------------


def dataloader(args):
    """A DataLoader on the host thread feeding training steps."""
    from torch.utils.data import DataLoader, TensorDataset

    samples, width = (256 if args.quick else 2048), 256
    g = torch.Generator().manual_seed(5)
    data = TensorDataset(torch.randn(samples, width, generator=g),
                         torch.randn(samples, 1, generator=g))
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=0,
                        generator=torch.Generator().manual_seed(6))
    batches = len(loader)
    nets = {name: make_mlps(1, width)[0] for name in ("eager", "streams")}
    s = torch.cpu.Stream()

    def eager():
        for x, y in loader:
            step(*nets["eager"], x, y)

    def on_stream():
        for x, y in loader:
            with torch.cpu.StreamContext(s):
                step(*nets["streams"], x, y)
        s.synchronize()

    cases = {"eager (default threads)": with_settings(eager_defaults, eager),
             "stream (loader on the host)": on_stream}
    m = measure(cases, args.reps)
    print(f"dataloader: DataLoader (num_workers=0, batch 32, shuffled) feeding a {width}-wide "
          f"3-layer MLP, forward+backward+SGD, {batches} batches, per batch "
          f"(median of {args.reps})")
    print_times(m, batches, "batch")
    ratio("stream vs eager", m, "eager (default threads)", "stream (loader on the host)",
          ">= 0.95")


# ------------------------------------------------------------------------------------------------

MEMORY_TARGET = 1.3  # stream / eager, peak and final resident memory
MEMORY_MODES = {"eager": "eager (default threads)",
                "sync": "stream, synchronize per call",
                "end": "stream, synchronize at the end"}


def memory(args):
    """Resident memory of the transformer loop and the ensemble, one fresh process per variant
    (peak resident memory is per process)."""
    calls, steps = (20, 20) if args.quick else (500, 500)
    layouts = (False,) if args.quick else (False, True)
    print(f"memory: resident MB, one fresh process per variant; peak = VmHWM during the loop, "
          f"final = after the loop and a synchronize, trimmed = final after malloc_trim(0), "
          f"heap = final in the main heap ([heap]); ratio = stream / eager "
          f"(target <= {MEMORY_TARGET})")
    for bf in layouts:
        memory_rows(f"transformer, batch_first={bf}, eval, no_grad, seq 128 x batch 8, "
                    f"{calls} calls", "call",
                    dict(work="transformer", batch_first=bf, calls=calls, cap=args.memory_cap))
    memory_rows(f"ensemble: 4 MLPs 512 wide, batch 128, forward+backward+SGD, {steps} steps, "
                "one stream per network", "step",
                dict(work="ensemble", calls=steps, cap=args.memory_cap))


def memory_rows(title, unit, spec):
    """Runs the three variants of `spec` (each in its own process) and prints their figures."""
    print(f"  {title}")
    rows = {mode: memory_child(dict(spec, mode=mode)) for mode in MEMORY_MODES}
    base = rows["eager"]
    for mode, r in rows.items():
        line = (f"    {MEMORY_MODES[mode]:32s} peak {r['peak']:6.0f}  final {r['final']:6.0f}  "
                f"trimmed {r['trimmed']:6.0f}  heap {r['heap']:6.0f}  "
                f"{r['seconds'] / r['calls'] * 1e3:7.2f} ms per {unit}")
        if mode != "eager":
            line += (f"  ratio peak {r['peak'] / base['peak']:4.2f} final "
                     f"{r['final'] / base['final']:4.2f}")
        print(line)
        if r["calls"] < spec["calls"]:
            print(f"      stopped enqueuing after {r['calls']} of {spec['calls']} {unit}s: the "
                  f"process would pass {spec['cap']:.0f} MB counting its virtual growth "
                  f"(without a synchronize, ops and their outputs queue up to the queue limit)")


def memory_child(spec):
    """Runs one variant in a fresh interpreter (this file, the same environment); its figures."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-child",
                          json.dumps(spec)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"memory variant {spec} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def statm_mb():
    """This process's virtual size and resident memory now, in MB."""
    with open("/proc/self/statm") as f:
        size, resident = f.read().split()[:2]
    page = os.sysconf("SC_PAGE_SIZE") / 2**20
    return int(size) * page, int(resident) * page


def reset_peak():
    """Resets this process's peak resident memory (VmHWM) to its resident memory now: ru_maxrss
    keeps the peak of the process before its exec, the parent's (Linux's clear_refs, value 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_mb():
    """This process's peak resident memory (VmHWM) since reset_peak(), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def resident_mb():
    """This process's resident memory now, in MB."""
    return statm_mb()[1]


def heap_mb():
    """The resident part of the main heap ([heap] in /proc/self/smaps), in MB."""
    kb, in_heap = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                in_heap = fields[-1] == "[heap]"
            elif in_heap and fields[0] == "Rss:":
                kb += int(fields[1])
    return kb / 1024


def memory_run(spec):
    """One variant, in this (fresh) process: its figures as a dict."""
    mode = spec["mode"]
    if mode != "eager":
        srt.install()
    if spec["work"] == "transformer":
        loop = transformer_loop(spec)
    else:
        loop = ensemble_loop(spec)
    under_cap(spec)  # the figures the cap counts from
    reset_peak()
    t = time.perf_counter()
    calls = loop()
    seconds = time.perf_counter() - t
    fig = {"calls": calls, "seconds": seconds,
           "peak": peak_mb(),
           "final": resident_mb(), "heap": heap_mb()}
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    fig["trimmed"] = resident_mb()
    return fig


_start = {}


def under_cap(spec):
    """Whether a loop without a per-call synchronize may enqueue more: while the process would
    stay under the cap. Resident memory lags: an output is allocated at enqueue time but its pages
    are touched when its kernel runs, so the cap counts the growth of the virtual size."""
    size, resident = statm_mb()
    if not _start:
        _start.update(size=size, resident=resident)
    return _start["resident"] + size - _start["size"] < spec["cap"]


def transformer_loop(spec):
    """The loop of `spec`'s transformer variant: a function that runs it and returns how many
    calls it ran."""
    torch.manual_seed(0)
    bf = spec["batch_first"]
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=bf).eval()
    g = torch.Generator().manual_seed(2)
    xs = [torch.randn(*((8, 128, 512) if bf else (128, 8, 512)), generator=g) for _ in range(4)]
    s = streamrt.Stream()  # (torch 1.x has no torch.cpu.Stream where not installed)

    def loop():
        with torch.no_grad():
            for i in range(spec["calls"]):
                if spec["mode"] == "eager":
                    layer(xs[i % len(xs)])
                    continue
                with torch.cpu.StreamContext(s):
                    layer(xs[i % len(xs)])
                if spec["mode"] == "sync":
                    s.synchronize()
                elif not under_cap(spec):
                    break
            s.synchronize()
        return i + 1
    return loop


def ensemble_loop(spec):
    """The loop of `spec`'s ensemble variant (see transformer_loop())."""
    k, width, batch = 4, 512, 128
    nets = make_mlps(k, width)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(batch, width, generator=g), torch.randn(batch, 1, generator=g))
            for _ in range(k)]
    streams = [streamrt.Stream() for _ in range(k)]

    def loop():
        for n in range(spec["calls"]):
            for i in range(k):
                if spec["mode"] == "eager":
                    step(*nets[i], *data[i])
                    continue
                with torch.cpu.StreamContext(streams[i]):
                    step(*nets[i], *data[i])
            if spec["mode"] == "sync":
                for s in streams:
                    s.synchronize()
            elif spec["mode"] == "end" and not under_cap(spec):
                break
        for s in streams:
            s.synchronize()
        return n + 1
    return loop


# ------------------------------------------------------------------------------------------------

CASES = {"ensemble": ensemble, "transformer": transformer, "pipeline": pipeline,
         "dataloader": dataloader, "memory": memory}


def run_case(fn, args):
    """Runs one case, then prints the warnings it raised: the ops that ran on the host inside
    a stream context (streamrt.torch.HostOpWarning, once per op and process) and any other."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(args)
    for w in caught:
        if issubclass(w.category, srt.HostOpWarning):
            print(f"  host op: {str(w.message).split(': this thread')[0]}")
        else:
            print(f"  warning: {w.category.__name__}: {w.message}")


def describe():
    """The machine, torch and its threads as eager torch has them (not installed)."""
    mkl = torch.backends.mkl.is_available()
    blas = "MKL" if mkl else "OpenBLAS"
    note = " (not torch's BLAS)" if mkl else ""
    print(f"cores {CORES}, streamrt workers {streamrt.get_num_threads()}, "
          f"torch {torch.__version__} ({blas}), eager defaults: {torch.get_num_threads()} "
          f"intra-op threads, OpenBLAS threads {streamrt._blas_threads()}{note}")
    print("load before %.2f %.2f %.2f" % os.getloadavg())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps and batches (a smoke run)")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--only", choices=list(CASES), default=None)
    p.add_argument("--memory-cap", type=float, default=2048,
                   help="MB: the memory case's loops without a per-call synchronize stop "
                   "enqueuing where the process would pass this size")
    p.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_child is not None:  # one variant of the memory case (memory_child())
        print(json.dumps(memory_run(json.loads(args.memory_child))))
        return
    if args.reps is None:
        args.reps = 3 if args.quick else 7
    describe()
    srt.install()
    try:
        for name, fn in CASES.items():
            if args.only in (None, name):
                run_case(fn, args)
    finally:
        srt.uninstall()
    print("load after %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
