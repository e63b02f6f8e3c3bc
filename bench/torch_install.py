"""streamrt.torch: unchanged torch code on streams (install()), against eager torch in the same run.

Prints ratios, each against a baseline measured in the same run, interleaved repetitions, medians:

* ``seed``: the seed article's products (N float32 1000x1000 ``torch.matmul``) on two streams
  against the same on one stream, and against eager torch with its default threads (OpenBLAS at
  every core, as torch has it without streamrt).
* ``ensemble``: K independent 3-layer MLPs (forward + backward + SGD step), one stream each,
  against the same on one stream, eager torch with its default threads, and eager torch with
  one thread; at 512 wide / batch 128 and at 256 wide / batch 32 (small ops: the host's
  dispatch cost decides). On torch 2.x (not in --quick runs) also the step compiled by
  ``torch.compile``, with eager's default threads: what a 2.x user would try instead. Then
  where a step's time goes: the host thread's CPU time against the kernels', and what enqueuing
  adds to eager's framework work (the same step on 8-wide networks, eager against held streams).
* ``host``: the host's cost per enqueued small op (64x64 add) against eager torch, with the
  stream held (so workers do not compete for the cores) and running; through the C++ fast path
  and through the dispatch mode's path, with a pass-through torch dispatch mode as the floor any
  Python mode pays, and the fast path's breakdown (dispatch-key entry, our work, the enqueue).
* ``large``: single ops of 1 ms or more, on a stream against eager at the same thread settings
  (one BLAS thread; what a stream's kernel gets) and against eager with the default threads.
* ``functional``: loops of ops that have no out= kernel of their own (relu, a dtype conversion,
  a convolution) on a stream against eager at the stream's threads, and how many of the
  stream's results were computed in their outputs rather than copied into them.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/torch_install.py [--quick] [--only NAME]
Figures count only on an idle machine: the load average is printed before and after.
"""

import argparse
import contextlib
import os
import statistics
import threading
import time

import torch

import streamrt
import streamrt.torch as srt
from streamrt import _torch_compat, _torch_mode, _torch_submit

CORES = os.cpu_count() or 1


def has_fast_path():
    """Whether streamrt.torch submits through the fast path now."""
    return _torch_mode.path().guard is not None


def use_fast_path(on):
    """The fast path on (the best submission path here) or off: the dispatch mode guards threads
    then, with the kernel runner where it was built."""
    off = "runner" if _torch_submit.native() is not None else "python"
    _torch_mode.use(None if on else off)


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


# Each timed run follows a pause and an untimed run of the same case, so that it starts from the
# case's own steady state, not the previous case's: OpenBLAS's threads poll for new work for a
# while after their last call before they sleep, and after eager's settings that poll took a core
# from the case timed next (docs/performance.md, "PyTorch ops on streams"), while a case's own
# pools, caches and queues are warm in a loop as a user runs it.
SETTLE_S = 0.3


def interleave(cases, reps, settle=SETTLE_S):
    """Median seconds of each case, the cases run in turn `reps` times (drifting load hits all),
    each timed run after a pause of `settle` seconds and an untimed run (above). A case is a
    function, or (settings, function): the settings (a context manager class) are applied around
    both runs, outside the timing."""
    times = {name: [] for name in cases}
    for _ in range(reps):
        for name, case in cases.items():
            if isinstance(case, tuple):
                with case[0]():
                    time.sleep(settle)
                    case[1]()
                    times[name] += timed(case[1], 1)
            else:
                time.sleep(settle)
                case()
                times[name] += timed(case, 1)
    return {name: statistics.median(v) for name, v in times.items()}


class eager_defaults:
    """Eager torch as it is without streamrt: not installed, OpenBLAS at every core, torch's own
    threads."""

    def __enter__(self):
        srt.uninstall()
        self.blas = streamrt._blas_threads()
        streamrt._set_blas_threads(CORES)

    def __exit__(self, *exc):
        streamrt._set_blas_threads(self.blas)
        srt.install()


class eager_one_thread:
    """Eager torch, not installed, one intra-op and one BLAS thread (what a stream's kernel gets)."""

    def __enter__(self):
        srt.uninstall()  # (restores OpenBLAS's own count: set to one again below)
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.blas = streamrt._blas_threads()
        streamrt._set_blas_threads(1)

    def __exit__(self, *exc):
        streamrt._set_blas_threads(self.blas)
        torch.set_num_threads(self.threads)
        srt.install()


