"""Time the cmodel on NVDLA's trace tests.

Usage::

    python benchmarks/traces.py [TRACE_DIR ...] [--repeat N] [--peer]

Defaults to the nv_small, nv_large and nv_medium_512 trace directories in
``../shared/nvdla/traces``.  Every trace is played (parse, DMA, datapath, CRC);
per trace it prints the median wall time and, for convolutions, the model's
MAC rate, then the total time of the runnable traces per preset and overall
(skipped traces - missing input data, units a preset lacks - are listed but
not counted).  ``--peer`` also times each trace with operations disabled (a
``Dla`` that never runs ops), so the ratio shows how much of the time is the
datapath model rather than trace I/O.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

from accel.cmod import dla as dla_mod
from accel.config import get_preset
from accel.trace.runner import find_traces, run_trace

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "nvdla" / "traces"
_OP_TRIGGERS = ("_try_run", "_try_run_pdp", "_try_run_cdp")


def _median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _io_only(trace: Path, repeat: int) -> float:
    saved = {name: getattr(dla_mod.Dla, name) for name in _OP_TRIGGERS}
    try:
        for name in _OP_TRIGGERS:
            setattr(dla_mod.Dla, name, lambda self: None)
        return _median_time(lambda: run_trace(trace), repeat)[0]
    finally:
        for name, fn in saved.items():
            setattr(dla_mod.Dla, name, fn)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path,
                    default=[SHARED / p for p in ("nv_small", "nv_large", "nv_medium_512")])
    ap.add_argument("--repeat", type=int, default=1, help="runs per trace (median)")
    ap.add_argument("--peer", action="store_true", help="also time trace I/O without ops")
    args = ap.parse_args(argv)
    dirs = [p for p in args.paths if p.is_dir()]
    if not dirs:
        print(f"no trace directories among {', '.join(map(str, args.paths))}")
        return 2
    totals: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    print(f"{'trace':<46} {'preset':<14} {'result':<5} {'ms':>8} {'cycles':>9} {'MMAC/s':>8}"
          + (f" {'io-only ms':>10}" if args.peer else ""))
    for t in find_traces(dirs):
        sec, res = _median_time(lambda t=t: run_trace(t), args.repeat)
        counts[res.preset][res.status] += 1
        rate = ""
        macs = sum(op.details.get("mac_atoms", 0) for op in res.stats)
        if macs:
            rate = f"{macs * get_preset(res.preset).mac_count / sec / 1e6:8.1f}"
        if res.status != "skip":
            totals[res.preset].append(sec)
        line = (f"{t.name:<46} {res.preset:<14} {res.status:<5} {sec * 1e3:8.1f} "
                f"{res.cycles:>9} {rate:>8}")
        if args.peer:
            line += f" {_io_only(t, args.repeat) * 1e3:10.1f}"
        why = res.reason if res.status != "pass" else res.note
        print(line + (f"  ({why[:60]})" if why else ""), flush=True)
    grand = 0.0
    for preset, secs in totals.items():
        c = counts[preset]
        grand += sum(secs)
        print(f"{preset}: {len(secs)} runnable traces in {sum(secs):.2f} s "
              f"({c['pass']} pass, {c['fail']} fail, {c['skip']} skip)")
    print(f"total cmodel time over all runnable traces: {grand:.2f} s "
          f"(median of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
