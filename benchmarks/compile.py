"""Time the whole-network compiler on the zoo (and check that it is deterministic).

Usage::

    python benchmarks/compile.py [MODEL ...] [--preset nv_small] [--repeat 3]

For each model: the partition (capability checks of every node), then every
DLA subgraph compiled to a loadable (lowering, CBUF tiling, memory planning,
emission, flatbuffer serialization), timed as the median of ``--repeat``
runs; the loadables of two compilations must be byte-identical.  As a peer
measured in the same run it prints the time onnxruntime takes to create an
inference session for the same model (its own graph optimization), and the
ratio.  The goal for YOLOX-nano on nv_small is under 5 s.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime as ort

from accel.compiler import compile_subgraph
from accel.compiler.ops.conv import choose_block
from accel.compiler.tiling import plan_conv
from accel.config import get_preset
from tengine_host.devices import get_device
from tengine_host.model import load_model
from tengine_host.partition import partition
from tengine_host.quant import calibrate
from tengine_host.zoo import MODELS, build
from tengine_host.zoo.report import random_samples


def _compile(graph, table, preset: str) -> tuple[list[bytes], int]:
    cfg = get_preset(preset)
    parts = partition(graph, [get_device("nvdla", preset=preset), get_device("cpu")])
    blobs, ops = [], 0
    for dev, sub in parts.parts:
        if dev.name == "nvdla":
            compiled = compile_subgraph(sub, table, cfg)
            blobs.append(compiled.to_bytes())
            ops += len(compiled.ops)
    return blobs, ops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--preset", default="nv_small")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'model':<16} {'preset':<9} {'DLA ops':>7} {'compile s':>10} {'ort session s':>14} "
          f"{'ratio':>6} {'identical':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(build(name), path)
            graph = load_model(path)
            table = calibrate(graph, random_samples(graph, 4), progress=False)
            times, digests, ops = [], set(), 0
            for _ in range(args.repeat):
                plan_conv.cache_clear()     # every run cold, as a user's first compile
                choose_block.cache_clear()
                start = time.perf_counter()
                blobs, ops = _compile(graph, table, args.preset)
                times.append(time.perf_counter() - start)
                digests.add(hashlib.sha256(b"".join(blobs)).hexdigest())
            peer = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
                peer.append(time.perf_counter() - start)
            sec, ort_sec = statistics.median(times), statistics.median(peer)
            print(f"{name:<16} {args.preset:<9} {ops:>7} {sec:>10.2f} {ort_sec:>14.3f} "
                  f"{sec / ort_sec:>6.1f} {'yes' if len(digests) == 1 else 'NO':>9}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
