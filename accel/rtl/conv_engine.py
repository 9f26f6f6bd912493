"""The convolution engine programmed register by register: CSB register file + conv core.

Software writes the registers of CDMA, CSC, CMAC_A/B, CACC and SDP over the CSB
port (:class:`~accel.rtl.csb_regs.CsbRegisterFile`, NVDLA's addresses and
ping-pong groups) and enables the six units.  When all six ``D_OP_ENABLE``
bits of the consumer group are set, the engine latches the operation from
the consumer group's registers - the geometry from CSC (``D_DATAIN_SIZE_EXT``,
``D_WEIGHT_SIZE_EXT``, ``D_DATAOUT_SIZE``, ``D_CONV_STRIDE_EXT``,
``D_DILATION_EXT``, ``D_ZERO_PADDING``, ``D_ZERO_PADDING_VALUE``), the
truncation from CACC (``D_CLIP_CFG``), X1/X2 and the converter from SDP -
derives the group counts and the stripe length (two short division loops),
runs the :class:`~accel.rtl.conv_core.ConvCore`, and when the last output has
left on ``out`` completes the six units at once: their enables clear, their
consumer pointers flip, GLB raises ``CDMA_DAT``/``CDMA_WT``/``CACC``/``SDP``
done for that group and ``irq`` goes high until software clears the status.

The feature, weight and per-kernel SDP operand memories are still written
through their ports (the CDMA and SDP_RDMA that fetch them over the memory
bus come next), and the output beats leave on ``out`` (the SDP write DMA
comes next).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.regs import UNITS
from accel.rtl.conv_core import (
    SIZE_BITS,
    ConvConfigLayout,
    ConvCore,
    operand_write_layout,
    write_layout,
)
from accel.rtl.csb_regs import CSB_REQUEST, CsbRegisterFile, d_registers, port_name
from accel.rtl.postproc import ResultLayout

#: the units an operation enables and completes together
OP_UNITS = ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC",
            "NVDLA_SDP")


class ConvEngine(wiring.Component):
    """See the module docstring."""

    def __init__(self, cfg: HwConfig, points: int = 16, feature_entries: int = 2048,
                 weight_entries: int = 2048) -> None:
        self.hw, self.points = cfg, points
        self.entries = (feature_entries, weight_entries)
        super().__init__({
            "req": In(CSB_REQUEST),
            "rdata": Out(32), "rvalid": Out(1), "error": Out(1), "irq": Out(1),
            "feature_write": In(write_layout(cfg, feature_entries)),
            "weight_write": In(write_layout(cfg, weight_entries)),
            "operand_write": In(operand_write_layout(cfg, 64)),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw = self.hw
        m.submodules.csb = csb = CsbRegisterFile()
        m.submodules.core = core = ConvCore(hw, self.points, *self.entries)
        m.d.comb += [csb.req.eq(self.req), self.rdata.eq(csb.rdata),
                     self.rvalid.eq(csb.rvalid), self.error.eq(csb.error),
                     self.irq.eq(csb.irq),
                     core.feature_write.eq(self.feature_write),
                     core.weight_write.eq(self.weight_write),
                     core.operand_write.eq(self.operand_write)]
        wiring.connect(m, core.out, wiring.flipped(self.out))

        def field(unit: str, reg: str, name: str):
            """A field of ``unit.reg`` in the consumer group, as the datapath sees it."""
            regs = d_registers(unit)
            index = next(i for i, r in enumerate(regs) if r.name == reg)
            f = UNITS[unit].registers[reg].field(name)
            return getattr(csb, f"{port_name(unit)}_regs")[index][f.lsb:f.msb + 1]

        # ---- the operation, latched at its start --------------------------------------
        op = Signal(ConvConfigLayout())
        m.d.comb += core.cfg.eq(op)
        csc = "NVDLA_CSC"
        c = field(csc, "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1
        k = field(csc, "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL") + 1
        ow = field(csc, "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
        oh = field(csc, "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
        shift_c, shift_k = hw.atomic_c.bit_length() - 1, hw.atomic_k.bit_length() - 1
        latch = [
            op.c.eq(c), op.k.eq(k),
            op.w.eq(field(csc, "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1),
            op.h.eq(field(csc, "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1),
            op.s.eq(field(csc, "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1),
            op.r.eq(field(csc, "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1),
            op.stride_x.eq(field(csc, "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1),
            op.stride_y.eq(field(csc, "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1),
            op.dilation_x.eq(field(csc, "D_DILATION_EXT", "X_DILATION_EXT") + 1),
            op.dilation_y.eq(field(csc, "D_DILATION_EXT", "Y_DILATION_EXT") + 1),
            op.pad_left.eq(field(csc, "D_ZERO_PADDING", "PAD_LEFT")),
            op.pad_top.eq(field(csc, "D_ZERO_PADDING", "PAD_TOP")),
            op.pad_value.eq(field(csc, "D_ZERO_PADDING_VALUE", "PAD_VALUE")),
            op.out_w.eq(ow), op.out_h.eq(oh),
            op.channel_groups.eq(((c - 1) >> shift_c) + 1),
            op.kernel_groups.eq(((k - 1) >> shift_k) + 1),
            op.post.truncate.eq(field("NVDLA_CACC", "D_CLIP_CFG", "CLIP_TRUNCATE")),
            op.post.cvt_offset.eq(field("NVDLA_SDP", "D_CVT_OFFSET", "CVT_OFFSET")),
            op.post.cvt_scale.eq(field("NVDLA_SDP", "D_CVT_SCALE", "CVT_SCALE")),
            op.post.cvt_shift.eq(field("NVDLA_SDP", "D_CVT_SHIFT", "CVT_SHIFT")),
        ]
        for stage, p in (("x1", "BS"), ("x2", "BN")):
            st = getattr(op.post, stage)
            sdp = "NVDLA_SDP"
            latch += [
                st.bypass.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_BYPASS")),
                st.alu_bypass.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_ALU_BYPASS")),
                st.alu_algo.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_ALU_ALGO")),
                st.mul_bypass.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_MUL_BYPASS")),
                st.prelu.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_MUL_PRELU")),
                st.relu_bypass.eq(field(sdp, f"D_DP_{p}_CFG", f"{p}_RELU_BYPASS")),
                st.alu_shift.eq(field(sdp, f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SHIFT_VALUE")),
                st.alu_operand.eq(field(sdp, f"D_DP_{p}_ALU_SRC_VALUE", f"{p}_ALU_OPERAND")),
                st.mul_shift.eq(field(sdp, f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SHIFT_VALUE")),
                st.mul_operand.eq(field(sdp, f"D_DP_{p}_MUL_SRC_VALUE", f"{p}_MUL_OPERAND")),
                st.alu_src.eq(field(sdp, f"D_DP_{p}_ALU_CFG", f"{p}_ALU_SRC")),
                st.mul_src.eq(field(sdp, f"D_DP_{p}_MUL_CFG", f"{p}_MUL_SRC")),
            ]

        # ---- the operation's life: start, divide, run, complete -------------------------
        enabled = Signal()
        m.d.comb += enabled.eq(Cat(*(getattr(csb, f"{port_name(u)}_op_en")
                                     for u in OP_UNITS)).all())
        total = Signal(2 * SIZE_BITS)
        remaining = Signal(2 * SIZE_BITS + 1)
        stripes = Signal(2 * SIZE_BITS)
        covered = Signal(2 * SIZE_BITS + 1)
        outputs = Signal(3 * SIZE_BITS)          # output beats still to leave
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(enabled):
                    m.d.sync += [*latch, total.eq(ow * oh), remaining.eq(ow * oh),
                                 stripes.eq(0)]
                    m.next = "STRIPES"
            with m.State("STRIPES"):            # stripes = ceil(total / points)
                with m.If(remaining != 0):
                    m.d.sync += [stripes.eq(stripes + 1),
                                 remaining.eq(remaining - self.points)]
                    with m.If(remaining <= self.points):
                        m.d.sync += remaining.eq(0)
                with m.Else():
                    m.d.sync += [covered.eq(0), op.stripe_points.eq(0)]
                    m.next = "LENGTH"
            with m.State("LENGTH"):             # stripe_points = ceil(total / stripes)
                with m.If(covered < total):
                    m.d.sync += [covered.eq(covered + stripes),
                                 op.stripe_points.eq(op.stripe_points + 1)]
                with m.Else():
                    m.d.sync += outputs.eq(op.kernel_groups * total)
                    m.next = "RUN"
            with m.State("RUN"):
                with m.If(self.out.valid & self.out.ready):
                    m.d.sync += outputs.eq(outputs - 1)
                    with m.If(outputs == 1):
                        m.next = "COMPLETE"
            with m.State("COMPLETE"):           # the six units finish together
                m.next = "IDLE"
        # outputs as plain functions of the state (no defaults inside the state machine:
        # Icarus never evaluates those before the state first changes)
        m.d.comb += core.start.eq(fsm.ongoing("LENGTH") & (covered >= total))
        m.d.comb += [getattr(csb, f"{port_name(unit)}_done").eq(fsm.ongoing("COMPLETE"))
                     for unit in OP_UNITS]
        return m
