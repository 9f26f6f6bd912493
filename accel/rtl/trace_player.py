"""NVIDIA's register traces on the RTL engine: the ``rtl`` backend of :mod:`accel.cmod.trace`.

Each trace runs in its own simulation of the ``engine_traces`` top (the conv
engine with memories deep enough for NVIDIA's direct-convolution traces),
driven by the cocotb testbench ``tests/rtl/trace_tb.py``: the trace's
register writes go to the engine's CSB port, its interrupt waits watch the
engine's interrupt pin, and its golden CRCs are checked on the memory image.
The engine's own DMAs fetch the cube, weights and operands and write the
output over its AXI4 port; the testbench only serves that port from the
trace's memory image (and the CSB).  With ``memory="ram"`` the engine runs on
the board's block RAM instead (the ``engine_ram`` top): the testbench loads
the trace's memory image into it and reads results back, and the engine's
bus traffic stays inside the simulator - the fast way to simulate it.  Only
what the engine implements can run: a trace that programs another unit fails
at load with the register named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from accel.config import HwConfig
from accel.regs import field_get, lookup
from accel.rtl.csb_regs import CONV_UNITS
from accel.rtl.sim import DEFAULT_TB_DIR, SimulationFailed, run_cocotb

#: the build directory of each trace's simulation (gitignored)
BUILD_ROOT = Path("build") / "rtl" / "traces"


#: the address registers the engine's DMAs use: upper halves, and what must be atom aligned
HIGH_ADDRESSES = {f"NVDLA_{r}" for r in (
    "CDMA.D_DAIN_ADDR_HIGH_0", "CDMA.D_WEIGHT_ADDR_HIGH", "SDP_RDMA.D_BS_BASE_ADDR_HIGH",
    "SDP_RDMA.D_BN_BASE_ADDR_HIGH", "SDP.D_DST_BASE_ADDR_HIGH")}
ALIGNED = {f"NVDLA_{r}" for r in (
    "CDMA.D_DAIN_ADDR_LOW_0", "CDMA.D_LINE_STRIDE", "CDMA.D_SURF_STRIDE",
    "CDMA.D_WEIGHT_ADDR_LOW", "SDP_RDMA.D_BS_BASE_ADDR_LOW", "SDP_RDMA.D_BN_BASE_ADDR_LOW",
    "SDP.D_DST_BASE_ADDR_LOW", "SDP.D_DST_LINE_STRIDE", "SDP.D_DST_SURFACE_STRIDE")}


def unsupported(symbol: str, value: int, hw: HwConfig) -> str | None:
    """Why the engine cannot run a trace writing ``value`` to ``symbol`` (None: it can)."""
    reg = lookup(symbol)
    if reg.unit not in CONV_UNITS:
        return f"{reg.symbol} belongs to {reg.unit}, which the RTL engine does not implement"
    name = reg.name
    if reg.unit == "NVDLA_SDP_RDMA":
        for dma in ("BRDMA", "NRDMA", "ERDMA"):
            if name == f"D_{dma}_CFG" and not field_get(value, reg, f"{dma}_DISABLE"):
                if dma == "ERDMA":
                    return f"{reg.symbol}={value:#x}: the engine has no element-wise (EW) stage"
                if field_get(value, reg, f"{dma}_DATA_MODE"):
                    return (f"{reg.symbol}={value:#x}: per-element operands are not implemented"
                            f" (per-kernel only)")
    if reg.unit == "NVDLA_SDP" and name == "D_FEATURE_MODE_CFG" and \
            not field_get(value, reg, "FLYING_MODE"):
        return f"{reg.symbol}={value:#x}: SDP reading its input from memory is not implemented"
    if reg.symbol in HIGH_ADDRESSES and value:
        return f"{reg.symbol}={value:#x}: addresses above 4 GiB are not implemented"
    if reg.symbol in ALIGNED and value % hw.atom_size:
        return f"{reg.symbol}={value:#x} is not a multiple of the {hw.atom_size}-byte atom"
    return None


#: where the engine's memory is: served over AXI by the testbench, or the block RAM
MEMORIES = ("axi", "ram")
_TOPS = {"axi": "engine_traces", "ram": "engine_ram"}


@dataclass
class RtlTraceRun:
    passed: bool
    reason: str = ""
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


def play(trace_dir: Path, cfg: HwConfig, simulator: str = "icarus",
         build_root: Path = BUILD_ROOT, memory: str = "axi") -> RtlTraceRun:
    """Run the trace in ``trace_dir`` on the RTL engine for ``cfg``, in ``simulator``, its
    memory one of :data:`MEMORIES`."""
    if memory not in MEMORIES:
        raise ValueError(f"engine memory {memory!r} not in {', '.join(MEMORIES)}")
    build = build_root / f"{trace_dir.name}-{memory}-{simulator}"
    try:
        summary = run_cocotb(cfg, build, top=_TOPS[memory], test_module="trace_tb",
                             tb_dir=DEFAULT_TB_DIR, simulator=simulator,
                             extra_env={"OPENDLA_TRACE": str(trace_dir.resolve()),
                                        "OPENDLA_RTL_MEMORY": memory})
    except SimulationFailed as exc:
        log = build / "trace_tb.log"
        return RtlTraceRun(False, _failure(log.read_text() if log.exists() else str(exc)))
    return RtlTraceRun(True, cycles=summary["trace_cycles"], crc_checks=summary["crc_checks"],
                       engine_cycles=summary["wait_cycles"],
                       engine_seconds=summary["wait_seconds"])