def with_settings(ctx, fn):
    """A case of interleave(): fn timed under the settings `ctx`."""
    return (ctx, fn)


# ------------------------------------------------------------------------------------------------


def seed(args):
    n = 4 if args.quick else 16
    a, b = torch.randn(1000, 1000), torch.randn(1000, 1000)
    s1, s2 = torch.cpu.Stream(), torch.cpu.Stream()

    def streams(ss):
        def run():
            outs = []
            for i in range(n):
                with torch.cpu.StreamContext(ss[i % len(ss)]):
                    outs.append(torch.matmul(a, b))
            for s in ss:
                s.synchronize()
        return run

    def eager(count=n):
        for _ in range(count):
            torch.matmul(a, b)

    def plain_threads():
        # The machine's own ceiling for two concurrent products: two Python threads, one BLAS
        # thread each (torch releases the GIL inside matmul), no streamrt in the way.
        ts = [threading.Thread(target=eager, args=(n // 2,)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    cases = {"one stream": streams([s1]), "two streams": streams([s1, s2]),
             "eager (default threads)": with_settings(eager_defaults, eager),
             "eager (1 thread)": with_settings(eager_one_thread, eager),
             "two plain threads": with_settings(eager_one_thread, plain_threads)}
    interleave(cases, 1)  # warm-up
    m = interleave(cases, args.reps)
    print(f"seed: {n} matmuls 1000x1000 float32, median of {args.reps}")
    for k, v in m.items():
        print(f"  {k:28s} {v * 1e3:8.1f} ms")
    print(f"  two streams vs one stream     {m['one stream'] / m['two streams']:5.2f}x  (target >= 1.8)")
    print(f"  two streams vs eager defaults {m['eager (default threads)'] / m['two streams']:5.2f}x  "
          "(target >= 0.95)")
    print(f"  the cores' ceiling: two plain threads {m['eager (1 thread)'] / m['two plain threads']:5.2f}x"
          f" one thread, OpenBLAS's own threads {m['eager (1 thread)'] / m['eager (default threads)']:5.2f}x;"
          f" two streams reach {m['two plain threads'] / m['two streams'] * 100:5.1f}% of the plain threads")


def make_mlps(k, width, seed0=0):
    nets = []
    for i in range(k):
        torch.manual_seed(seed0 + i)
        net = torch.nn.Sequential(
            torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
            torch.nn.ReLU(), torch.nn.Linear(width, 1))
        nets.append((net, torch.optim.SGD(net.parameters(), lr=1e-3)))
    return nets


def step(net, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.mse_loss(net(x), y).backward()
    opt.step()


def ensemble(args, width, batch):
    k, steps = 4, (5 if args.quick else 20)
    nets = make_mlps(k, width)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(batch, width, generator=g), torch.randn(batch, 1, generator=g))
            for _ in range(k)]
    streams = [torch.cpu.Stream() for _ in range(k)]

    def on_streams(ss):
        def run():
            for _ in range(steps):
                for i, (net, opt) in enumerate(nets):
                    with torch.cpu.StreamContext(ss[i % len(ss)]):
                        step(net, opt, *data[i])
            for s in ss:
                s.synchronize()
        return run

    def eager():
        for _ in range(steps):
            for i, (net, opt) in enumerate(nets):
                step(net, opt, *data[i])

    procs = EnsembleProcesses(k, width, data, steps)
    cases = {"one stream": on_streams(streams[:1]), "one stream each": on_streams(streams),
             "eager (default threads)": with_settings(eager_defaults, eager),
             "eager (1 thread)": with_settings(eager_one_thread, eager),
             "two processes (ceiling)": procs.run}
    if compiled_step_wanted(args):
        cases["torch.compile'd step (default threads)"] = with_settings(
            eager_defaults, compiled_eager(nets, data, steps))
    try:
        interleave(cases, 1)
        m = interleave(cases, args.reps)
    finally:
        procs.close()
    print(f"ensemble: {k} MLPs {width} wide, batch {batch}, forward+backward+SGD, "
          f"per step of the {k} (median of {args.reps} x {steps} steps)")
    for name, v in m.items():
        print(f"  {name:28s} {v / steps * 1e3:8.2f} ms")
    print(f"  one stream each vs one stream     {m['one stream'] / m['one stream each']:5.2f}x"
          "  (target >= 1.8 at 512/128)")
    print(f"  one stream each vs eager defaults {m['eager (default threads)'] / m['one stream each']:5.2f}x"
          "  (target >= 1.3 at 512/128)")
    compiled = m.get("torch.compile'd step (default threads)")
    if compiled is not None:
        print(f"  one stream each vs torch.compile'd step {compiled / m['one stream each']:5.2f}x"
              f"  (the compiled step vs eager defaults {m['eager (default threads)'] / compiled:5.2f}x)")
    print(f"  the cores' ceiling: two processes {m['eager (1 thread)'] / m['two processes (ceiling)']:5.2f}x"
          f" eager (1 thread), {m['eager (default threads)'] / m['two processes (ceiling)']:5.2f}x eager"
          f" defaults; one stream each reaches "
          f"{m['two processes (ceiling)'] / m['one stream each'] * 100:5.1f}% of it")
    if has_fast_path():
        ensemble_breakdown(args, nets, data, streams, steps)
        enqueue_cost(args, k, batch, streams, steps)


def compiled_step_wanted(args):
    """Whether the ensemble also times what a torch 2.x user would try instead of streams: the
    step compiled by torch.compile (inductor), with eager's default threads. Not in --quick runs:
    compiling takes seconds to minutes."""
    return hasattr(torch, "compile") and not args.quick


def compiled_eager(nets, data, steps):
    """The eager loop with each network's step compiled by torch.compile, compiled now (without
    streamrt, as a user without it would) and run once, so the timing has no compile in it."""
    with eager_defaults():
        cstep = torch.compile(step)
        for i, (net, opt) in enumerate(nets):
            cstep(net, opt, *data[i])

    def run():
        for _ in range(steps):
            for i, (net, opt) in enumerate(nets):
                cstep(net, opt, *data[i])
    return run


class EnsembleProcesses:
    """The two cores' ceiling for the ensemble with eager torch and no GIL between the networks:
    two spawned processes, one intra-op and one BLAS thread each, each training half of the
    networks (the same weights and data) on its own core. run() starts one batch of `steps` steps
    in both and returns when both are done."""

    def __init__(self, k, width, data, steps):
        import multiprocessing
        # (spawn: a fork after torch.compile ran autograd is refused by torch)
        ctx = multiprocessing.get_context("spawn")
        self.pipes, self.procs = [], []
        for p in range(2):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=self._child, args=(child, list(range(p, k, 2)), k, width,
                                                         data, steps), daemon=True)
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)
        for pipe in self.pipes:
            pipe.recv()  # ready

    @staticmethod
    def _child(pipe, mine, k, width, data, steps):
        srt.uninstall()
        torch.set_num_threads(1)
        streamrt._set_blas_threads(1)
        nets = make_mlps(k, width)
        pipe.send("ready")
        while pipe.recv() == "go":
            for _ in range(steps):
                for i in mine:
                    step(*nets[i], *data[i])
            pipe.send("done")

    def run(self):
        for pipe in self.pipes:
            pipe.send("go")
        for pipe in self.pipes:
            pipe.recv()

    def close(self):
        for pipe, proc in zip(self.pipes, self.procs):
            pipe.send("stop")
            proc.join(30)


