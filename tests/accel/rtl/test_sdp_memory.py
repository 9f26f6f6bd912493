"""SDP reading memory in RTL (:class:`accel.rtl.sdp_memory.SdpMemory`) against the cmodel.

Random SDP operations with ``FLYING_MODE`` off are programmed as register values: X1 and
X2 each off, or with an ALU (max, min, sum; shifted operand) and a multiplier (PReLU
or not; shift) whose operands come from the registers or from memory, per element or
per kernel, one or two components of one or two bytes, with strided cubes; ReLU; the
converter.  The cmodel runs them from its registers (:class:`accel.cmod.dla.Dla`); the
RTL unit gets its configuration from the same values through the engine's register
decode (:func:`accel.rtl.sdp_memory.config_from_registers`) and runs in Amaranth's
simulator with every AXI channel stalling at random.  The bytes it writes must be the
cmodel's.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel.cmod.dla import Dla
from accel.config import get_preset
from accel.rtl.conv_engine import sdp_fields
from accel.rtl.sdp_memory import SdpMemory, config_from_registers
from tests.accel.rtl.axi_model import serve_axi
from tests.accel.rtl.registers import RegisterTop, reg

HW = get_preset("nv_small")
ATOM = HW.atom_size
SRC, DST, X1_OPS, X2_OPS = 0x10000, 0x40000, 0x80000, 0xC0000
MEMORY = 0x100000




def _random_op(rng: random.Random) -> list[tuple[str, int]]:
    """Register writes of a random SDP operation from memory (groups 0)."""
    c, h, w = rng.randint(1, 3 * ATOM), rng.randint(1, 5), rng.randint(1, 19)
    line = w * ATOM + ATOM * rng.randint(0, 2)
    surf = h * line + ATOM * rng.randint(0, 2)
    dline = w * ATOM + ATOM * rng.randint(0, 1)
    dsurf = h * dline + ATOM * rng.randint(0, 1)
    sdp, rdma = "NVDLA_SDP", "NVDLA_SDP_RDMA"
    regs = [reg(f"{u}.D_DATA_CUBE_{d}", **{d: v - 1}) for u in (sdp, rdma)
            for d, v in (("WIDTH", w), ("HEIGHT", h), ("CHANNEL", c))]
    regs += [reg(f"{rdma}.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=SRC),
             reg(f"{rdma}.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line),
             reg(f"{rdma}.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
             reg(f"{rdma}.D_FEATURE_MODE_CFG", FLYING_MODE=0, IN_PRECISION=0,
                  PROC_PRECISION=0, OUT_PRECISION=0),
             reg(f"{rdma}.D_ERDMA_CFG", ERDMA_DISABLE=1),
             reg(f"{sdp}.D_FEATURE_MODE_CFG", FLYING_MODE=0),
             reg(f"{sdp}.D_DP_EW_CFG", EW_BYPASS=1),
             reg(f"{sdp}.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=DST),
             reg(f"{sdp}.D_DST_LINE_STRIDE", DST_LINE_STRIDE=dline),
             reg(f"{sdp}.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=dsurf),
             reg(f"{sdp}.D_CVT_OFFSET", CVT_OFFSET=rng.randint(-300, 300)),
             reg(f"{sdp}.D_CVT_SCALE", CVT_SCALE=rng.choice((1, rng.randint(-900, 900)))),
             reg(f"{sdp}.D_CVT_SHIFT", CVT_SHIFT=rng.randint(0, 12))]
    for p, dma, base in (("BS", "BRDMA", X1_OPS), ("BN", "NRDMA", X2_OPS)):
        on, alu_on, mul_on = rng.random() < 0.7, rng.random() < 0.7, rng.random() < 0.6
        alu_mem, mul_mem = rng.random() < 0.6, rng.random() < 0.6
        regs += [reg(f"{sdp}.D_DP_{p}_CFG", **{
                     f"{p}_BYPASS": not on, f"{p}_ALU_BYPASS": not alu_on,
                     f"{p}_ALU_ALGO": rng.randint(0, 2), f"{p}_MUL_BYPASS": not mul_on,
                     f"{p}_MUL_PRELU": rng.random() < 0.3,
                     f"{p}_RELU_BYPASS": rng.random() < 0.6}),
                 reg(f"{sdp}.D_DP_{p}_ALU_CFG", **{f"{p}_ALU_SRC": alu_mem,
                                                    f"{p}_ALU_SHIFT_VALUE": rng.randint(0, 9)}),
                 reg(f"{sdp}.D_DP_{p}_ALU_SRC_VALUE",
                      **{f"{p}_ALU_OPERAND": rng.randint(-2000, 2000)}),
                 reg(f"{sdp}.D_DP_{p}_MUL_CFG", **{f"{p}_MUL_SRC": mul_mem,
                                                    f"{p}_MUL_SHIFT_VALUE": rng.randint(0, 14)}),
                 reg(f"{sdp}.D_DP_{p}_MUL_SRC_VALUE",
                      **{f"{p}_MUL_OPERAND": rng.randint(-3000, 3000)})]
        # the DMA delivers what the active ALU and multiplier take from memory, or more
        use = {(True, False): 1, (False, True): 0, (True, True): 2}.get(
            (alu_on and alu_mem, mul_on and mul_mem), rng.randint(0, 2))
        if use != 2 and rng.random() < 0.3:
            use = 2
        per_element, wide = rng.random() < 0.6, rng.random() < 0.5
        esize = (2 if use == 2 else 1) * (2 if wide else 1)
        oline = w * ATOM * esize + ATOM * rng.randint(0, 1)
        regs += [reg(f"{rdma}.D_{dma}_CFG", **{f"{dma}_DISABLE": 0, f"{dma}_DATA_USE": use,
                                                f"{dma}_DATA_SIZE": wide,
                                                f"{dma}_DATA_MODE": per_element}),
                 reg(f"{rdma}.D_{p}_BASE_ADDR_LOW", **{f"{p}_BASE_ADDR_LOW": base}),
                 reg(f"{rdma}.D_{p}_LINE_STRIDE", **{f"{p}_LINE_STRIDE": oline}),
                 reg(f"{rdma}.D_{p}_SURFACE_STRIDE",
                      **{f"{p}_SURFACE_STRIDE": h * oline + ATOM * rng.randint(0, 1)})]
    return regs


@pytest.mark.parametrize("seed", range(30))
def test_random_operations_write_the_cmodels_bytes(seed: int) -> None:
    rng = random.Random(seed)
    regs = _random_op(rng)
    data = np.random.default_rng(seed).integers(0, 256, MEMORY, dtype=np.uint8)
    dla = Dla(HW)
    dla.dram.map(0, MEMORY)
    dla.dram.write(0, data)
    for symbol, value in regs:
        dla.write_reg(symbol, value)
    dla.write_reg("NVDLA_SDP_RDMA.D_OP_ENABLE", 1)
    dla.write_reg("NVDLA_SDP.D_OP_ENABLE", 1)
    assert dla.stats and dla.stats[-1].unit == "SDP", "the cmodel did not run the op"
    want = dla.dram.read(0, MEMORY)
    top = RegisterTop(SdpMemory(HW), dict(regs), lambda field: config_from_registers(
        field, HW, lambda post: sdp_fields(field, post)))
    memory = bytearray(data.tobytes())
    sim = Simulator(top)
    sim.add_clock(1e-8)
    cycles = []
    sim.add_testbench(serve_axi(top.dut, memory, rng, cycles))
    sim.run()
    got = np.frombuffer(bytes(memory), np.uint8)
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, (seed, f"{diff.size} bytes differ, first at {int(diff[0]):#x}: "
                                  f"RTL {got[diff[0]]}, cmodel {want[diff[0]]}")
    assert np.any(want != data), "the operation wrote nothing"
