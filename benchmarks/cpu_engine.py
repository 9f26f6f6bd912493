"""Host engine fp32 speed against onnxruntime, in the same run.

Usage::

    python benchmarks/cpu_engine.py [MODEL ...] [--repeat N] [--threads T] [--profile]

Defaults to the zoo's ResNet-18-CIFAR and MobileNet-v2 (goal: ratio <= 3.0).
Each model is imported and optimized with the default passes (as ``opendla run``
does), checked against onnxruntime, then both engines are timed on the same
input (median of ``--repeat`` runs after one warm-up).  Both engines get the
same number of threads (``--threads``, default 1: onnxruntime's intra-op pool
and numpy's BLAS through threadpoolctl), which compares the kernels rather than
the schedulers and keeps the ratio stable on a machine shared with other work.
onnxruntime keeps its default graph optimizations.  ``--profile`` prints the
host engine's time per op type.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import numpy as np
import onnxruntime as ort
from threadpoolctl import threadpool_limits

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import run_passes
from tengine_host.zoo import MODELS, build

DEFAULT_MODELS = ("resnet18_cifar", "mobilenet_v2")
GOAL = 3.0


def _median(fn, repeat: int) -> float:
    fn()  # warm-up: BLAS buffers, lazy imports, onnxruntime's first-run allocations
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(name: str, repeat: int, threads: int, profile: bool) -> float:
    model = build(name)
    graph = load_onnx(model)
    run_passes(graph)
    inp = graph.inputs[0]
    x = np.random.default_rng(0).standard_normal(graph.tensors[inp].shape).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, {inp: x})[0]
    got = interpret(graph, {inp: x})[graph.outputs[0]]
    err = float(np.abs(got - want).max() / np.abs(want).max())
    t_ort = _median(lambda: sess.run(None, {inp: x}), repeat)
    t_ours = _median(lambda: interpret(graph, {inp: x}), repeat)
    ratio = t_ours / t_ort
    print(f"{name:16s} ours {t_ours * 1e3:8.2f} ms  onnxruntime {t_ort * 1e3:8.2f} ms  "
          f"ratio {ratio:5.2f} (goal <= {GOAL})  rel err {err:.1e}  nodes {len(graph.nodes)}")
    if profile:
        per_type: dict[str, float] = defaultdict(float)
        for _ in range(repeat):
            timings: dict[str, float] = {}
            interpret(graph, {inp: x}, timings=timings)
            for node in graph.nodes:
                per_type[node.op_type] += timings[node.name] / repeat
        for op, sec in sorted(per_type.items(), key=lambda kv: -kv[1]):
            print(f"    {op:20s} {sec * 1e3:8.2f} ms")
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(DEFAULT_MODELS),
                    help=f"zoo models ({', '.join(MODELS)})")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for both engines (default 1)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    for name in args.models:
        if name not in MODELS:
            ap.error(f"model {name!r} not in {', '.join(MODELS)}")
    with threadpool_limits(args.threads):
        ratios = [bench(n, args.repeat, args.threads, args.profile) for n in args.models]
    return 0 if all(r <= GOAL for r in ratios) else 1


if __name__ == "__main__":
    raise SystemExit(main())