def host_time(fn):
    """The calling thread's CPU seconds in fn()."""
    t = time.thread_time()
    fn()
    return time.thread_time() - t


def held_host_time(streams, body):
    """host_time(body) with `streams` held by gates until it returns (the workers idle, nothing
    runs meanwhile), then released and synchronized."""
    gates = [threading.Event() for _ in streams]
    for s, gate in zip(streams, gates):
        s.launch(gate.wait)
    # (the held streams move only after the body: the queue limit would wait for them first)
    limits = srt.queue_limit()
    srt.set_queue_limit(0, 0)
    try:
        t = host_time(body)
    finally:
        srt.set_queue_limit(limits["items"], limits["nbytes"])
        for gate in gates:
            gate.set()
    for s in streams:
        s.synchronize()
    return t


def ensemble_breakdown(args, nets, data, streams, steps):
    """Where a step's time goes: the host thread's CPU time per step (the only thread issuing
    ops) against the kernels' (the fast path's probes run them on the host thread), interleaved,
    medians."""

    def body():
        for _ in range(steps):
            for i, (net, opt) in enumerate(nets):
                with torch.cpu.StreamContext(streams[i]):
                    step(net, opt, *data[i])

    def held():
        return held_host_time(streams, body)

    native = _torch_submit.native()
    probes = native.Probe

    def probe(n):
        def run():
            native._set_probe(n)
            try:
                t = host_time(body)
            finally:
                native._set_probe(probes.OFF)
            for s in streams:
                s.synchronize()
            return t
        return run

    def eager():
        with eager_one_thread():
            return host_time(lambda: [step(net, opt, *data[i]) for _ in range(steps)
                                      for i, (net, opt) in enumerate(nets)])

    cases = {"eager": eager, "kernels run by the host": probe(probes.WORK),
             "no kernels": probe(probes.NO_KERNEL),
             "held": held}
    times = {name: [] for name in cases}
    for rep in range(args.reps + 1):
        for name, fn in cases.items():
            t = fn() / steps * 1e3
            if rep:
                times[name].append(t)
    m = {name: statistics.median(v) for name, v in times.items()}
    kernels = m["kernels run by the host"] - m["no kernels"]
    held_ms = m["held"]
    print(f"  where the time goes (host thread CPU per step, median of {args.reps}):")
    print(f"    eager, 1 thread: {m['eager']:.2f} ms, of which kernels {kernels:.2f} ms and "
          f"framework (Python, autograd, dispatch) {m['eager'] - kernels:.2f} ms")
    print(f"    streams: the host thread {held_ms:.2f} ms (framework and enqueue, streams held); "
          f"the kernels need {kernels / CORES:.2f} ms on {CORES} workers -> "
          f"{'the host decides' if held_ms > kernels / CORES else 'the kernels decide'} "
          f"(a step takes at least {max(held_ms, kernels / CORES):.2f} ms)")


