"""NVIDIA's register traces on the RTL engine: the ``rtl`` backend of :mod:`accel.trace.runner`.

A :class:`TracePlayer` keeps one simulation per configuration (an
:class:`RtlSimulator`: the ``engine_traces`` top, the conv engine with
memories deep enough for NVIDIA's direct-convolution traces and the PDP), started at the
configuration's first trace and reset before each of the others, so a run of
many traces builds and starts the engine once.  The cocotb testbench
``tests/rtl/trace_tb.py`` drives it: the trace's register writes go to the
engine's CSB port, its interrupt waits watch the engine's interrupt pin, and
its golden CRCs are checked on the memory image.  The engine's own DMAs fetch
the cube, weights and operands and write the output over its AXI4 port; the
testbench only serves that port from the trace's memory image (and the CSB).
With ``memory="ram"`` the engine runs on the board's block RAM instead (the
``engine_ram`` top): the testbench loads the trace's memory image into it and
reads results back, and the engine's bus traffic stays inside the simulator -
the fast way to simulate it.  Only what the engine implements can run: a trace
that programs another unit, or a field at a value the engine does not
implement (:data:`FIXED_FIELDS`), fails at load, before any simulation starts,
with the register named.

The runtime's ``rtl`` backend (:mod:`accel.backends.rtl`) plays its recorded
convolutions through the same :class:`RtlSimulator`, without the resets.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.config import HwConfig
from accel.regs import field_get, lookup
from accel.rtl.cdma_image import image_format_refusal, image_line_refusal
from accel.rtl.cdp import CDP_UNITS
from accel.rtl.conv_engine import memory_refusal
from accel.rtl.csb_regs import CONV_UNITS
from accel.rtl.generate import TRACE_ENTRIES, sim_others
from accel.rtl.pdp import PDP_UNITS
from accel.rtl.sim import BUILD_DIR, CACHE_DIR, DEFAULT_TB_DIR, run_cocotb
from accel.runtime.errors import RuntimeFault
from accel.trace.script import TraceError, find_cfg, parse_cfg, parse_int

#: where each configuration's simulation writes its Verilog and logs
BUILD_ROOT = BUILD_DIR / "traces"




def engine_units(hw: HwConfig) -> tuple[str, ...]:
    """The units the simulated engine of ``hw`` implements: the convolution pipeline, and
    the PDP and the CDP where the simulation tops have them
    (:func:`accel.rtl.generate.sim_others`)."""
    return CONV_UNITS + ((PDP_UNITS + CDP_UNITS) if sim_others(hw) else ())

#: registers the engine does not hold as NVDLA does (the CDP's LUT read back, its
#: counters): a trace that reads them is refused rather than given other values
UNREADABLE = {f"NVDLA_CDP.{r}" for r in (
    "S_LUT_ACCESS_DATA", "D_OUT_SATURATION", "D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW",
    "D_PERF_LUT_HYBRID", "D_PERF_LUT_LE_HIT", "D_PERF_LUT_LO_HIT")}

#: the address registers the engine's DMAs use: upper halves (the operands' are checked
#: where a stage reads them, :func:`operand_addresses`), and what must be atom aligned
HIGH_ADDRESSES = {f"NVDLA_{r}" for r in (
    "CDMA.D_DAIN_ADDR_HIGH_0", "CDMA.D_WEIGHT_ADDR_HIGH", "SDP_RDMA.D_SRC_BASE_ADDR_HIGH",
    "SDP.D_DST_BASE_ADDR_HIGH", "PDP_RDMA.D_SRC_BASE_ADDR_HIGH", "PDP.D_DST_BASE_ADDR_HIGH",
    "CDP_RDMA.D_SRC_BASE_ADDR_HIGH", "CDP.D_DST_BASE_ADDR_HIGH")}
ALIGNED = {f"NVDLA_{r}" for r in (
    "CDMA.D_DAIN_ADDR_LOW_0", "CDMA.D_LINE_STRIDE", "CDMA.D_SURF_STRIDE",
    "CDMA.D_WEIGHT_ADDR_LOW", "SDP_RDMA.D_BS_BASE_ADDR_LOW", "SDP_RDMA.D_BN_BASE_ADDR_LOW",
    "SDP.D_DST_BASE_ADDR_LOW", "SDP.D_DST_LINE_STRIDE", "SDP.D_DST_SURFACE_STRIDE",
    "PDP_RDMA.D_SRC_BASE_ADDR_LOW", "PDP_RDMA.D_SRC_LINE_STRIDE", "PDP_RDMA.D_SRC_SURFACE_STRIDE",
    "PDP.D_DST_BASE_ADDR_LOW", "PDP.D_DST_LINE_STRIDE", "PDP.D_DST_SURFACE_STRIDE",
    "CDP_RDMA.D_SRC_BASE_ADDR_LOW", "CDP_RDMA.D_SRC_LINE_STRIDE",
    "CDP_RDMA.D_SRC_SURFACE_STRIDE", "CDP.D_DST_BASE_ADDR_LOW", "CDP.D_DST_LINE_STRIDE",
    "CDP.D_DST_SURFACE_STRIDE")}


#: how a refusal names SDP's element-wise (Y) stage and its DMA (:func:`absent_unit` finds
#: them in a refusal)
Y_STAGE = "SDP's element-wise (Y) stage"
NO_EW_DMA = "the engine has no element-wise (EW) stage"


#: fields the engine implements at one value only: register, field, that value, and what
#: the other values ask for
FIXED_FIELDS = {
    **{(f"NVDLA_{unit}.D_MISC_CFG", f): (0, what) for unit in ("CDMA", "CSC")
       for f, what in (("CONV_MODE", "Winograd convolution"),
                       ("IN_PRECISION", "int16 or fp16 input"),
                       ("PROC_PRECISION", "int16 or fp16 arithmetic"))},
    **{(f"NVDLA_{unit}.D_MISC_CFG", f): (0, what) for unit in ("CMAC_A", "CMAC_B", "CACC")
       for f, what in (("CONV_MODE", "Winograd convolution"),
                       ("PROC_PRECISION", "int16 or fp16 arithmetic"))},
    **{(f"NVDLA_{unit}.D_BATCH_NUMBER", "BATCHES"): (0, "batches of several cubes")
       for unit in ("CDMA", "CSC", "CACC")},
    ("NVDLA_CSC.D_POST_Y_EXTENSION", "Y_EXTENSION"): (0, "image post-Y-extension"),
    ("NVDLA_CDMA.D_WEIGHT_FORMAT", "WEIGHT_FORMAT"): (0, "compressed weights"),
    ("NVDLA_CSC.D_WEIGHT_FORMAT", "WEIGHT_FORMAT"): (0, "compressed weights"),
    ("NVDLA_SDP.D_FEATURE_MODE_CFG", "OUTPUT_DST"): (0, "SDP output to PDP"),
    ("NVDLA_SDP.D_FEATURE_MODE_CFG", "WINOGRAD"): (0, "Winograd output"),
    ("NVDLA_SDP.D_FEATURE_MODE_CFG", "BATCH_NUMBER"): (0, "batches of several cubes"),
    ("NVDLA_SDP.D_DATA_FORMAT", "PROC_PRECISION"): (0, "int16 or fp16 arithmetic"),
    ("NVDLA_SDP.D_DATA_FORMAT", "OUT_PRECISION"): (0, "int16 or fp16 output"),
    ("NVDLA_SDP.D_DP_EW_CFG", "EW_BYPASS"): (1, Y_STAGE),
    ("NVDLA_PDP.D_OPERATION_MODE_CFG", "FLYING_MODE"): (1, "PDP fed by SDP on the fly"),
    ("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG", "IN_PRECISION"): (0, "int16 or fp16 input"),
    ("NVDLA_PDP.D_DATA_FORMAT", "INPUT_DATA"): (0, "int16 or fp16 pooling"),
    ("NVDLA_PDP_RDMA.D_DATA_FORMAT", "INPUT_DATA"): (0, "int16 or fp16 pooling"),
    ("NVDLA_CDP.D_DATA_FORMAT", "INPUT_DATA_TYPE"): (0, "int16 or fp16 normalization"),
    ("NVDLA_CDP_RDMA.D_DATA_FORMAT", "INPUT_DATA"): (0, "int16 or fp16 normalization"),
}


def unsupported(symbol: str, value: int, hw: HwConfig) -> str | None:
    """Why the engine cannot run a trace writing ``value`` to ``symbol`` (None: it can).
    CDMA and CSC's data and weight reuse flags are accepted: the engine fetches the cube
    and the weights for every operation, which gives what reusing them would."""
    reg = lookup(symbol)
    if reg.unit not in engine_units(hw):
        return (f"{reg.symbol} belongs to {reg.unit}, which the RTL engine does not implement"
                + (f" for {hw.name} (nv_small's shape only)"
                   if reg.unit in PDP_UNITS + CDP_UNITS else ""))
    name = reg.name
    for field in reg.fields:
        fixed = FIXED_FIELDS.get((f"{reg.unit}.{name}", field.name))
        if fixed is not None and field_get(value, reg, field.name) != fixed[0]:
            return (f"{reg.symbol}={value:#x}: {field.name}="
                    f"{field_get(value, reg, field.name)} asks for {fixed[1]}, which the "
                    f"engine does not implement ({field.name}={fixed[0]} only)")
    if (reg.unit, name) == ("NVDLA_CDMA", "D_DATAIN_FORMAT") and \
            field_get(value, reg, "DATAIN_FORMAT"):
        why = image_format_refusal(hw, field_get(value, reg, "PIXEL_FORMAT"))
        if not why and field_get(value, reg, "PIXEL_MAPPING"):
            why = "PIXEL_MAPPING=1: the engine reads pitch-linear images only"
        if why:
            return f"{reg.symbol}={value:#x}: {why}"
    if reg.unit == "NVDLA_SDP_RDMA" and name == "D_ERDMA_CFG" and \
            not field_get(value, reg, "ERDMA_DISABLE"):
        return f"{reg.symbol}={value:#x}: {NO_EW_DMA}"
    if f"{reg.unit}.{name}" in HIGH_ADDRESSES and value:
        return f"{reg.symbol}={value:#x}: addresses above 4 GiB are not implemented"
    if f"{reg.unit}.{name}" in ALIGNED and value % hw.atom_size:
        return f"{reg.symbol}={value:#x} is not a multiple of the {hw.atom_size}-byte atom"
    return None


def refusal(cfg_path: Path, cmds: list, hw: HwConfig) -> str | None:
    """Why the engine cannot play a trace (None: it can), given its ``.cfg`` file and the
    commands parsed from it: the first register access :func:`unsupported` refuses, or
    the first convolution larger than the engine's memories (:func:`too_large`) or
    whose SDP takes per-element operands (:func:`per_element`), with the file and
    line."""
    written: dict[str, int] = {}        # CSC, SDP_RDMA and SDP registers as last written
    for cmd in cmds:
        if cmd.name in ("reg_write", "reg_read", "poll_reg_equal"):
            value = parse_int(cmd.args[1]) if cmd.name == "reg_write" else 0
            why = unsupported(cmd.args[0], value, hw)
            if not why and cmd.name != "reg_write" and \
                    f"{lookup(cmd.args[0]).unit}.{lookup(cmd.args[0]).name}" in UNREADABLE:
                why = (f"{lookup(cmd.args[0]).symbol}: reading it is not implemented (the "
                       f"engine does not hold the CDP's table reads or counters)")
            if not why and cmd.name == "reg_write":
                reg = lookup(cmd.args[0])
                if reg.unit in ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_SDP_RDMA", "NVDLA_SDP"):
                    written[reg.symbol] = value
                if (reg.unit, reg.name) == ("NVDLA_CSC", "D_OP_ENABLE") and value & 1:
                    csc, cdma = ({lookup(s).name: v for s, v in written.items()
                                  if lookup(s).unit == unit}
                                 for unit in ("NVDLA_CSC", "NVDLA_CDMA"))
                    why = too_large(csc, hw) or image_line_refusal(cdma) \
                        or per_element(written, hw)
                if (reg.unit, reg.name) == ("NVDLA_SDP", "D_OP_ENABLE") and value & 1:
                    why = operand_addresses(written)
            if why:
                return f"{cfg_path}:{cmd.line}: {why}"
    return None


def absent_unit(why: str, hw: HwConfig) -> bool:
    """Whether refusal ``why`` is for a unit ``hw`` itself does not have: SDP's Y stage on a
    configuration without it (nv_small's ``SDP_EW`` is disabled; NVIDIA's nv_small EW
    traces need it).  Such a trace is skipped, not failed."""
    return not hw.sdp_ew and (Y_STAGE in why or NO_EW_DMA in why)


def operand_addresses(written: dict[str, int]) -> str | None:
    """Why an SDP operation cannot run with the registers ``written`` (symbol -> value): a
    stage reads operands from memory above 4 GiB (the engine drives the low 32 bits)."""
    def get(symbol: str, name: str) -> int:
        reg = lookup(symbol)
        return field_get(written.get(reg.symbol, reg.reset), reg, name)

    for p in ("BS", "BN"):
        sdp = f"NVDLA_SDP.D_DP_{p}"
        reads = not get(f"{sdp}_CFG", f"{p}_BYPASS") and (
            (not get(f"{sdp}_CFG", f"{p}_ALU_BYPASS") and get(f"{sdp}_ALU_CFG", f"{p}_ALU_SRC"))
            or (not get(f"{sdp}_CFG", f"{p}_MUL_BYPASS")
                and get(f"{sdp}_MUL_CFG", f"{p}_MUL_SRC")))
        high = lookup(f"NVDLA_SDP_RDMA.D_{p}_BASE_ADDR_HIGH")
        value = written.get(high.symbol, high.reset)
        if reads and value:
            return f"{high.symbol}={value:#x}: addresses above 4 GiB are not implemented"
    return None


def per_element(written: dict[str, int], hw: HwConfig) -> str | None:
    """Why a convolution cannot run with the SDP_RDMA registers ``written`` (symbol ->
    value): its SDP's operands per element, on a configuration whose simulated engine
    does not read them (:func:`accel.rtl.generate.sim_others`)."""
    if "elements" in sim_others(hw):
        return None
    for dma in ("BRDMA", "NRDMA"):
        reg = lookup(f"NVDLA_SDP_RDMA.D_{dma}_CFG")
        value = written.get(reg.symbol, reg.reset)
        if not field_get(value, reg, f"{dma}_DISABLE") and field_get(value, reg,
                                                                     f"{dma}_DATA_MODE"):
            return (f"{reg.symbol}={value:#x}: a convolution with per-element SDP operands "
                    f"is implemented for nv_small's shape only (8-byte atoms, 8-kernel "
                    f"groups), not {hw.name}")
    return None


def too_large(csc: dict[str, int], hw: HwConfig, entries: int = TRACE_ENTRIES) -> str | None:
    """Why the operation the CSC registers ``csc`` (name -> value) describe does not fit the
    engine's memories (None: it fits; :func:`accel.rtl.conv_engine.memory_refusal`)."""
    def size(reg: str, name: str) -> int:
        return field_get(csc.get(reg, 0), lookup(f"NVDLA_CSC.{reg}"), name) + 1

    c, k = size("D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT"), size("D_WEIGHT_SIZE_EXT_1",
                                                                    "WEIGHT_KERNEL")
    h, w = (size("D_DATAIN_SIZE_EXT_0", f"DATAIN_{d}_EXT") for d in ("HEIGHT", "WIDTH"))
    r, s = (size("D_WEIGHT_SIZE_EXT_0", f"WEIGHT_{d}_EXT") for d in ("HEIGHT", "WIDTH"))
    if field_get(csc.get("D_DATAIN_FORMAT", 0), lookup("NVDLA_CSC.D_DATAIN_FORMAT"),
                 "DATAIN_FORMAT"):
        # image input: the engine holds each output column's window of the rows, S * C
        # channels (the weights' channels) by H by the output width (accel.rtl.cdma_image)
        c, w, s = (size("D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT"),
                   size("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH"), 1)
    return memory_refusal(hw, c, h, w, k, r, s, entries)


