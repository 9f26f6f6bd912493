"""NVIDIA's direct-convolution traces on the RTL engine (``accel/rtl/conv_engine.py``).

The trace (``OPENDLA_TRACE``: its directory) is played as the cmodel's trace
player plays it (:mod:`accel.cmod.trace`: the same parser, memory files and
golden CRCs), with the engine on the CSB: every ``reg_write`` goes to the
engine's CSB port, ``poll_reg_equal`` reads it, ``intr_notify`` waits for the
engine's interrupt pin and acknowledges the status bit, and ``check_crc``
compares the destination memory with the golden CRC.

The engine has no memory bus yet, so this testbench does the two DMA jobs
in Python, from the registers the trace wrote: at the operation's first
``D_OP_ENABLE`` it reads the feature cube and the weights from the trace's
memory image as CDMA would (NVDLA's feature layout and direct-convolution
weight order, :mod:`accel.layout`) into the engine's memories, and it writes
the engine's output beats into the image at SDP's destination as the SDP
write DMA would.  Registers of units the engine does not implement are an
error before the trace starts.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from types import SimpleNamespace

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time
from conv_tb import load_memories, reset
from engine_tb import csb_read, csb_write

from accel.cmod.dram import Dram
from accel.cmod.glb import status_bit
from accel.cmod.trace import TraceError, _find_cfg, _int, _Player, parse_cfg
from accel.config import HwConfig
from accel.layout import CubeLayout, dc_weight_order, unpack_feature
from accel.regs import field_get, lookup
from accel.rtl.csb_regs import CONV_UNITS

CLOCK_NS = 10
TRACE_ENTRIES = 16384          # memory depth of the "engine_traces" top (accel/rtl/generate.py)
#: cycles an interrupt or a poll may take before the trace is declared hung
BUDGET = int(os.environ.get("OPENDLA_TRACE_BUDGET", "2000000"))


class Registers:
    """What the trace wrote, by symbol, for the testbench's DMA work."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def write(self, symbol: str, value: int) -> None:
        self.values[lookup(symbol).symbol] = value

    def __call__(self, symbol: str, field: str | None = None) -> int:
        reg = lookup(symbol)
        value = self.values.get(reg.symbol, reg.reset)
        return field_get(value, reg, field) if field else value