def enqueue_cost(args, k, batch, streams, steps):
    """What enqueuing adds to eager's framework work, measured directly: the host thread's CPU
    time per step of the same training step on 8-wide networks (kernels of a few elements, so the
    step is framework: Python, autograd, dispatch), eager on one thread against enqueued on held
    streams (the workers idle), interleaved, medians."""
    nets = make_mlps(k, 8, seed0=100)
    g = torch.Generator().manual_seed(2)
    data = [(torch.randn(min(batch, 2), 8, generator=g), torch.randn(min(batch, 2), 1, generator=g))
            for _ in range(k)]

    def body(ctx):
        for _ in range(steps):
            for i, (net, opt) in enumerate(nets):
                with (torch.cpu.StreamContext(streams[i]) if ctx else contextlib.nullcontext()):
                    step(net, opt, *data[i])

    def held():
        return held_host_time(streams, lambda: body(True))

    def eager():
        with eager_one_thread():
            return host_time(lambda: body(False))

    native = _torch_submit.native()
    before = sum(native.fast_counts())
    body(True)  # (a warm-up that also counts the ops of a step)
    for s in streams:
        s.synchronize()
    ops = (sum(native.fast_counts()) - before) / steps
    times = {"eager": [], "held": []}
    for rep in range(args.reps + 1):
        for name, fn in (("eager", eager), ("held", held)):
            t = fn() / steps * 1e3
            if rep:
                times[name].append(t)
    e, h = statistics.median(times["eager"]), statistics.median(times["held"])
    print(f"    measured directly on 8-wide networks ({ops:.0f} ops per step, kernels negligible): "
          f"eager's framework {e:.2f} ms per step, the host enqueuing them {h:.2f} ms: "
          f"{(h - e) / ops * 1e3:+.2f} us per op")