#: where the engine's memory is: served over AXI by the testbench, or the block RAM
MEMORIES = ("axi", "ram")
_TOPS = {"axi": "engine_traces", "ram": "engine_ram"}

#: the engine's clock period in the simulation (ns), made inside it when the memory is
#: ``ram`` (the testbench checks it is its own).  With ``axi`` the testbench drives the
#: clock: cocotbext-axi's bus model reads the handshakes at each rising edge, and on
#: Verilator the edge of a clock made inside reaches it after the design has taken it.
CLOCK_NS = 10


class RtlError(RuntimeFault):
    """The RTL simulation failed to run an operation (it stopped, or refused the trace)."""


class RtlSimulator:
    """One simulation of the engine that plays traces on request.

    The simulation runs in a thread (cocotb's runner starts the simulator and
    blocks until it exits); requests and replies are JSON lines on two named
    pipes (see ``serve`` in ``tests/rtl/trace_tb.py``).  Building starts at
    construction; the first :meth:`play` waits for it.  ``memory`` is one of
    :data:`MEMORIES`.
    """

    def __init__(self, cfg: HwConfig, simulator: str = "icarus",
                 build_dir: Path | None = None, memory: str = "axi") -> None:
        if memory not in MEMORIES:
            raise ValueError(f"engine memory {memory!r} not in {', '.join(MEMORIES)}")
        self.cfg, self.simulator, self.memory = cfg, simulator, memory
        self.work = Path(tempfile.mkdtemp(prefix="opendla-rtl-"))
        self.requests, self.replies = self.work / "requests", self.work / "replies"
        os.mkfifo(self.requests)
        os.mkfifo(self.replies)
        self.build_dir = Path(build_dir) if build_dir else self.work / "build"
        self.error: BaseException | None = None
        self.summary: dict | None = None
        self._out: Any = None
        self._in: int | None = None
        self._pending = b""
        self.thread = threading.Thread(target=self._simulate, name="rtl-sim", daemon=True)
        self.thread.start()

    def _simulate(self) -> None:
        try:
            self.summary = run_cocotb(
                self.cfg, self.build_dir, top=_TOPS[self.memory], test_module="trace_tb",
                tb_dir=DEFAULT_TB_DIR, simulator=self.simulator,
                clock_ns=CLOCK_NS if self.memory == "ram" else None,
                extra_env={"OPENDLA_TRACE_REQUESTS": str(self.requests),
                           "OPENDLA_TRACE_REPLIES": str(self.replies),
                           "OPENDLA_RTL_MEMORY": self.memory})
        except BaseException as exc:        # reported to the waiting caller
            self.error = exc

    def _alive(self) -> None:
        if not self.thread.is_alive():
            raise RtlError(f"the {self.simulator} simulation of the RTL engine stopped: "
                           f"{self.error or 'it exited'}")

    def _connect(self) -> None:
        while True:                 # the testbench opens its end once the simulator runs
            try:
                fd = os.open(self.requests, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            self._alive()
            time.sleep(0.05)
        os.set_blocking(fd, True)
        self._out = os.fdopen(fd, "w")
        self._in = os.open(self.replies, os.O_RDONLY | os.O_NONBLOCK)

    def _reply(self) -> dict:
        while b"\n" not in self._pending:
            ready, _, _ = select.select([self._in], [], [], 0.5)
            chunk = os.read(self._in, 1 << 16) if ready else b""
            if chunk:
                self._pending += chunk
                continue
            self._alive()           # a timeout, or no writer yet
            if ready:
                time.sleep(0.02)
        line, _, self._pending = self._pending.partition(b"\n")
        return json.loads(line)

    def request(self, trace_dir: Path, dumps: Sequence[tuple[int, int, Path]] = (),
                reset: bool = False) -> dict:
        """Play the trace in ``trace_dir`` (after resetting the engine with ``reset``); write
        each ``(addr, size, file)`` region of the memory image afterwards to ``file``.
        Returns the reply: ``ok`` and ``cycles``, ``seconds``, ``trace_cycles``,
        ``crc_checks``, or ``reason``.  Raises :class:`RtlError` if the simulation
        stopped."""
        if self._out is None:
            self._connect()
        self._out.write(json.dumps({"trace": str(trace_dir), "reset": reset,
                                    "dumps": [[a, s, str(f)] for a, s, f in dumps]}) + "\n")
        self._out.flush()
        return self._reply()

    def play(self, trace_dir: Path, dumps: list[tuple[int, int, Path]]) -> dict:
        """:meth:`request` without a reset; a failed trace raises :class:`RtlError`."""
        reply = self.request(trace_dir, dumps)
        if not reply.get("ok"):
            raise RtlError(f"the RTL engine failed {trace_dir.name}: {reply.get('reason')}")
        return reply

    def close(self) -> None:
        """End the simulation (it writes its summary) and remove the pipes."""
        if self._out is not None:
            with contextlib.suppress(OSError):
                self._out.write(json.dumps({"quit": True}) + "\n")
                self._out.close()
            self._out = None
        if self._in is not None:
            os.close(self._in)
            self._in = None
        self.thread.join(timeout=60)
        shutil.rmtree(self.work, ignore_errors=True)


@dataclass
class RtlTraceRun:
    passed: bool
    reason: str = ""
    #: not run: the trace uses a unit the configuration does not have (``reason`` says which)
    skipped: bool = False
    cycles: int = 0
    crc_checks: int = 0
    #: simulated cycles and wall seconds while the engine ran (the trace's interrupt waits)
    engine_cycles: int = 0
    engine_seconds: float = 0.0


def _failure(text: str) -> str:
    """The assertion or trace error a failed testbench logged, on one line."""
    for pattern in (r"(?:AssertionError|TraceError): (.*)", r"Error: (.*)"):
        found = re.findall(pattern, text)
        if found:
            return found[-1].strip()
    return text.strip().splitlines()[-1] if text.strip() else "simulation failed"


class TracePlayer:
    """Plays traces on the RTL engine in ``simulator`` with its memory one of
    :data:`MEMORIES`: one simulation per configuration, started at its first trace and
    reset before each trace (registers, group pointers, interrupt status; the memories
    are loaded anew).  A simulation that stops fails its trace and is started again for
    the next one.  ``announce`` is told, in a sentence, when a simulation starts (the
    first trace of a configuration waits for it, and for the engine's compilation the
    first time).  Close it (or use it as a context manager) to end the simulations."""

    def __init__(self, simulator: str = "icarus", memory: str = "axi",
                 build_root: Path = BUILD_ROOT,
                 announce: Callable[[str], None] | None = None) -> None:
        if memory not in MEMORIES:
            raise ValueError(f"engine memory {memory!r} not in {', '.join(MEMORIES)}")
        self.simulator, self.memory, self.build_root = simulator, memory, Path(build_root)
        self.announce = announce
        self.sims: dict[HwConfig, RtlSimulator] = {}

    def play(self, trace_dir: Path, cfg: HwConfig) -> RtlTraceRun:
        """Run the trace in ``trace_dir`` on the engine for ``cfg`` and check its CRCs."""
        try:
            cfg_path = find_cfg(trace_dir)
            why = refusal(cfg_path, parse_cfg(cfg_path), cfg)
        except TraceError as exc:
            return RtlTraceRun(False, str(exc))
        if why:
            return RtlTraceRun(False, why, skipped=absent_unit(why, cfg))
        sim = self.sims.get(cfg)
        if sim is None:
            if self.announce is not None:
                self.announce(f"starting the {self.simulator} simulation of the {cfg.name} "
                              f"engine ({self.memory} memory; an engine not compiled before "
                              f"is compiled first, into {CACHE_DIR})")
            build = self.build_root / f"{cfg.name}-{self.memory}-{self.simulator}"
            sim = self.sims[cfg] = RtlSimulator(cfg, self.simulator, build, self.memory)
        try:
            reply = sim.request(Path(trace_dir).resolve(), reset=True)
        except RtlError as exc:
            sim.close()
            del self.sims[cfg]
            return RtlTraceRun(False, _failure(str(sim.error or exc)))
        if not reply.get("ok"):
            return RtlTraceRun(False, reply.get("reason", "failed"))
        if not reply["crc_checks"]:
            return RtlTraceRun(False, f"{trace_dir}: the trace checked nothing")
        return RtlTraceRun(True, cycles=reply["trace_cycles"], crc_checks=reply["crc_checks"],
                           engine_cycles=reply["cycles"], engine_seconds=reply["seconds"])

    def close(self) -> None:
        for sim in self.sims.values():
            sim.close()
        self.sims.clear()

    def __enter__(self) -> TracePlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def play(trace_dir: Path, cfg: HwConfig, simulator: str = "icarus",
         build_root: Path = BUILD_ROOT, memory: str = "axi") -> RtlTraceRun:
    """Run the trace in ``trace_dir`` on the RTL engine for ``cfg``, in ``simulator``, its
    memory one of :data:`MEMORIES` (a :class:`TracePlayer` of its own)."""
    with TracePlayer(simulator, memory, build_root) as player:
        return player.play(trace_dir, cfg)
