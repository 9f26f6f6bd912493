"""Build a bitstream of the CMAC self-test or the conv engine and report utilization and Fmax.

Build only: amaranth-boards' platform writes the yosys script, the LPF and a
shell script; the YoWASP tools (set through :func:`accel.rtl.toolchain.yowasp_env`)
run synthesis, place-and-route and packing.  Five deliberate choices:

* LUT mapping by yosys's classic ``abc -lut 4:7`` between the two halves of
  ``synth_ecp5`` (``-run :map_luts``, then ``-run map_cells:``) instead of its
  ``abc9``: on the conv engine, YoWASP yosys 0.70's ``abc9`` ran for over an
  hour without finishing, where ``abc`` maps it in under two minutes (and
  ``abc9`` without ``-dff`` fails an internal assertion, ``ABC_OPS_REINTEGRATE``).
* registers whose signal is marked ``keep`` keep their cells (:data:`KEEP_REGISTERS`):
  copies made for placement survive yosys's merging of identical cells; memories named
  for it read undefined data on a same-cycle write (:data:`COLLISIONS_UNDEFINED`), which
  spares the flip-flops yosys adds to promise the old word.
* ``nextpnr --timing-allow-fail``: a design that misses the target still gets
  a bitstream and a report whose ``fmax_mhz`` says by how much.
* ``nextpnr --router router2``: on the conv engine the default router ran 27
  minutes without converging (tens of thousands of arcs left, congested);
  router2 routes it in about four.
* ``nextpnr --placer static`` (the electrostatic placer) instead of the default
  HeAP: HeAP packed the 8x8 engine into about two fifths of the die, where
  router2 stalled near 13,000 overused wires; the same netlist placed by the
  static placer started routing with 34,000 instead of 44,000 and routed at
  iteration 60 (67.1 MHz).

A placement for which nextpnr finds no route at all for some arc is placed again with
the next seed, up to :data:`ROUTE_RETRIES` times; the report gives the seed that routed.
(On 2026-11-28 four of ten placements left the reset synchronizer's arc into its global
buffer without a route; the reset now goes through the GSR network instead, see
:func:`fpga.top.pll_clock`, and the retry stays as a guard.)  Each try runs the whole
flow again, synthesis included (a minute or two), since the seed is part of the build
script amaranth writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from accel.config import HwConfig
from accel.rtl.memories import NO_COLLISION
from accel.rtl.toolchain import yowasp_env
from fpga.boards import get_board
from fpga.report import (
    BuildReport,
    parse_nextpnr_critical_path,
    parse_nextpnr_fmax,
    parse_nextpnr_utilisation,
    parse_yosys_stat,
)
from fpga.top import CmacSelfTest

#: Name of the generated top (file names in the build directory derive from it).
TOP_NAME = "top"

#: nextpnr's JSON report (utilisation, Fmax and critical paths) in the build directory
TIMING_REPORT = "nextpnr-report.json"

#: nextpnr's error when an arc has no route with the placement it made
ROUTE_FAILURE = "ERROR: Failed to route arc"
#: further seeds tried, one after the other, after such a failure
ROUTE_RETRIES = 2

#: The flow's stages, each with the file whose appearance ends it (amaranth's build script
#: writes the yosys netlist, then nextpnr's placed design, then ecppack's bitstream).
STAGES = (("synthesis (yosys)", f"{TOP_NAME}.json"),
          ("place and route (nextpnr)", f"{TOP_NAME}.config"),
          ("bitstream (ecppack)", f"{TOP_NAME}.bit"))


class _StageWatcher(threading.Thread):
    """Calls ``report(stage)`` as each stage of :data:`STAGES` starts, watching the
    build directory for the file that ends the one before."""

    def __init__(self, out: Path, report: Callable[[str], None], poll_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.out, self.report, self.poll_s = out, report, poll_s
        self.done = threading.Event()

    def run(self) -> None:
        for stage, product in STAGES:
            self.report(stage)
            while not (self.out / product).exists():
                if self.done.wait(self.poll_s):
                    return


#: yosys commands before synthesis: a register whose output signal is marked ``keep``
#: (``Signal(attrs={"keep": 1})``) gets the attribute on its cell too, so that yosys does not
#: merge it with identical ones: the CMAC copies each lane per cell, for placement beside
#: that cell's multipliers (the attribute on the signal alone keeps only the wire's name)
KEEP_REGISTERS = "\n".join(["proc", "setattr -set keep 1 a:keep %ci1 c:* %i"])

#: yosys command after reading the design: the read ports of memories whose name ends in
#: :data:`accel.rtl.memories.NO_COLLISION` return undefined data when the word they read is
#: written in the same cycle (``COLLISION_X_MASK``), instead of the old word that yosys
#: otherwise gives with a delayed write and a bypass (see :mod:`accel.rtl.memories`; on the
#: board RAM's 64 block RAMs, 1,240 flip-flops and 490 LUTs).
COLLISIONS_UNDEFINED = (f"setparam -set COLLISION_X_MASK 1 r:MEMID=\\*{NO_COLLISION} "
                        "t:$memrd_v2 %i")

#: yosys commands right after reading the design
AFTER_READ = "\n".join([KEEP_REGISTERS, COLLISIONS_UNDEFINED])

#: yosys commands after ``synth_ecp5 -run :map_luts``: LUTs by classic abc, then the rest
#: of synth_ecp5 (see the module docstring)
MAP_LUTS = "\n".join(["techmap -map +/lattice/latches_map.v", "abc -lut 4:7 -dress", "clean",
                       f"synth_ecp5 -top {TOP_NAME} -run map_cells:"])

#: the designs the flow builds: the MAC-array self-test, the conv engine with its block RAM
#: and UART host bridge (:mod:`fpga.engine_top`), or that engine with 4 KiB of RAM and
#: 256-entry feature/weight memories (``engine-small``: the same logic, a quick build; what
#: runs on it is limited by its memories), or the engine with the PDP, SDP reading memory
#: and CDP beside the convolution and its per-element operands (``engine-full``: the
#: simulation tops' units; not yet timed for 100 MHz)
DESIGNS = ("cmac-selftest", "engine", "engine-small", "engine-full")
SMALL_RAM_BYTES, SMALL_ENTRIES = 1 << 12, 256


def _design(name: str, cfg: HwConfig, target_hz: float, leds: int):
    if name == "cmac-selftest":
        return CmacSelfTest(cfg, target_hz=target_hz, leds=leds)
    from fpga.engine_top import EngineTop
    if name == "engine":
        return EngineTop(cfg, target_hz=target_hz)
    if name == "engine-small":
        return EngineTop(cfg, target_hz=target_hz, ram_bytes=SMALL_RAM_BYTES,
                         engine_entries=SMALL_ENTRIES)
    if name == "engine-full":
        from accel.rtl.generate import sim_others
        return EngineTop(cfg, target_hz=target_hz, others=sim_others(cfg))
    raise ValueError(f"design {name!r} not in {', '.join(DESIGNS)}")


def build(board: str, cfg: HwConfig, out_dir: str | Path, *, target_mhz: float = 100.0,
          seed: int = 1, leds: int = 8, design: str = "cmac-selftest",
          timing_driven: bool = True, place: bool = True,
          progress: Callable[[str], None] | None = None) -> BuildReport:
    """Synthesize, place, route and pack ``design`` (:data:`DESIGNS`) for ``board``.

    Parameters
    ----------
    board : str
        A key of :data:`fpga.boards.BOARDS` (e.g. ``"ulx3s-85f"``).
    cfg : HwConfig
        Configuration of the MAC array (``atomic_c`` x ``atomic_k``).
    out_dir : path
        Build directory (created); gets the tool logs, ``top.bit``,
        ``report.json`` and ``report.txt``.
    target_mhz : float
        Frequency of the PLL clock the array runs in, and nextpnr's constraint.
    seed : int
        nextpnr placement seed (Fmax varies a few percent between seeds); the next
        seeds if this one's placement leaves an arc without any route (see the module
        docstring).
    leds : int
        Board LEDs the self-test's checksum drives.
    design : str
        What to build, one of :data:`DESIGNS`.
    timing_driven : bool
        Placement and routing driven by the clock target (the default).  Without,
        nextpnr places for wire length only: about a third faster on the conv
        engine, and a lower Fmax; for checking that a design builds and what it
        uses.
    place : bool
        Place, route and pack after synthesis (the default).  Without, the build
        stops after yosys: the report has its cell counts (LUT4, FF, DSP, BRAM,
        carry) and no Fmax or bitstream; on the conv engine a fifth of the time.
    progress : callable, optional
        Called with each stage's name as it starts (elaboration, then
        :data:`STAGES`).

    Returns
    -------
    BuildReport
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for try_seed in range(seed, seed + ROUTE_RETRIES + 1):
        try:
            _run_flow(board, out, design, cfg, target_mhz, leds, try_seed, timing_driven,
                      place, progress)
            break
        except subprocess.CalledProcessError:
            log = out / f"{TOP_NAME}.tim"
            failure = next((line for line in log.read_text().splitlines()
                            if line.startswith(ROUTE_FAILURE)), None) if log.exists() else None
            if failure is None or try_seed == seed + ROUTE_RETRIES:
                raise
            if progress is not None:
                progress(f"nextpnr, seed {try_seed}: {failure.removeprefix('ERROR: ')}; "
                         f"placing again with seed {try_seed + 1}")
    elapsed = time.perf_counter() - start
    report = read_report(out, board=board, cfg=cfg, target_mhz=target_mhz, build_s=elapsed,
                         seed=try_seed, timing_driven=timing_driven, placed=place)
    report.write(out)
    return report


