"""Simulated cycles per second of the RTL conv engine, per simulator and memory.

Usage::

    python benchmarks/rtl_sim.py [TRACE ...] [--simulator icarus verilator]
                                 [--memory axi ram]

Each NVIDIA direct-convolution trace (default: ``dc_6x8x192_3x3x192x32_int8_0``,
a 3x3 convolution of 192 channels, weights streamed during the run) is
played on the engine (:func:`accel.trace.rtl_player.play`, golden CRC
checked) in every simulator with every memory:

* ``axi``: the testbench serves the engine's AXI4 port (cocotbext-axi's
  slave over the trace's memory image): Python runs for every bus beat;
* ``ram``: the engine on the board's block RAM (the ``engine_ram`` top), loaded
  before the engine runs: its bus traffic stays inside the simulator, and so does
  its clock (:func:`accel.rtl.generate.clocked_top`).

The rate printed is of the engine's run alone - from the op enable to the
interrupt, while the testbench only waits for the interrupt pin (and serves
the bus, with ``axi``) - next to the whole simulation's (register writes,
memory loads and the CRC read-back included).  Issue 8's aim: >= 50,000
cycles/s on Verilator; issue 47's: >= 250,000 with ``ram``.  Verilator compiles
each design in about a minute and a half, once (the compiled simulation is kept
in ``build/rtl/cache``).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from accel.config import get_preset
from accel.rtl.sim import SIMULATORS
from accel.trace.rtl_player import MEMORIES, play

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "nvdla" / "traces" / "nv_small"
DEFAULT = ("dc_6x8x192_3x3x192x32_int8_0",)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="*", default=list(DEFAULT),
                   help=f"nv_small trace names or directories (default {' '.join(DEFAULT)})")
    p.add_argument("--simulator", nargs="+", choices=SIMULATORS, default=list(SIMULATORS))
    p.add_argument("--memory", nargs="+", choices=MEMORIES, default=list(MEMORIES))
    args = p.parse_args(argv)
    cfg = get_preset("nv_small")
    print(f"{'trace':36s} {'simulator':9s} {'memory':6s} {'engine cycles':>13s} "
          f"{'engine cyc/s':>12s} {'all cycles':>10s} {'result':>6s}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.traces:
            trace = Path(name) if Path(name).is_dir() else TRACES / name
            if not trace.is_dir():
                p.error(f"trace {name!r}: no directory {trace}")
            for simulator in args.simulator:
                for memory in args.memory:
                    run = play(trace, cfg, simulator=simulator, build_root=Path(tmp),
                               memory=memory)
                    rate = run.engine_cycles / run.engine_seconds if run.engine_seconds else 0
                    failed += not run.passed
                    print(f"{trace.name[:36]:36s} {simulator:9s} {memory:6s} "
                          f"{run.engine_cycles:13,d} {rate:12,.0f} {run.cycles:10,d} "
                          f"{'pass' if run.passed else 'FAIL':>6s} {run.reason}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
