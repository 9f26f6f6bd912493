"""Simulated-DLA inference speed against onnxruntime, measured in the same run.

Usage::

    python benchmarks/dla_models.py [MODEL ...] [--preset nv_small] [--repeat 20]
                                    [--rss N] [--ops N]
    python benchmarks/dla_models.py --shared [--preset nv_large]

For each model (default: resnet18_cifar, mobilenet_v2, yolox_nano; a MODEL is a
zoo name or an ``.onnx`` file; ``--shared``: every real model in
``../shared/models``): the model is calibrated (a zoo model on seeded random
inputs, a file on its ``<name>_sample.npz`` beside it when there is one, with
that input's shape) and partitioned between the
``nvdla`` device (the bit-accurate cmodel behind the firmware) and the CPU, as
``opendla run --device nvdla`` does.  Timed warm, median of ``--repeat``
inferences after eight warm-ups (``WARMUP``: until the replays are learned),
every engine on one thread (numpy's BLAS through threadpoolctl, onnxruntime's
intra-op pool), which compares the work rather than the schedulers and keeps
ratios stable on a shared machine; the
engines take turns, one inference each per round, so a drifting machine speed
weighs on all of them alike:

* ``nvdla``: the whole ``--device nvdla`` inference (DLA subgraphs on the
  cmodel, the rest on the host engine) and its DLA part alone;
* onnxruntime fp32 on the same model;
* onnxruntime int8: the model quantized by onnxruntime (QDQ, per-channel int8
  weights, int8 activations) on the same calibration inputs (``-`` where
  onnxruntime cannot quantize the model, e.g. an opset its QDQ nodes do not
  match).

Goals (issue 9): ``nvdla`` / ort fp32 <= 1.5 for resnet18_cifar, <= 3.0 for
mobilenet_v2 and yolox_nano.  ``--batch N`` times one run of a batch of N samples
against the N samples one by one, for models whose batch is not fixed at 1 (goal:
no slower).  ``--ops N`` times a chain of N small
conv+SDP operations (1x1, 8 -> 8 channels, 4x4) in one loadable and prints the
fixed cost per operation (goal <= 0.1 ms).  ``--rss N`` runs N inferences of
each model, each in a fresh process (what an earlier model freed would hide
growth), and prints the resident memory after 1 and after N (goal: within
5 MiB).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.zoo import MODELS, build
from tengine_host.zoo.report import random_samples

DEFAULT_MODELS = ("resnet18_cifar", "mobilenet_v2", "yolox_nano")
GOALS = {"resnet18_cifar": 1.5, "mobilenet_v2": 3.0, "yolox_nano": 3.0}
#: the goal for a real model (issue 46): nvdla <= 2x onnxruntime fp32
REAL_GOAL = 2.0
SHARED_MODELS = Path(__file__).resolve().parents[1].parent / "shared" / "models"
#: inputs of shared models with dynamic axes and no sample beside them
SHAPES = {"ppocr_mobile_v2_cls_48x192": {"x": (1, 3, 48, 192)}}


#: untimed runs first, until every replay is learned: the firmware records a task's register
#: program on its first run, once per starting state of the engines' group pointers (a task
#: with an odd number of convolutions leaves them flipped, so its runs alternate between two
#: states); the cmodel learns each recording on its first replay and each batch's register
#: effect on the first fast play after that.  resnet18_cifar and yolox_nano (two states)
#: run at their steady speed from the eighth inference, mobilenet_v2 from the fifth
WARMUP = 8


def _medians(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each of ``fns``, timed in turns (one call of each per round) so
    that a machine whose speed drifts - a shared core, a second vCPU that comes and goes
    - slows every engine alike rather than whichever ran during the slow spell."""
    for fn in fns.values():
        for _ in range(WARMUP):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def _session(path: str | Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3          # errors only: not its notes on unused initializers
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _ort_int8(src: Path, dst: Path, samples: list[dict]) -> Path:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(samples)

        def get_next(self):
            return next(self._it, None)

    logging.getLogger().setLevel(logging.ERROR)   # its per-tensor advice is not ours to print
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return dst


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_growth(name: str, preset: str, n: int) -> tuple[float, float]:
    """Resident MiB after the first and the ``n``-th inference of ``name`` on the nvdla
    device (call it in a fresh process)."""
    with threadpool_limits(limits=1), tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.onnx"
        onnx.save(build(name), path)
        graph = load_model(path)
        table = calibrate(graph, random_samples(graph, 4), progress=False)
        sample = random_samples(graph, 1, seed=3)[0]
        with Executor(graph, [get_device("nvdla", preset=preset), get_device("cpu")],
                      table) as ex:
            ex.run(sample)
            first = _rss_mib()
            for _ in range(n - 1):
                ex.run(sample)
            return first, _rss_mib()


def _model_file(name: str, tmp: Path) -> tuple[Path, object, list[dict], dict]:
    """``(path, graph, calibration samples, timed sample)`` of a zoo name or a file."""
    if name in MODELS:
        path = tmp / f"{name}.onnx"
        onnx.save(build(name), path)
        graph = load_model(path)
        return path, graph, random_samples(graph, 8), random_samples(graph, 1, seed=99)[0]
    path = Path(name)
    npz = path.with_name(f"{path.stem}_sample.npz")
    sample = {k: v.astype(np.float32) for k, v in np.load(npz).items()} if npz.exists() \
        else None
    shapes = {k: v.shape for k, v in sample.items()} if sample else SHAPES.get(path.stem)
    graph = load_model(path, input_shapes=shapes)
    if sample is None:
        sample = random_samples(graph, 1, seed=99)[0]
    return path, graph, [sample], sample


def bench_model(name: str, preset: str, repeat: int, tmp: Path) -> dict:
    path, graph, calib, sample = _model_file(name, tmp)
    table = calibrate(graph, calib, progress=False)
    fp32 = _session(path)
    try:
        q = _session(_ort_int8(path, tmp / f"{path.stem}_qdq.onnx", calib))
    except Exception as exc:                # onnxruntime's own failure: no int8 peer
        print(f"{path.stem}: onnxruntime int8 unavailable ({type(exc).__name__})", flush=True)
        q = None
    dla: list[float] = []
    with Executor(graph, [get_device("nvdla", preset=preset), get_device("cpu")], table) as ex:
        def run_nvdla() -> None:
            ex.run(sample)
            dla.append(sum(t for label, t in ex.subgraph_times if "nvdla" in label))

        t = _medians({"nvdla": run_nvdla, "fp32": lambda: fp32.run(None, sample),
                      **({"int8": lambda: q.run(None, sample)} if q else {})}, repeat)
        counts = ex.partition.subgraph_counts()
    return dict(model=name if name in MODELS else path.stem, nvdla=t["nvdla"],
                dla_part=statistics.median(dla[WARMUP:]), fp32=t["fp32"], int8=t.get("int8"),
                subgraphs=counts)


def bench_batch(name: str, preset: str, n: int, repeat: int, tmp: Path) -> dict | str:
    """One ``run`` of a batch of ``n`` samples against the same ``n`` samples one by one
    (issue 46: no slower per sample); or why the model takes no batch."""
    path, graph, calib, sample = _model_file(name, tmp)
    shapes = {t: (n, *graph.tensors[t].shape[1:]) for t in graph.inputs}
    try:
        batched_graph = load_model(path, input_shapes=shapes)
    except Exception as exc:                # a model whose batch is fixed at 1
        return f"takes no batch of {n}: {exc}"
    rng = np.random.default_rng(7)
    feeds = [{t: (v + rng.normal(0, 0.1, v.shape)).astype(np.float32) for t, v in sample.items()}
             for _ in range(n)]
    batch = {t: np.concatenate([f[t] for f in feeds]) for t in graph.inputs}
    table = calibrate(graph, calib, progress=False)
    devices = [get_device("nvdla", preset=preset), get_device("cpu")]
    with Executor(graph, devices, table) as one, \
            Executor(batched_graph, [get_device("nvdla", preset=preset), get_device("cpu")],
                     table) as many:
        t = _medians({"one by one": lambda: [one.run(f) for f in feeds],
                      "batch": lambda: many.run(batch)}, repeat)
    return dict(model=name if name in MODELS else path.stem, n=n, ones=t["one by one"],
                batch=t["batch"])


def _conv_chain(n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, t = [], [], "x"
    for i in range(n):
        inits += [numpy_helper.from_array(rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32),
                                          f"w{i}"),
                  numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), f"b{i}")]
        nodes.append(helper.make_node("Conv", [t, f"w{i}", f"b{i}"], [f"y{i}"], name=f"c{i}"))
        t = f"y{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 4, 4])], [helper.make_tensor_value_info(
            t, TensorProto.FLOAT, [1, 8, 4, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def bench_ops(n: int, preset: str, repeat: int, tmp: Path) -> tuple[float, float]:
    """(seconds per conv+SDP op, seconds of the whole chain)."""
    path = tmp / "chain.onnx"
    onnx.save(_conv_chain(n), path)
    graph = load_model(path)
    table = calibrate(graph, random_samples(graph, 4), progress=False)
    sample = random_samples(graph, 1, seed=5)[0]
    with Executor(graph, [get_device("nvdla", preset=preset), get_device("cpu")], table) as ex:
        assert ex.partition.subgraph_counts() == {"nvdla": 1, "cpu": 0}
        times = []
        for _ in range(WARMUP):
            ex.run(sample)
        for _ in range(repeat):
            ex.run(sample)
            times.append(ex.subgraph_times[0][1])
        t = statistics.median(times)
    return t / n, t


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*",
                   help=f"zoo models or .onnx files (default {' '.join(DEFAULT_MODELS)}; the "
                        f"zoo: {', '.join(MODELS)})")
    p.add_argument("--shared", action="store_true",
                   help=f"every real model in {SHARED_MODELS} (after any MODELs)")
    p.add_argument("--preset", default="nv_small")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--ops", type=int, default=40, help="conv+SDP chain length (0: skip)")
    p.add_argument("--rss", type=int, default=0, help="inferences for the memory check")
    p.add_argument("--batch", type=int, default=0,
                   help="also time a batch of N samples in one run against N runs (0: skip)")
    args = p.parse_args(argv)
    for m in args.models:
        if m not in MODELS and not (m.endswith(".onnx") and Path(m).is_file()):
            p.error(f"model {m!r} is neither in the zoo ({', '.join(MODELS)}) nor an .onnx "
                    f"file")
    if args.shared:
        if not SHARED_MODELS.is_dir():
            p.error(f"--shared: no folder {SHARED_MODELS}")
        args.models += [str(f) for f in sorted(SHARED_MODELS.glob("*.onnx"))]
    args.models = args.models or list(DEFAULT_MODELS)
    with threadpool_limits(limits=1), tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(f"{'model':26s} {'nvdla ms':>9s} {'DLA part':>9s} {'ort fp32':>9s} "
              f"{'ort int8':>9s} {'nvdla/fp32':>10s} {'DLA/int8':>9s} {'goal':>5s}")
        for name in args.models:
            r = bench_model(name, args.preset, args.repeat, tmp)
            goal = GOALS.get(name, None if name in MODELS else REAL_GOAL)
            print(f"{r['model']:26s} {r['nvdla'] * 1e3:9.1f} {r['dla_part'] * 1e3:9.1f} "
                  f"{r['fp32'] * 1e3:9.1f} {_ms(r['int8']):>9s} "
                  f"{r['nvdla'] / r['fp32']:10.2f} "
                  f"{format(r['dla_part'] / r['int8'], '.2f') if r['int8'] else '-':>9s} "
                  f"{'<=' + format(goal, '.1f') if goal else '':>5s}   {r['subgraphs']}",
                  flush=True)
        for name in args.models if args.batch > 1 else ():
            r = bench_batch(name, args.preset, args.batch, max(3, args.repeat // 4), tmp)
            if isinstance(r, str):
                print(f"batch {name}: {r}", flush=True)
                continue
            print(f"batch {r['model']}: {r['n']} samples in one run {r['batch'] * 1e3:.1f} ms, "
                  f"one by one {r['ones'] * 1e3:.1f} ms; batch / one by one "
                  f"{r['batch'] / r['ones']:.2f} (goal <= 1.0)", flush=True)
        if args.ops:
            per, whole = bench_ops(args.ops, args.preset, args.repeat, tmp)
            print(f"fixed cost of one small conv+SDP op: {per * 1e3:.3f} ms "
                  f"({args.ops} ops in {whole * 1e3:.1f} ms; goal <= 0.1 ms)")
    for name in args.models if args.rss else ():
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            first, last = pool.submit(rss_growth, name, args.preset, args.rss).result()
        print(f"RSS {name}: {first:.1f} MiB after 1 inference, {last:.1f} MiB after "
              f"{args.rss} ({last - first:+.1f} MiB; goal within 5 MiB)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