def _run_flow(board: str, out: Path, design: str, cfg: HwConfig, target_mhz: float,
              leds: int, seed: int, timing_driven: bool, place: bool,
              progress: Callable[[str], None] | None) -> None:
    """Elaborate ``design`` and run the tools once (a failing tool raises
    :class:`subprocess.CalledProcessError`), on a platform of its own (an amaranth
    platform prepares one design only)."""
    platform = get_board(board)
    for _, product in STAGES:        # a rebuild must not see the last run's products
        (out / product).unlink(missing_ok=True)
    if progress is not None:
        progress("elaboration (amaranth)")
    top = _design(design, cfg, target_mhz * 1e6, leds)
    watcher = _StageWatcher(out, progress) if progress is not None else None
    with yowasp_env():
        plan = platform.prepare(top, name=TOP_NAME, script_after_read=AFTER_READ,
                                synth_opts="-run :map_luts",
                                script_after_synth=MAP_LUTS,
                                nextpnr_opts=f"--timing-allow-fail --placer static "
                                             f"--router router2 --seed {seed} "
                                             f"{'' if timing_driven else '--no-tmdriv '}"
                                             f"--report {TIMING_REPORT}")
        try:
            if watcher is not None:
                watcher.start()
            if place:
                plan.execute_local(str(out))
            else:                   # the script's first step alone
                plan.extract(str(out))
                subprocess.run([os.environ["YOSYS"], "-q", "-l", f"{TOP_NAME}.rpt",
                                f"{TOP_NAME}.ys"], cwd=out, check=True)
        finally:
            if watcher is not None:
                watcher.done.set()
                watcher.join()