def fetch(regs: Registers, dram: Dram, hw: HwConfig) -> dict:
    """CDMA's work: the input cube and the weights of the programmed convolution."""
    c = regs("NVDLA_CDMA.D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    h = regs("NVDLA_CDMA.D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    w = regs("NVDLA_CDMA.D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    base = regs("NVDLA_CDMA.D_DAIN_ADDR_HIGH_0") << 32 | regs("NVDLA_CDMA.D_DAIN_ADDR_LOW_0")
    layout = CubeLayout(c, h, w, hw.atom_size, regs("NVDLA_CDMA.D_LINE_STRIDE"),
                        regs("NVDLA_CDMA.D_SURF_STRIDE"))
    cube = unpack_feature(dram.read(base, layout.size), layout).astype(np.int8)
    k = regs("NVDLA_CDMA.D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
    r = regs("NVDLA_CSC.D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
    s = regs("NVDLA_CSC.D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1
    waddr = regs("NVDLA_CDMA.D_WEIGHT_ADDR_HIGH") << 32 | regs("NVDLA_CDMA.D_WEIGHT_ADDR_LOW")
    order = dc_weight_order(k, c, r, s, hw)
    raw = dram.read(waddr, order.size).view(np.int8)
    kcrs = np.empty(order.size, np.int8)
    kcrs[order] = raw
    return {"c": c, "h": h, "w": w, "k": k, "r": r, "s": s,
            "x": cube[None].astype(np.int64), "wt": kcrs.reshape(k, c, r, s).astype(np.int64)}


async def write_outputs(dut, regs: Registers, dram: Dram, hw: HwConfig, done: dict) -> None:
    """The SDP write DMA's work: every output beat into the memory image."""
    k = regs("NVDLA_CSC.D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL") + 1
    oh = regs("NVDLA_CSC.D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
    ow = regs("NVDLA_CSC.D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
    base = regs("NVDLA_SDP.D_DST_BASE_ADDR_HIGH") << 32 | regs("NVDLA_SDP.D_DST_BASE_ADDR_LOW")
    line, surf = regs("NVDLA_SDP.D_DST_LINE_STRIDE"), regs("NVDLA_SDP.D_DST_SURFACE_STRIDE")
    lanes, atom = hw.atomic_k, hw.atom_size
    total, beats = oh * ow, -(-k // lanes) * oh * ow
    dut.out__ready.value = 1
    got = 0
    while got < beats:
        await ReadOnly()
        if dut.out__valid.value == 1:
            raw = int(dut.out__payload.value).to_bytes(3 * lanes, "little")[:lanes]
            kg, point = divmod(got, total)
            oy, ox = divmod(point, ow)
            lane = 0
            while lane < lanes:                  # the beat's channels, atom by atom
                channel = kg * lanes + lane
                surface, within = divmod(channel, atom)
                n = min(lanes - lane, atom - within)
                dram.write(base + surface * surf + oy * line + ox * atom + within,
                           np.frombuffer(raw[lane:lane + n], np.uint8), "SDP_WDMA")
                lane += n
            got += 1
        await RisingEdge(dut.clk)
    done["beats"] = got


@cocotb.test()
async def play_trace(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    trace = Path(os.environ["OPENDLA_TRACE"])
    cfg_path = _find_cfg(trace)
    cmds = parse_cfg(cfg_path)
    for cmd in cmds:                       # unimplemented units: an error, before anything runs
        if cmd.name in ("reg_write", "reg_read", "poll_reg_equal"):
            reg = lookup(cmd.args[0])
            if reg.unit not in CONV_UNITS:
                raise TraceError(f"{cfg_path}:{cmd.line}: {reg.symbol} belongs to {reg.unit}, "
                                 f"which the RTL engine does not implement")
    dram = Dram()
    loader = _Player(cfg_path, SimpleNamespace(dram=dram))
    regs = Registers()
    await reset(dut, "req")

    notified, checks, writer, output = set(), 0, None, {}
    start = get_sim_time("ns")
    for cmd in cmds:
        where = f"{cfg_path.name}:{cmd.line}"
        if cmd.name in ("mem_init", "mem_load"):
            getattr(loader, f"do_{cmd.name}")(cmd)
        elif cmd.name == "reg_write":
            symbol, value = cmd.args[0], _int(cmd.args[1])
            if lookup(symbol).name == "D_OP_ENABLE" and writer is None:
                await load_memories(dut, hw, fetch(regs, dram, hw), TRACE_ENTRIES)
                writer = cocotb.start_soon(write_outputs(dut, regs, dram, hw, output))
            regs.write(symbol, value)
            await csb_write(dut, lookup(symbol).symbol, value)
        elif cmd.name in ("reg_read", "poll_reg_equal"):
            want = _int(cmd.args[1])
            for _ in range(BUDGET if cmd.name == "poll_reg_equal" else 1):
                value = await csb_read(dut, lookup(cmd.args[0]).symbol)
                if value == want:
                    break
            else:
                raise TraceError(f"{where}: {cmd.args[0]} reads {value:#x}, expected {want:#x}")
        elif cmd.name == "intr_notify":
            source, _, group = cmd.args[0].rpartition("_")
            bit = status_bit(source, int(group))
            for _ in range(BUDGET):
                if dut.irq.value == 1 and await csb_read(dut, "NVDLA_GLB.S_INTR_STATUS") & bit:
                    break
                await RisingEdge(dut.clk)
            else:
                raise TraceError(f"{where}: interrupt {cmd.args[0]} not raised within {BUDGET} "
                                 f"cycles")
            await csb_write(dut, "NVDLA_GLB.S_INTR_STATUS", bit)
            notified.add(cmd.args[1])
        elif cmd.name == "check_crc":
            sync, base, size, golden = cmd.args[0], _int(cmd.args[2]), _int(cmd.args[3]), \
                _int(cmd.args[4])
            assert sync in notified, f"{where}: check_crc before {sync} was notified"
            region = dram.read(base, size)
            dump = os.environ.get("OPENDLA_TRACE_DUMP")
            if dump:
                np.save(dump, region)
            crc = zlib.crc32(region.tobytes()) & 0xFFFFFFFF
            assert crc == golden, f"{where}: CRC {crc:#010x}, golden {golden:#010x}"
            checks += 1
        elif cmd.name not in ("check_nothing", "sync_notify", "sync_wait"):
            raise TraceError(f"{where}: trace command {cmd.name} is not supported on the RTL")
    assert checks > 0, "the trace checked nothing"
    cycles = int((get_sim_time("ns") - start) / CLOCK_NS)
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"trace": trace.name, "crc_checks": checks, "vectors": output["beats"],
                       "trace_cycles": cycles, "sim_time_ns": get_sim_time("ns"),
                       "clock_ns": CLOCK_NS}, f)