class _PassThrough(torch.utils._python_dispatch.TorchDispatchMode):
    """A dispatch mode that only runs each op: the floor any Python dispatch mode pays."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not _torch_compat.MODE_STAYS_SET_IN_DISPATCH:  # torch 2.x pops it meanwhile
            return func(*args, **(kwargs or {}))
        _torch_compat.pop_mode(self)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _torch_compat.push_mode(self)


def host(args):
    """The host's cost per small op (64x64 add), in batches of BATCH calls: each batch is timed
    alone (wall and the host thread's CPU time), the median batch counts. For the enqueued cases
    the stream is held by a gate during the batch (so the workers neither compete for the cores
    nor free memory meanwhile) and released and synchronized after it, untimed; the batch is short
    enough that the outputs' memory is reused from batch to batch as eager torch reuses it."""
    batch = 100
    batches = 60 if args.quick else 400
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    s = torch.cpu.Stream()
    native = _torch_submit.native()

    def loop():
        for _ in range(batch):
            torch.add(a, b)

    def timed_batch(before=None, after=None, context=False):
        if before:
            before()
        if context:
            with torch.cpu.StreamContext(s):
                w, c = time.perf_counter_ns(), time.thread_time_ns()
                loop()
                c, w = time.thread_time_ns() - c, time.perf_counter_ns() - w
        else:
            w, c = time.perf_counter_ns(), time.thread_time_ns()
            loop()
            c, w = time.thread_time_ns() - c, time.perf_counter_ns() - w
        if after:
            after()
        return w / batch / 1e3, c / batch / 1e3

    gate = []

    def hold():
        gate.append(threading.Event())
        s.launch(gate[-1].wait)

    def release():
        gate.pop().set()
        s.synchronize()

    pass_through = _PassThrough()

    def mode_on():
        _torch_compat.push_mode(pass_through)  # (1.13's mode slot, 2.x's mode stack)

    def mode_off():
        _torch_compat.pop_mode(pass_through)

    def probe(n):
        return lambda: native._set_probe(n)

    def probe_off():
        native._set_probe(native.Probe.OFF)

    def dispatch_mode_path():
        use_fast_path(False)

    def fast_path():
        use_fast_path(True)

    def no_origins(then):
        # Launches without reading the user's line (failures name no line): its cost, A/B.
        return lambda: (streamrt._streamrt._set_launch_origins(False), then())

    def origins_again(then):
        return lambda: (then(), streamrt._streamrt._set_launch_origins(True))

    # name -> (before, after, inside a context); installed for all but the first two
    cases = {}
    srt.uninstall()
    cases["eager"] = (None, None, False)
    cases["pass-through mode"] = (mode_on, mode_off, False)
    plain = dict(cases)
    cases = {"guard": (None, None, False)}
    fast = has_fast_path()
    if fast:
        cases["probe: entry"] = (probe(native.Probe.ENTRY), probe_off, True)
        cases["probe: work"] = (probe(native.Probe.WORK), probe_off, True)
        cases["probe: work, no kernel"] = (probe(native.Probe.NO_KERNEL), probe_off, True)
        cases["fast path, held"] = (hold, release, True)
        cases["fast path, held, no origins"] = (no_origins(hold), origins_again(release), True)
        cases["mode path, held"] = (lambda: (dispatch_mode_path(), hold()),
                                    lambda: (release(), fast_path()), True)
        cases["mode path, held, no origins"] = (
            no_origins(lambda: (dispatch_mode_path(), hold())),
            origins_again(lambda: (release(), fast_path())), True)
    else:
        cases["mode path, held"] = (hold, release, True)
        cases["mode path, held, no origins"] = (no_origins(hold), origins_again(release), True)
    times = {name: [] for name in list(plain) + list(cases)}

    def run_all(record):
        srt.uninstall()
        for name, (before, after, ctx) in plain.items():
            r = timed_batch(before, after, ctx)
            if record:
                times[name].append(r)
        srt.install()
        for name, (before, after, ctx) in cases.items():
            r = timed_batch(before, after, ctx)
            if record:
                times[name].append(r)

    for _ in range(5):  # warm-up: plans, meta inference, the checked first run, the fast path's cache
        run_all(False)
        s.synchronize()
    for _ in range(batches):  # interleaved: drifting load hits every case alike
        run_all(True)
    n_run = batch * (4 if args.quick else 100)  # a user's loop: 10,000 calls

    loop_only = []

    def running():
        with torch.cpu.StreamContext(s):
            t = time.perf_counter()
            for _ in range(n_run):
                torch.add(a, b)
            loop_only.append(time.perf_counter() - t)
        s.synchronize()

    def eager_loop():
        for _ in range(n_run):
            torch.add(a, b)

    user = interleave({"eager": with_settings(eager_defaults, eager_loop), "run": running},
                      args.reps)
    run, eager_run = user["run"] / n_run * 1e6, user["eager"] / n_run * 1e6
    med = {name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for name, v in times.items()}
    eager_w, eager_c = med["eager"]
    print(f"host cost per op (64x64 add; median of {batches} batches of {batch}; wall and the "
          "host thread's CPU time):")

    def row(label, name, note=""):
        w, c = med[name]
        print(f"  {label:34s} {w:6.2f} us (+{w - eager_w:5.2f})   cpu {c:6.2f} us "
              f"(+{c - eager_c:5.2f}){note}")

    row("eager torch", "eager")
    row("pass-through dispatch mode", "pass-through mode", "  (the floor of a Python mode)")
    row("installed, outside a context", "guard")
    if fast:
        row("enqueued, fast path (C++), held", "fast path, held", "  (target <= +15)")
        row("  the same, origins not read", "fast path, held, no origins")
        row("enqueued, dispatch mode's path, held", "mode path, held")
        row("  the same, origins not read", "mode path, held, no origins")
        e, p1, p2, p3, h = (med[k][0] for k in ("eager", "probe: entry", "probe: work",
                                                 "probe: work, no kernel", "fast path, held"))
        print("  fast path breakdown (wall): dispatch-key entry "
              f"{p1 - e:+.2f} us, our work (scan, cache, outputs, trackers) {p2 - p1:+.2f} us, "
              f"the enqueue {h - p3:+.2f} us, less the kernel no longer run on the host "
              f"{-(p2 - p3):+.2f} us")
        print(f"  fast path vs dispatch mode's path: "
              f"{(med['mode path, held'][0] - eager_w) / max(med['fast path, held'][0] - eager_w, 1e-9):.1f}x"
              " less added host time")
    else:
        row("enqueued, dispatch mode's path, held", "mode path, held",
            f"  (target <= +15; fast path unavailable: {_torch_submit.unavailable('fast')})")
        row("  the same, origins not read", "mode path, held, no origins")
    print(f"  a user's loop of {n_run} in a context, perf_counter around it and the synchronize "
          f"(host + workers): {run:6.2f} us per op against {eager_run:6.2f} us eager, "
          f"{run / eager_run:4.2f}x eager (target <= 2; alternated, median of {args.reps})")
    loop = statistics.median(loop_only) / n_run * 1e6
    print(f"    of which the loop alone (the host's time, the stream running): {loop:6.2f} us per "
          f"op, {loop / eager_run:4.2f}x eager")


def large(args):
    a = torch.randn(1000, 1000)
    x = torch.randn(4000, 4000)
    ops = {"matmul 1000x1000": lambda: torch.matmul(a, a), "exp 16M": lambda: torch.exp(x),
           "sum 16M": lambda: x.sum()}
    s = torch.cpu.Stream()
    print(f"single ops of 1 ms or more (median of {args.reps}):")
    for name, op in ops.items():
        def stream_op(op=op):
            with torch.cpu.StreamContext(s):
                op()
            s.synchronize()

        cases = {"stream": stream_op, "eager (stream's threads)": with_settings(eager_one_thread, op),
                 "eager (default threads)": with_settings(eager_defaults, op)}
        interleave(cases, 1)
        m = interleave(cases, args.reps)
        print(f"  {name:18s} stream {m['stream'] * 1e3:7.2f} ms, eager same threads "
              f"{m['eager (stream' + chr(39) + 's threads)'] * 1e3:7.2f} ms "
              f"({m['stream'] / m['eager (stream' + chr(39) + 's threads)']:4.2f}x; target <= 1.10), "
              f"eager default threads {m['eager (default threads)'] * 1e3:7.2f} ms")


def functional(args):
    """Ops with no out= kernel of their own (torch generates their out= overloads as the op and a
    copy), each in a loop on a stream (one synchronize) against the same loop eager at the
    stream's threads; and how many of the stream's results were computed in their outputs (the
    rest were copied into them). Timed after a pause, as every case here, and back to back: a
    loop of a few ms that starts after the cores idled pays the hand-over from the host thread to
    a worker, which on some virtual machines costs far more than on an awake machine
    (docs/torch.md, "When streams pay off")."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 16, 64, 64, generator=g)  # 2 MB
    raw = torch.randint(0, 256, (32, 3, 64, 64), dtype=torch.uint8, generator=g)
    planes = torch.randn(96, 1, 64, 64, generator=g)
    blur = torch.ones(1, 1, 3, 3) / 9
    conv2d = torch.nn.functional.conv2d
    ops = {"relu, 2 MB": lambda: torch.relu(x), "uint8 to float, 1.5 MB": lambda: raw.float(),
           "3x3 conv2d of 96 planes 64x64": lambda: conv2d(planes, blur, padding=1)}
    n = 20 if args.quick else 100
    s = torch.cpu.Stream()
    native = _torch_submit.native()
    print(f"functional ops without an out= kernel, loops of {n} (median of {args.reps}):")
    for name, op in ops.items():
        def on_stream(op=op):
            with torch.cpu.StreamContext(s):
                for _ in range(n):
                    op()
            s.synchronize()

        def eager(op=op):
            for _ in range(n):
                op()

        cases = {"stream": on_stream, "eager": with_settings(eager_one_thread, eager)}
        interleave(cases, 1)
        before = native.handover_stats() if native is not None else None
        m = interleave(cases, args.reps)
        placed = ""
        if before is not None:
            after = native.handover_stats()
            placed = (f"; in their outputs {after['in_place'] - before['in_place']}, "
                      f"copied {after['copied'] - before['copied']}")
        print(f"  {name:30s} stream {m['stream'] / n * 1e6:8.1f} us, eager same threads "
              f"{m['eager'] / n * 1e6:8.1f} us ({m['stream'] / m['eager']:4.2f}x){placed}")
        b = interleave(cases, 3 * args.reps, settle=0)
        print(f"  {'':30s} back to back: stream {b['stream'] / n * 1e6:8.1f} us, eager "
              f"{b['eager'] / n * 1e6:8.1f} us ({b['stream'] / b['eager']:4.2f}x)")


def guard_toll(args):
    """What install() adds to an eager op outside stream contexts, timed as a user times it: a
    loop of 64x64 adds around perf_counter, on tensors that have been through stream work with
    nothing pending; with the fast path's C++ guard and with the dispatch mode as the guard."""
    n = 1000 if args.quick else 10000
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    s = torch.cpu.Stream()

    def loop():
        t = time.perf_counter()
        for _ in range(n):
            a + b
        return (time.perf_counter() - t) / n * 1e6

    def per_op():
        return statistics.median(loop() for _ in range(9))

    def installed(fast):
        use_fast_path(fast)
        srt.install()
        with torch.cpu.StreamContext(s):
            a.add_(0)
            b.add_(0)
        s.synchronize()
        return per_op()

    guards = {"C++ guard": True, "dispatch-mode guard": False}
    if _torch_submit.unavailable("fast") is not None:
        guards = {"dispatch-mode guard": False}
    res = {name: [] for name in ["eager"] + list(guards)}
    for _ in range(args.reps):  # alternated: drifting load hits every case alike
        srt.uninstall()
        res["eager"].append(per_op())
        for name, fast in guards.items():
            res[name].append(installed(fast))
            srt.uninstall()
    use_fast_path(True)
    srt.install()
    eager = statistics.median(res["eager"])
    print(f"eager op outside contexts after install() (64x64 add, loops of {n}, medians):")
    for name, v in res.items():
        w = statistics.median(v)
        print(f"  {name:22s} {w:6.2f} us per op (+{w - eager:5.2f})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--only", choices=["seed", "ensemble", "host", "large", "functional", "guard"],
                   default=None)
    args = p.parse_args()
    if args.reps is None:
        args.reps = 3 if args.quick else 7
    print(f"cores {CORES}, streamrt workers {streamrt.get_num_threads()}, torch {torch.__version__}, "
          f"load {os.getloadavg()[0]:.2f}")
    srt.install()
    try:
        if args.only in (None, "seed"):
            seed(args)
        if args.only in (None, "ensemble"):
            ensemble(args, 512, 128)
            ensemble(args, 256, 32)
        if args.only in (None, "host"):
            host(args)
        if args.only in (None, "large"):
            large(args)
        if args.only in (None, "functional"):
            functional(args)
        if args.only in (None, "guard"):
            guard_toll(args)
    finally:
        srt.uninstall()
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
