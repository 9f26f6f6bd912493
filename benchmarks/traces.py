"""Time the cmodel on NVDLA's trace tests.

Usage::

    python benchmarks/traces.py [TRACE_DIR ...] [--repeat N]

Defaults to the nv_small, nv_large and nv_medium_512 trace directories in
``../shared/nvdla/traces``.  Prints per-trace median wall time and, for
convolutions, the model's MAC rate; the peer is the same trace's parse + DMA
work without execution (a ``Dla`` that never runs ops), so the ratio shows
how much of the time is the datapath model rather than trace I/O.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from accel.cmod import dla as dla_mod
from accel.cmod.trace import find_traces, run_trace

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "nvdla" / "traces"


def _median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path,
                    default=[SHARED / p for p in ("nv_small", "nv_large", "nv_medium_512")])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    traces = [t for t in find_traces([p for p in args.paths if p.is_dir()])
              if t.name.startswith(("dc_", "sdp_"))]
    total = 0.0
    print(f"{'trace':<46} {'preset':<14} {'result':<5} {'ms':>8} {'io-only ms':>10} {'MMAC/s':>8}")
    for t in traces:
        sec, res = _median_time(lambda t=t: run_trace(t), args.repeat)
        real = dla_mod.Dla._try_run
        dla_mod.Dla._try_run = lambda self: None  # peer: same trace without executing ops
        try:
            io_sec, _ = _median_time(lambda t=t: run_trace(t), args.repeat)
        finally:
            dla_mod.Dla._try_run = real
        macs = sum(s["mac_atoms"] for s in res.stats if s["unit"] == "CONV")
        rate = ""
        if macs:
            from accel.config import get_preset
            cfg = get_preset(res.preset)
            rate = f"{macs * cfg.mac_count / sec / 1e6:8.1f}"
        total += sec
        print(f"{t.name:<46} {res.preset:<14} {res.status:<5} {sec * 1e3:8.1f} "
              f"{io_sec * 1e3:10.1f} {rate:>8}")
    print(f"total {total:.2f} s for {len(traces)} traces (median of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