def read_report(out_dir: str | Path, *, board: str, cfg: HwConfig, target_mhz: float,
                build_s: float, seed: int = 1, timing_driven: bool = True,
                placed: bool = True) -> BuildReport:
    """Assemble a :class:`BuildReport` from the logs of a finished build (of synthesis
    alone when not ``placed``)."""
    out = Path(out_dir)
    cells = parse_yosys_stat((out / f"{TOP_NAME}.rpt").read_text())
    if not placed:
        return BuildReport(
            board=board, config=cfg.name, atomic_c=cfg.atomic_c, atomic_k=cfg.atomic_k,
            target_mhz=target_mhz, fmax_mhz=None, lut4=cells.get("LUT4", 0),
            ff=cells.get("TRELLIS_FF", 0), dsp=cells.get("MULT18X18D", 0),
            bram=cells.get("DP16KD", 0), carry=cells.get("CCU2C", 0), bitstream=None,
            build_s=round(build_s, 1), seed=seed, timing_driven=timing_driven, placed=False)
    bitstream = out / f"{TOP_NAME}.bit"
    if not bitstream.exists():
        raise FileNotFoundError(f"build finished without a bitstream at {bitstream}")
    pnr_log = (out / f"{TOP_NAME}.tim").read_text()
    clocks = parse_nextpnr_fmax(pnr_log)
    if not clocks:
        raise ValueError(f"no 'Max frequency' line in {out / (TOP_NAME + '.tim')}")
    # The array's clock is the one constrained at the target; the slowest
    # clock is the honest answer if there were several.
    fmax = min(f for f, _ in clocks.values())
    timing = out / TIMING_REPORT
    critical = parse_nextpnr_critical_path(json.loads(timing.read_text())) \
        if timing.exists() else {}
    return BuildReport(
        board=board, config=cfg.name, atomic_c=cfg.atomic_c, atomic_k=cfg.atomic_k,
        target_mhz=target_mhz, fmax_mhz=fmax,
        lut4=cells.get("LUT4", 0), ff=cells.get("TRELLIS_FF", 0),
        dsp=cells.get("MULT18X18D", 0), bram=cells.get("DP16KD", 0),
        carry=cells.get("CCU2C", 0), bitstream=str(bitstream), build_s=round(build_s, 1),
        clocks=clocks, utilisation=parse_nextpnr_utilisation(pnr_log), critical_path=critical,
        seed=seed, timing_driven=timing_driven,
    )
