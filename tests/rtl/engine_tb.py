"""cocotb testbench of the register-programmed convolution engine (``accel/rtl/conv_engine.py``).

Each operation is programmed as software would: ``S_POINTER`` selects the
register group (alternating, so both ping-pong groups serve), the CSC, CACC
and SDP registers are written field by field over the CSB port
(:mod:`accel.regs` packs the fields), the memories are loaded, and the five
units are enabled.  Every output is checked against plain numpy sums and the
cmodel's arithmetic (as in ``conv_tb``; the X1/X2 operands come from the
registers or, per kernel, from the operand memory as SDP_RDMA would deliver
them), then the done interrupt must rise with
CACC and SDP done bits of the operation's group in ``S_INTR_STATUS`` (CDMA's
are masked, as NVIDIA's traces do), and clear when software writes them back.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cmac_tb import pack
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time
from conv_tb import (
    collect,
    conv_label,
    expected,
    load_memories,
    post_config,
    random_conv,
    random_operands,
    reference,
    reset,
)

from accel.config import HwConfig
from accel.regs import field_set, lookup
from accel.rtl.conv_core import operand_write_layout
from accel.rtl.conv_engine import OP_UNITS

CLOCK_NS = 10
OPERATIONS = int(os.environ.get("OPENDLA_ENGINE_OPERATIONS", "12"))


async def csb_write(dut, symbol: str, value: int = 0, **fields: int) -> None:
    reg = lookup(symbol)
    for name, v in fields.items():
        value = field_set(value, reg, name, v)
    dut.req.value = 1 | (reg.address << 1) | (1 << 33) | ((value & 0xFFFFFFFF) << 34)
    await RisingEdge(dut.clk)
    dut.req.value = 0


async def csb_read(dut, symbol: str) -> int:
    dut.req.value = 1 | (lookup(symbol).address << 1)
    await RisingEdge(dut.clk)
    dut.req.value = 0
    await ReadOnly()
    assert dut.rvalid.value == 1 and dut.error.value == 0, symbol
    value = int(dut.rdata.value)
    await RisingEdge(dut.clk)
    return value


async def program(dut, group: int, conv: dict, post: dict) -> None:
    """The registers of one operation, in group ``group``, as a driver writes them."""
    for unit in OP_UNITS:
        await csb_write(dut, f"{unit}.S_POINTER", PRODUCER=group)
    w = csb_write
    await w(dut, "NVDLA_CSC.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=conv["w"] - 1,
            DATAIN_HEIGHT_EXT=conv["h"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=conv["c"] - 1)
    await w(dut, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=conv["s"] - 1,
            WEIGHT_HEIGHT_EXT=conv["r"] - 1)
    await w(dut, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=conv["c"] - 1,
            WEIGHT_KERNEL=conv["k"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=conv["out_w"] - 1,
            DATAOUT_HEIGHT=conv["out_h"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=conv["k"] - 1)
    await w(dut, "NVDLA_CSC.D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=conv["stride_x"] - 1,
            CONV_Y_STRIDE_EXT=conv["stride_y"] - 1)
    await w(dut, "NVDLA_CSC.D_DILATION_EXT", X_DILATION_EXT=conv["dilation_x"] - 1,
            Y_DILATION_EXT=conv["dilation_y"] - 1)
    await w(dut, "NVDLA_CSC.D_ZERO_PADDING", PAD_LEFT=conv["pad_left"],
            PAD_TOP=conv["pad_top"])
    await w(dut, "NVDLA_CSC.D_ZERO_PADDING_VALUE", PAD_VALUE=conv["pad_value"] & 0xFFFF)
    await w(dut, "NVDLA_CACC.D_CLIP_CFG", CLIP_TRUNCATE=post["truncate"])
    for stage, p in (("x1", "BS"), ("x2", "BN")):
        st = post[stage]
        await w(dut, f"NVDLA_SDP.D_DP_{p}_CFG", **{
            f"{p}_BYPASS": st["bypass"], f"{p}_ALU_BYPASS": st["alu_bypass"],
            f"{p}_ALU_ALGO": st["alu_algo"], f"{p}_MUL_BYPASS": st["mul_bypass"],
            f"{p}_MUL_PRELU": st["prelu"], f"{p}_RELU_BYPASS": st["relu_bypass"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_ALU_CFG", **{f"{p}_ALU_SHIFT_VALUE": st["alu_shift"],
                                                       f"{p}_ALU_SRC": st["alu_src"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_ALU_SRC_VALUE",
                **{f"{p}_ALU_OPERAND": st["alu_operand"] & 0xFFFF})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_MUL_CFG", **{f"{p}_MUL_SHIFT_VALUE": st["mul_shift"],
                                                       f"{p}_MUL_SRC": st["mul_src"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_MUL_SRC_VALUE",
                **{f"{p}_MUL_OPERAND": st["mul_operand"] & 0xFFFF})
    await w(dut, "NVDLA_SDP.D_CVT_OFFSET", CVT_OFFSET=post["cvt_offset"] & 0xFFFFFFFF)
    await w(dut, "NVDLA_SDP.D_CVT_SCALE", CVT_SCALE=post["cvt_scale"] & 0xFFFF)
    await w(dut, "NVDLA_SDP.D_CVT_SHIFT", CVT_SHIFT=post["cvt_shift"])


@cocotb.test()
async def register_programmed_convolutions(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    await reset(dut, "req")
    # NVIDIA's traces mask CDMA's data and weight done interrupts; so do we
    await csb_write(dut, "NVDLA_GLB.S_INTR_MASK", CDMA_DAT_DONE_MASK0=1, CDMA_DAT_DONE_MASK1=1,
                    CDMA_WT_DONE_MASK0=1, CDMA_WT_DONE_MASK1=1)

    checked = irqs = 0
    for op in range(OPERATIONS):
        group = op % 2
        conv = random_conv(rng, hw.atomic_c, hw.atomic_k)
        sums = reference(conv)
        kgs = -(-conv["k"] // hw.atomic_k)
        operands = random_operands(rng, kgs * hw.atomic_k)    # SDP_RDMA's per-kernel tables
        per_kernel = {n: v[:conv["k"]] for n, v in operands.items()}
        post = post_config(rng, sums, per_kernel)
        want = expected(conv, post, sums, per_kernel)
        await load_memories(dut, hw, conv)
        layout = operand_write_layout(hw, 64)
        for kg in range(kgs):
            lanes = slice(kg * hw.atomic_k, (kg + 1) * hw.atomic_k)
            dut.operand_write.value = pack(layout, {
                "addr": kg, "en": 1, "data": {n: v[lanes] for n, v in operands.items()}})
            await RisingEdge(dut.clk)
        dut.operand_write.value = 0
        await program(dut, group, conv, post)
        assert dut.irq.value == 0
        for unit in ("NVDLA_SDP", "NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CSC",
                     "NVDLA_CDMA"):
            await csb_write(dut, f"{unit}.D_OP_ENABLE", OP_EN=1)
        res = await collect(dut, hw, conv, want, rng, conv_label(op, conv))
        checked += res["checked"]
        for _ in range(3):
            await RisingEdge(dut.clk)
        assert dut.irq.value == 1, f"operation {op}: no interrupt"
        irqs += 1
        status = await csb_read(dut, "NVDLA_GLB.S_INTR_STATUS")
        reg = lookup("NVDLA_GLB.S_INTR_STATUS")
        want_bits = (reg.field(f"CACC_DONE_STATUS{group}").mask
                     | reg.field(f"SDP_DONE_STATUS{group}").mask)
        assert status == want_bits, f"operation {op}: status {status:#x}, want {want_bits:#x}"
        # the consumer moved on to the other group; the enables are clear
        pointer = await csb_read(dut, "NVDLA_CSC.S_POINTER")
        assert (pointer >> 16) & 1 == 1 - group, f"operation {op}: consumer {pointer:#x}"
        await csb_write(dut, "NVDLA_GLB.S_INTR_STATUS", status)
        await RisingEdge(dut.clk)
        assert dut.irq.value == 0, f"operation {op}: interrupt not cleared"
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"config": hw.name, "operations": OPERATIONS, "vectors": checked,
                       "interrupts": irqs, "sim_time_ns": get_sim_time("ns"),
                       "clock_ns": CLOCK_NS}, f)
