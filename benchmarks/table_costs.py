"""What the default calibration costs at compile and run time, against the old default.

Usage::

    python benchmarks/table_costs.py [MODEL ...] [--preset nv_small] [--repeat 3]

The default table of ``opendla quantize`` may carry weight rewrites (cross-layer
equalization, bias correction, applied again to the model wherever the table is
used) and zero points (more converter and bias work per layer).  The goal: compile
and run times grow by at most 20 % against the old default, a plain min-max table.
For each real model of ``../shared/models`` (:mod:`benchmarks.accuracy_models`) both
tables are made from the same 8 calibration images, then, as the median CPU time of
``--repeat`` runs on one thread, the two tables taking turns:

* compile: the table's rewrites applied, the partition, every DLA subgraph
  compiled to a loadable and serialized (what ``opendla compile`` does);
* run: one test image through the DLA (the cmodel backend) with the CPU fallback,
  after preparation (what ``opendla run --device nvdla`` times per inference);
* prepare: building and preparing the executor (rewrites, partition, compilation,
  loading), once per ``opendla run``.

It prints each time for both tables and the ratio new / old.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import warnings
from pathlib import Path

from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accel.compiler import compile_subgraph  # noqa: E402
from accel.compiler.ops.conv import choose_block  # noqa: E402
from accel.compiler.tiling import plan_conv  # noqa: E402
from accel.config import get_preset  # noqa: E402
from benchmarks.accuracy_models import MODELS  # noqa: E402
from tengine_host.devices import get_device  # noqa: E402
from tengine_host.executor import Executor  # noqa: E402
from tengine_host.model import load_model  # noqa: E402
from tengine_host.partition import partition  # noqa: E402
from tengine_host.quant import calibrate  # noqa: E402
from tengine_host.quant.fidelity import calibrate_checked, weight_rewrites  # noqa: E402
from tengine_host.quant.rewrites import with_rewrites  # noqa: E402
from tengine_host.quant.zero_point import assign_zero_points  # noqa: E402


def compile_all(graph, table, preset: str) -> int:
    """Every DLA subgraph of ``graph`` with ``table``, serialized: the bytes written."""
    plan_conv.cache_clear()         # cold, as a user's first compile
    choose_block.cache_clear()
    graph = with_rewrites(graph, table)
    parts = partition(graph, [get_device("nvdla", preset=preset, keep_float=table.keep_float),
                              get_device("cpu")])
    return sum(len(compile_subgraph(sub, table, get_preset(preset)).to_bytes())
               for dev, sub in parts.parts if dev.name == "nvdla")


def seconds(fn) -> float:
    """CPU seconds of ``fn()`` (one thread: its work, not the time another process held
    this machine's cores), after a full garbage collection: a collection of the
    oldest generation walks every object of the process (both tables' executors) and
    costs ~0.1 s here; where the periodic ones fall is an accident of the steps before,
    and landing in one table's step more often than in the other's it moved a compile
    ratio by 0.25 (``timeit`` disables collection for the same reason)."""
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(graph, tables: dict, feeds, preset: str, repeat: int) -> dict[str, dict]:
    """Median seconds of each step for each table, the tables taking turns in every
    repetition so that a change in the machine's load falls on both alike."""
    def executor(table):
        return Executor(graph, [get_device("nvdla", preset=preset, keep_float=table.keep_float),
                                get_device("cpu")], table)

    def prepare(table):
        with executor(table):
            pass

    times = {name: {"compile": [], "prepare": [], "run": []} for name in tables}
    executors = {name: executor(table) for name, table in tables.items()}
    try:
        for ex in executors.values():
            ex.prerun()
            ex.run(feeds)           # warm: the first run fills the cmodel's caches
        for _ in range(repeat):
            for name, table in tables.items():
                times[name]["compile"].append(
                    seconds(lambda t=table: compile_all(graph, t, preset)))
                times[name]["prepare"].append(seconds(lambda t=table: prepare(t)))
                times[name]["run"].append(seconds(lambda n=name: executors[n].run(feeds)))
    finally:
        for ex in executors.values():
            ex.postrun()
    return {name: {k: statistics.median(v) for k, v in steps.items()}
            for name, steps in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--preset", default="nv_small")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    print(f"{'model':<28} {'default applied':<40} "
          + " ".join(f"{k + ' s old/new':>20} {'ratio':>6}" for k in ("compile", "prepare", "run")))
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.models:
            model = MODELS[name]
            graph = load_model(model.path, input_shapes=model.input_shapes)
            model.prepare(graph)
            calibration = model.feeds("calibration", 8)
            feeds = model.feeds("test", 1)[0]
            old = calibrate(graph, calibration, progress=False, algorithm="minmax")
            new, report = calibrate_checked(graph, calibration, preset=args.preset,
                                            progress=False,
                                            variants={"zero points": assign_zero_points},
                                            rewrites=weight_rewrites(args.preset, graph=graph))
            measured = measure(graph, {"old": old, "new": new}, feeds, args.preset,
                               args.repeat)
            before, after = measured["old"], measured["new"]
            print(f"{name:<28} {report.applied:<40} " + " ".join(
                f"{before[k]:>9.3f}/{after[k]:<10.3f} {after[k] / before[k]:>6.2f}"
                for k in ("compile", "prepare", "run")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
