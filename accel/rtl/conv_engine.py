"""The convolution engine programmed register by register, with its DMAs on AXI4.

Software writes the registers of CDMA, CSC, CMAC_A/B, CACC, SDP_RDMA and SDP
over the CSB port (:class:`~accel.rtl.csb_regs.CsbRegisterFile`, NVDLA's
addresses and ping-pong groups) and enables the units.  When the six
``D_OP_ENABLE`` bits of CDMA, CSC, CMAC_A/B, CACC and SDP are set in their
consumer groups - and SDP_RDMA's too when X1 or X2 read operands from memory
(an active ALU or multiplier with source MEM) - the engine latches the operation from
the consumer groups' registers: the geometry from CSC (``D_DATAIN_SIZE_EXT``,
``D_WEIGHT_SIZE_EXT``, ``D_DATAOUT_SIZE``, ``D_CONV_STRIDE_EXT``,
``D_DILATION_EXT``, ``D_ZERO_PADDING``, ``D_ZERO_PADDING_VALUE``), the
addresses, strides and input converter from CDMA (``D_DAIN_ADDR``, ``D_LINE_STRIDE``,
``D_SURF_STRIDE``, ``D_WEIGHT_ADDR``, ``D_WEIGHT_BYTES``, ``D_CVT_*``), SDP_RDMA
(``D_BS/BN_BASE_ADDR``, ``D_BRDMA/NRDMA_CFG``) and SDP (``D_DST_*``), the
truncation from CACC (``D_CLIP_CFG``), X1/X2 and the converter from SDP.  It
starts the fetch over AXI (:class:`~accel.rtl.dma.ConvFetch`) while it derives
the output surface, the stripe length and the output beats (short loops of
additions: no multiplier or divider between registers), starts the
:class:`~accel.rtl.conv_core.ConvCore` once the per-kernel operands are in (it
runs as the input and the weights stream in), and writes every output beat to
memory (:class:`~accel.rtl.dma.OutputWriter`).
When the last write is answered it completes the units at once: their
enables clear, their consumer pointers flip, GLB raises
``CDMA_DAT``/``CDMA_WT``/``CACC``/``SDP`` done for that group and ``irq``
goes high until software clears the status.  ``bus_error`` (sticky) reports
an AXI response other than OKAY.

``others`` adds memory-to-memory units beside the convolution (:data:`OTHER_UNITS`):
``"pdp"`` (:class:`~accel.rtl.pdp.Pdp`, with PDP_RDMA and PDP in the register file) and
``"sdp_memory"`` (:class:`~accel.rtl.sdp_memory.SdpMemory`: SDP reading its input from
memory, ``FLYING_MODE`` off, with per-element operands; its beats go through the
convolution's SDP datapath and write DMA, as NVDLA's one SDP takes either input) and ``"cdp"``
(:class:`~accel.rtl.cdp.Cdp`, with CDP_RDMA and CDP, its lookup table filled by
``S_LUT_ACCESS_*`` writes), one at a time on the AXI port (see
:meth:`ConvEngine._others`).  ``"elements"`` in ``others`` gives the convolution's SDP
per-element X1/X2 operands (:class:`~accel.rtl.element_operands.ElementOperands`, its
reads beside the fetch's); without it the engine takes per-kernel operands only.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.regs import UNITS
from accel.rtl.axi import axi4_signature, connect_channels
from accel.rtl.cdma_image import image_shape_ok
from accel.rtl.cdp import CDP_UNITS, Cdp, CdpConfigLayout
from accel.rtl.cdp import config_from_registers as cdp_config
from accel.rtl.conv_core import ConvCore
from accel.rtl.conv_layout import SIZE_BITS, ConvConfigLayout
from accel.rtl.csb_regs import (
    CONV_UNITS,
    CSB_REQUEST,
    CsbRegisterFile,
    d_registers,
    port_name,
    s_registers,
)
from accel.rtl.dma import ADDR_BITS, ConvFetch, OutputWriter
from accel.rtl.element_operands import AxiReadMux, ElementOperands
from accel.rtl.pdp import PDP_UNITS, Pdp, PdpConfigLayout
from accel.rtl.pdp import config_from_registers as pdp_config
from accel.rtl.postproc import memory_ready_copies
from accel.rtl.sdp_memory import (
    SdpMemory,
    SdpMemoryConfigLayout,
    operand_fields,
    operand_needed,
    writer_config,
)
from accel.rtl.sdp_memory import config_from_registers as sdp_memory_config
from accel.rtl.timing import kept

#: the units an operation enables and completes together
OP_UNITS = ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC",
            "NVDLA_SDP")
#: the operand DMAs of SDP_RDMA the engine implements (per-kernel mode), by SDP stage
OPERAND_DMAS = {"x1": ("BRDMA", "BS"), "x2": ("NRDMA", "BN")}
#: the memory-to-memory units an engine may have beside the convolution: the units each
#: completes (all must be enabled), and the field that says it reads memory (unit,
#: register, field, value; None: it always does)
OTHER_UNITS = {
    "pdp": (PDP_UNITS, ("NVDLA_PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE", 1)),
    "sdp_memory": (("NVDLA_SDP_RDMA", "NVDLA_SDP"),
                   ("NVDLA_SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE", 0)),
    "cdp": (CDP_UNITS, None),
}
#: the name in ``others`` that gives the convolution's SDP per-element operands
#: (:class:`~accel.rtl.element_operands.ElementOperands`; a kernel group of one atom only)
ELEMENTS = "elements"
#: SDP operand entries (kernel groups) the engine holds
OPERAND_ENTRIES = 64
#: fields latched at an operation's start per copy of the latch enable
LATCH_FIELDS = 6
#: bits of a unit beside the convolution's registers latched per copy of its enable
LATCH_BITS = 48


def memory_refusal(hw: HwConfig, c: int, h: int, w: int, k: int, r: int, s: int,
              entries: int) -> str | None:
    """Why a convolution of a ``c x h x w`` input by ``k`` kernels of ``r x s`` does not fit
    an engine with ``entries`` feature and weight memory entries (None: it fits): its
    addresses would wrap."""
    cgs, kgs = -(-c // hw.atomic_c), -(-k // hw.atomic_k)
    needs = {"feature": cgs * h * w, "weight": kgs * cgs * r * s * hw.atomic_k}
    for memory, n in needs.items():
        if n > entries:
            return (f"the operation ({c}x{h}x{w} input, {k} kernels of {r}x{s}) needs {n} "
                    f"{memory} memory entries; the engine has {entries}")
    if kgs > OPERAND_ENTRIES:
        return (f"the operation's {k} kernels make {kgs} kernel groups; the engine holds "
                f"SDP operands for {OPERAND_ENTRIES}")
    return None


class ConvEngine(wiring.Component):
    """See the module docstring.  ``csb_per_register``: the board's register file
    (:class:`~accel.rtl.csb_regs.CsbRegisterFile`'s ``per_register``); simulation tops may
    take the decoded one, the same cycles faster to simulate."""

    def __init__(self, cfg: HwConfig, points: int = 16, feature_entries: int = 2048,
                 weight_entries: int = 2048, others: tuple[str, ...] = (),
                 csb_per_register: bool = True) -> None:
        unknown = [name for name in others if name not in OTHER_UNITS and name != ELEMENTS]
        if unknown:
            raise ValueError(f"units {', '.join(unknown)} not in "
                             f"{', '.join((*OTHER_UNITS, ELEMENTS))}")
        if ELEMENTS in others and cfg.atomic_k != cfg.atom_size:
            raise ValueError(f"{ELEMENTS!r}: per-element operands need a kernel group of one "
                             f"memory atom (atomic_k {cfg.atomic_k}, atom {cfg.atom_size})")
        self.hw, self.points = cfg, points
        self.others = tuple(name for name in others if name in OTHER_UNITS)
        self.elements = ELEMENTS in others
        self.entries = (feature_entries, weight_entries)
        self.csb_per_register = csb_per_register
        super().__init__({
            "req": In(CSB_REQUEST),
            "rdata": Out(32), "rvalid": Out(1), "error": Out(1), "irq": Out(1),
            "axi": Out(axi4_signature(ADDR_BITS, 8 * cfg.atom_size)),
            "bus_error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        hw = self.hw
        m.submodules.csb = csb = CsbRegisterFile(
            CONV_UNITS + (PDP_UNITS if "pdp" in self.others else ())
            + (CDP_UNITS if "cdp" in self.others else ()), per_register=self.csb_per_register)
        # SDP from memory takes its beats through the convolution's SDP and write DMA
        shared_sdp = "sdp_memory" in self.others
        m.submodules.core = core = ConvCore(hw, self.points, *self.entries, OPERAND_ENTRIES,
                                            memory_input=shared_sdp)
        m.submodules.fetch = fetch = ConvFetch(hw, *self.entries, OPERAND_ENTRIES)
        m.submodules.wdma = wdma = OutputWriter(hw)
        makers = {"pdp": Pdp, "sdp_memory": lambda hw: SdpMemory(hw, shared=True), "cdp": Cdp}
        others = {name: makers[name](hw) for name in self.others}
        for name, unit in others.items():
            m.submodules[name] = unit
        # per-element SDP operands, read beside the fetch
        elements = self.elements
        reads = fetch.axi
        if elements:
            m.submodules.elements = elems = ElementOperands(hw)
            m.submodules.read_mux = read_mux = AxiReadMux(ADDR_BITS, 8 * hw.atom_size)
            wiring.connect(m, fetch.axi, read_mux.a)
            wiring.connect(m, elems.axi_read, read_mux.b)
            wiring.connect(m, elems.out, core.elements)
            reads = read_mux.bus
        m.d.comb += [csb.req.eq(self.req), self.rdata.eq(csb.rdata),
                     self.rvalid.eq(csb.rvalid), self.error.eq(csb.error),
                     self.irq.eq(csb.irq),
                     core.feature_write.eq(fetch.feature_write),
                     core.weight_write.eq(fetch.weight_write),
                     core.operand_write.eq(fetch.operand_write),
                     core.weight_level.eq(fetch.weight_level),
                     core.feature_level.eq(fetch.feature_level),
                     self.bus_error.eq(Cat(fetch.bus_error, wdma.bus_error,
                                           *(u.bus_error for u in others.values()),
                                           *([elems.bus_error] if elements else [])).any())]
        # the memory-to-memory units beside the convolution, each with the AXI port while it
        # runs: three registers of one value per unit, each placed beside its loads:
        # ``buses`` for the read channels' choice, ``writes`` for the write channels' and
        # ``owners`` for the decisions (the convolution's start, the next unit's);
        # ``other_*``: one of them has it
        buses = {name: kept(f"{name}_bus") for name in self.others}
        writes = {name: kept(f"{name}_write_bus") for name in self.others}
        owners = {name: kept(f"{name}_owner") for name in self.others}
        # (and each unit's ``go``, the cycle before its flags are set: see ``_others``)
        gos = {name: Signal(name=f"{name}_go") for name in self.others}
        other_owner = Signal()
        m.d.comb += other_owner.eq(Cat(*owners.values(), *gos.values()).any()
                                   if owners else 0)
        # the convolution's own read and write channels' flags, registers of the same
        # value as none of the others' (its write channels serve SDP from memory too,
        # where it shares the datapath): not the others' flags gathered into its channels'
        # choice, in front of its readers' counts (11.5 ns at 74 MHz)
        conv_reads, conv_writes = kept("conv_bus", init=1), kept("conv_write_bus", init=1)
        with m.If(conv_reads):
            connect_channels(m, self.axi, reads)
        with m.If(conv_writes):
            connect_channels(m, self.axi, wdma.axi)
        for name, unit in others.items():
            with m.If(buses[name]):
                connect_channels(m, self.axi, unit.axi_read)
            if name != "sdp_memory":
                with m.If(writes[name]):
                    connect_channels(m, self.axi, unit.axi_write)
        wiring.connect(m, core.out, wdma.inp)

        def field(unit: str, reg: str, name: str | None = None):
            """A field (or the whole register) of ``unit.reg`` in the consumer group, as the
            datapath sees it (a lookup table's ``S_`` registers as written)."""
            view = "regs" if reg.startswith("D_") else "singles"
            regs = d_registers(unit) if view == "regs" else s_registers(unit)
            index = next(i for i, r in enumerate(regs) if r.name == reg)
            value = getattr(csb, f"{port_name(unit)}_{view}")[index]
            if name is None:
                return value
            f = UNITS[unit].registers[reg].field(name)
            return value[f.lsb:f.msb + 1]

        # ---- the operation, latched at its start --------------------------------------
        op = Signal(ConvConfigLayout())
        m.d.comb += core.cfg.eq(op)
        csc, sdp = "NVDLA_CSC", "NVDLA_SDP"
        # the registers hold sizes minus one; the group counts from those directly (from the
        # sizes, two adders more before the latch)
        cdma = "NVDLA_CDMA"
        # image input (:mod:`accel.rtl.cdma_image`): the fetch writes each output column's
        # window of S pixels as S * C channels, and the convolution runs that cube with
        # R x 1 kernels of the weights' channels at x stride 1, without left padding
        # (a register a cycle behind the consumer group's field: the latch is at least two
        # cycles after the group's last write or its pointer's flip; a copy for the core's
        # geometry and one for the fetch's)
        image, image_fetch = kept("image_op"), kept("image_fetch")
        if image_shape_ok(hw):
            m.d.sync += [flag.eq(field(cdma, "D_DATAIN_FORMAT", "DATAIN_FORMAT"))
                         for flag in (image, image_fetch)]
        c_m1 = Mux(image, field(csc, "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT"),
                   field(csc, "D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT"))
        k_m1 = field(csc, "D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL")
        c, k = c_m1 + 1, k_m1 + 1
        ow = field(csc, "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
        oh = field(csc, "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
        w = Mux(image, ow, field(csc, "D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1)
        kernel_w = Mux(image, 1, field(csc, "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1)
        stride_x = field(csc, "D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1
        shift_c, shift_k = hw.atomic_c.bit_length() - 1, hw.atomic_k.bit_length() - 1
        latch = [
            op.c.eq(c), op.k.eq(k), op.w.eq(w),
            op.h.eq(field(csc, "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1),
            op.s.eq(kernel_w),
            op.r.eq(field(csc, "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1),
            op.stride_x.eq(Mux(image, 1, stride_x)),
            op.stride_y.eq(field(csc, "D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1),
            op.dilation_x.eq(Mux(image, 1, field(csc, "D_DILATION_EXT", "X_DILATION_EXT") + 1)),
            op.dilation_y.eq(field(csc, "D_DILATION_EXT", "Y_DILATION_EXT") + 1),
            op.pad_left.eq(Mux(image, 0, field(csc, "D_ZERO_PADDING", "PAD_LEFT"))),
            op.pad_top.eq(field(csc, "D_ZERO_PADDING", "PAD_TOP")),
            op.pad_value.eq(field(csc, "D_ZERO_PADDING_VALUE", "PAD_VALUE")),
            op.out_w.eq(ow), op.out_h.eq(oh),
            op.channel_groups.eq((c_m1 >> shift_c) + 1),
            op.kernel_groups.eq((k_m1 >> shift_k) + 1),
            op.post.truncate.eq(field("NVDLA_CACC", "D_CLIP_CFG", "CLIP_TRUNCATE")),
            *sdp_fields(field, op.post),
        ]
        # the DMAs' registers
        fc = fetch.cfg
        rdma = "NVDLA_SDP_RDMA"
        # a stage takes operands from memory when it and an ALU or multiplier with source MEM
        # are on (decided by SDP's registers, as the hardware does); then SDP_RDMA takes part
        needs = {}
        for stage in OPERAND_DMAS:
            needs[stage] = Signal(name=f"{stage}_from_memory")
            m.d.comb += needs[stage].eq(operand_needed(field, stage))
        operands = Signal()
        m.d.comb += operands.eq(needs["x1"] | needs["x2"])
        latch_fetch = [
            fc.feature_addr.eq(field(cdma, "D_DAIN_ADDR_LOW_0")),
            fc.line_stride.eq(field(cdma, "D_LINE_STRIDE")),
            fc.surf_stride.eq(field(cdma, "D_SURF_STRIDE")),
            fc.c.eq(c), fc.k.eq(k),
            fc.h.eq(field(csc, "D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1),
            fc.w.eq(w),
            fc.r.eq(field(csc, "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1),
            fc.s.eq(kernel_w),
            fc.channel_groups.eq((c_m1 >> shift_c) + 1),
            fc.kernel_groups.eq((k_m1 >> shift_k) + 1),
            fc.weight_addr.eq(field(cdma, "D_WEIGHT_ADDR_LOW")),
            fc.weight_bytes.eq(field(cdma, "D_WEIGHT_BYTES")),
            fc.cvt.enable.eq(field(cdma, "D_CVT_CFG", "CVT_EN")),
            fc.cvt.truncate.eq(field(cdma, "D_CVT_CFG", "CVT_TRUNCATE")),
            fc.cvt.scale.eq(field(cdma, "D_CVT_SCALE")[:16].as_signed()),
            fc.cvt.unsigned.eq(image_fetch
                               & ~field(cdma, "D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE")),
            *image_fields(field, fc, image_fetch, stride_x, ow),
        ]
        # a stage's operands per element come through ElementOperands, per kernel through
        # the fetch
        per_element = {stage: Signal(name=f"{stage}_per_element") for stage in OPERAND_DMAS}
        for stage, (dma, _) in OPERAND_DMAS.items():
            m.d.comb += per_element[stage].eq(
                needs[stage] & field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_MODE") & elements)
        latch.append(op.per_element.eq(Cat(per_element["x1"], per_element["x2"])))
        latch_elements = []
        if elements:
            ec = elems.cfg
            latch_elements += [ec.surfaces.eq((k_m1 >> shift_k) + 1), ec.h.eq(oh), ec.w.eq(ow)]
            for stage in OPERAND_DMAS:
                latch_elements += operand_fields(field, stage, getattr(ec, stage))
        for stage, (dma, p) in OPERAND_DMAS.items():
            st = getattr(fc, stage)
            latch_fetch += [st.fetch.eq(needs[stage] & ~per_element[stage]),
                            st.addr.eq(field(rdma, f"D_{p}_BASE_ADDR_LOW")),
                            st.use.eq(field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_USE")),
                            st.wide.eq(field(rdma, f"D_{dma}_CFG", f"{dma}_DATA_SIZE"))]
        latch_wdma = [wdma.cfg.dst_addr.eq(field(sdp, "D_DST_BASE_ADDR_LOW")),
                      wdma.cfg.line_stride.eq(field(sdp, "D_DST_LINE_STRIDE")),
                      wdma.cfg.surf_stride.eq(field(sdp, "D_DST_SURFACE_STRIDE")),
                      wdma.cfg.out_w.eq(ow), wdma.cfg.out_h.eq(oh)]

        # ---- the operation's life: start, divide, fetch, run, complete -------------------
        enabled = Signal()
        m.d.comb += enabled.eq(Cat(*(getattr(csb, f"{port_name(u)}_op_en")
                                     for u in OP_UNITS)).all()
                               & (~operands | csb.sdp_rdma_op_en) & ~other_owner)
        with_rdma = Signal()                     # the operation completes SDP_RDMA too
        fsm_idle = Signal()
        total = Signal(2 * SIZE_BITS)            # output points of the operation
        # The set-up states count with signed registers that hold one less than what is
        # left, so that "anything left" is their sign bit rather than a comparison of two
        # counts (no comparison through the state's decode into the count's reset): each
        # loop runs while its register is not negative.
        rows_m1 = Signal(signed(op.out_h.shape().width + 1))      # rows still to add
        remaining_m1 = Signal(signed(2 * SIZE_BITS + 1))           # points not in a stripe
        stripes = Signal(2 * SIZE_BITS)
        short_m1 = Signal(signed(2 * SIZE_BITS + 2))               # points not yet covered
        outputs_m1 = Signal(signed(3 * SIZE_BITS + 1))             # output beats to leave
        groups_m1 = Signal(signed(op.kernel_groups.shape().width + 1))  # groups to count in
        kick = Signal()                          # the DMAs start: the cycle after the latch
        elements_busy = Signal()                 # per-element operands are being read
        finished_run = Signal()                  # the run's end (below the state machine)
        m.d.sync += kick.eq(0)
        # the units' completion (the COMPLETE state's one cycle), a register per unit
        # (``keep``) set as the state machine moves there: each fans out to its unit's
        # consumer pointer copies in the CSB file (not a decode of the state, one net to
        # all of them)
        done = {unit: kept(f"done_{port_name(unit)}")
                for unit in (*OP_UNITS, "NVDLA_SDP_RDMA")}
        m.d.sync += [flag.eq(0) for flag in done.values()]
        # the latch: a cycle after the units are found enabled while idle, from a register
        # (one copy per few latched fields, ``keep``: not merged), so that the enable of a
        # thousand flip-flops is neither the logic that finds the units enabled nor one net
        # spread over all of them (a copy per group of fields was among the most congested)
        # The copies go on ``enabled`` a cycle late, from a register (the consumer group's
        # SDP fields decoded into ``enabled`` and on into every copy was the full engine's
        # path at 74 MHz); it is cleared as the operation completes, whose units' enables
        # are still set in that cycle.  (The other units go on ``enabled`` itself: a unit
        # found to go while this register is behind never meets a convolution's latch.)
        enabled_late = Signal()
        go = {}
        for name, part in (("core", latch), ("fetch", latch_fetch), ("wdma", latch_wdma),
                           ("elements", latch_elements)):
            for j in range(0, len(part), LATCH_FIELDS):
                copy = kept(f"latch_{name}_{j // LATCH_FIELDS}")
                go.setdefault(name, copy)
                m.d.sync += copy.eq(enabled_late & fsm_idle & ~copy)
                with m.If(copy):
                    m.d.sync += part[j:j + LATCH_FIELDS]
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(go["core"]):
                    m.d.sync += kick.eq(1)
                    # (``op`` takes its fields in this cycle: the height from the register)
                    m.d.sync += [total.eq(0), rows_m1.eq(oh - 1), stripes.eq(0),
                                 with_rdma.eq(operands)]
                    m.next = "SURFACE"
            with m.State("SURFACE"):            # total = out_w x out_h, added up a row a cycle
                with m.If(~rows_m1[-1]):
                    m.d.sync += [total.eq(total + op.out_w), rows_m1.eq(rows_m1 - 1)]
                with m.Else():
                    m.d.sync += remaining_m1.eq(total - 1)
                    m.next = "STRIPES"
            with m.State("STRIPES"):            # stripes = ceil(total / points)
                with m.If(~remaining_m1[-1]):
                    m.d.sync += [stripes.eq(stripes + 1),
                                 remaining_m1.eq(remaining_m1 - self.points)]
                with m.Else():
                    m.d.sync += [short_m1.eq(total - 1), op.stripe_points.eq(0)]
                    m.next = "LENGTH"
            with m.State("LENGTH"):             # stripe_points = ceil(total / stripes)
                with m.If(~short_m1[-1]):
                    m.d.sync += [short_m1.eq(short_m1 - stripes),
                                 op.stripe_points.eq(op.stripe_points + 1)]
                with m.Else():
                    m.d.sync += [outputs_m1.eq(-1), groups_m1.eq(op.kernel_groups - 1)]
                    m.next = "OUTPUTS"
            with m.State("OUTPUTS"):            # outputs = kernel groups x total, added up
                with m.If(~groups_m1[-1]):
                    m.d.sync += [outputs_m1.eq(outputs_m1 + total),
                                 groups_m1.eq(groups_m1 - 1)]
                with m.Else():
                    m.next = "FETCH"
            with m.State("FETCH"):              # the operands come in
                with m.If(fetch.ready):
                    # the feature memory's layout, as the fetch fills it
                    m.d.sync += op.rows_first.eq(fetch.rows_first)
                    m.next = "RUN"
            with m.State("RUN"):
                with m.If(core.out.valid & core.out.ready):
                    m.d.sync += outputs_m1.eq(outputs_m1 - 1)
                with m.If(finished_run):
                    m.d.sync += [flag.eq(1) for unit, flag in done.items()
                                 if unit in OP_UNITS]
                    m.d.sync += done["NVDLA_SDP_RDMA"].eq(with_rdma)
                    m.next = "COMPLETE"
            with m.State("COMPLETE"):           # the units finish together
                m.next = "IDLE"
        m.d.comb += fsm_idle.eq(fsm.ongoing("IDLE"))
        m.d.sync += enabled_late.eq(enabled & ~fsm.ongoing("COMPLETE"))
        # every output out and written, a register a cycle behind (each of its terms stays
        # true once true, in the run): not the count's sign and three units' flags into
        # every unit's done flag and the state
        m.d.sync += finished_run.eq(fsm.ongoing("RUN") & outputs_m1[-1] & fetch.done
                                    & wdma.idle & ~elements_busy)
        # outputs as plain functions of the state (no defaults inside the state machine:
        # Icarus never evaluates those before the state first changes)
        # the core starts the cycle after the operands are in, from a register (not the
        # state's decode and the fetch's ready straight into the core's start, and on into
        # SDP's offered flags across the die)
        core_start = Signal()
        m.d.sync += core_start.eq(fsm.ongoing("FETCH") & fetch.ready)
        m.d.comb += [fetch.start.eq(kick), core.start.eq(core_start)]
        # SDP from memory's start, as the shared datapath's and write DMA's registers see it
        shared_start = kept("sdp_memory_start_shared") if shared_sdp else None
        if shared_sdp:
            self._shared_sdp(m, others["sdp_memory"], core, wdma, op, kick, shared_start)
        else:
            m.d.comb += wdma.start.eq(kick)
        if elements:
            m.d.comb += [elems.start.eq(kick), elements_busy.eq(elems.busy)]
        # the SDP's and SDP_RDMA's completions: a convolution's, or an SDP op from memory's
        finished = {unit: flag for unit, flag in done.items()}
        if "sdp_memory" in others:
            for unit in ("NVDLA_SDP", "NVDLA_SDP_RDMA"):
                finished[unit] = done[unit] | others["sdp_memory"].done
        m.d.comb += [getattr(csb, f"{port_name(unit)}_done").eq(flag)
                     for unit, flag in finished.items()]
        self._others(m, csb, others, field, (buses, writes, owners), gos, other_owner,
                     (conv_reads, conv_writes), fsm_idle & ~enabled, shared_start)
        return m

    @staticmethod
    def _shared_sdp(m: Module, unit: SdpMemory, core: ConvCore, wdma: OutputWriter, op,
                    kick, start) -> None:
        """SDP from memory (``unit``) through the convolution's SDP datapath and write DMA:
        at its start (``start``, a copy of the unit's; its registers latched a cycle
        before) the datapath's registers (``op.post``: X1, X2, the converter, no
        truncation) and the write DMA's take its operation's, and the write DMA starts a
        cycle later; its lanes go into SDP while it runs (``from_memory``, set from its
        start to its end)."""
        from_memory, start_writer = Signal(), Signal()
        m.d.sync += start_writer.eq(start)
        with m.If(start):
            m.d.sync += [op.post.eq(unit.cfg.post), *writer_config(wdma.cfg, unit.cfg),
                         from_memory.eq(1)]
        with m.If(unit.done):
            m.d.sync += from_memory.eq(0)
        wiring.connect(m, unit.lanes, core.memory)
        if memory_ready_copies(unit.hw):
            m.d.comb += unit.lanes_ready_copies.eq(core.memory_ready_copies)
        m.d.comb += [core.from_memory.eq(from_memory), wdma.start.eq(kick | start_writer),
                     unit.results.eq(core.out.valid & core.out.ready),
                     unit.drained.eq(wdma.idle & ~core.out.valid)]

    def _others(self, m: Module, csb: CsbRegisterFile, others: dict, field,
                bus_flags: tuple, gos: dict, claimed, conv_flags: tuple, conv_idle,
                shared_start) -> None:
        """The memory-to-memory units beside the convolution, one at a time: a unit starts
        when its units are enabled (:data:`OTHER_UNITS`, reading from memory) and neither a
        convolution nor another unit runs or is about to (the convolution first, then in
        the order of ``others``), latching its registers a cycle before; while it runs it
        has the AXI port and nothing else starts (``bus_flags``: dicts of a register per
        unit, all of one value, one dict per use; the last is the decisions'; ``gos``: a
        register per unit, its ``go``, which the decisions count as owning too;
        ``claimed``: a unit owns the bus or goes, the decisions' flags and ``gos`` together;
        ``conv_flags``: the convolution's read and write flags, set while no unit has the
        bus, or the write channels only SDP from memory on the shared datapath).  Its
        completion completes its units and raises their done interrupt.

        The latch's enable is a register per :data:`LATCH_BITS` bits of the registers
        (one net to all of a unit's was the full engine's path at 58 MHz), and the unit's
        start a register of its own (``shared_start``: SDP from memory's for the shared
        datapath's registers)."""
        hw = self.hw
        configs = {"pdp": (PdpConfigLayout(), pdp_config(field, hw)),
                   "cdp": (CdpConfigLayout(), cdp_config(field, hw)),
                   "sdp_memory": (SdpMemoryConfigLayout(),
                                  sdp_memory_config(field, hw, lambda post: sdp_fields(field,
                                                                                        post)))}
        ahead = []                                  # units before this one that want to go
        bus_next, write_next = [], []               # each unit's flags' next values
        for name, unit in others.items():
            units, mode = OTHER_UNITS[name]
            # the unit's registers say it should go, a register: a cycle after they do (the
            # consumer group's enables and mode into the decisions' flags of every unit
            # was 11.1 ns in the full engine).  It falls a cycle after the completion
            # clears the enables, while the unit's bus flags still claim the bus.
            wants = Signal(name=f"{name}_wants")
            enabled = Cat(*(getattr(csb, f"{port_name(u)}_op_en") for u in units)).all()
            m.d.sync += wants.eq(enabled if mode is None
                                 else enabled & (field(*mode[:3]) == mode[3]))
            # found to go (``go``), its registers latched the next cycle (``latching``, on
            # copies of ``go``: not the decision's logic spread to every copy, 17.02 ns in
            # the full engine), started the cycle after
            go, latching = gos[name], Signal(name=f"{name}_latching")
            start = kept(f"{name}_start")
            goes = (wants & conv_idle & ~claimed & ~Cat(*ahead).any() & ~go & ~latching
                    & ~start)
            # the bus is the unit's from two cycles after it is found to go (the cycle
            # before its start) until the cycle after its done, registers (the unit's start
            # and busy through the channels' choice into the memory's burst count was the
            # full engine's path at 66 MHz; the decision itself into the flags, at 77 MHz:
            # in between, its ``go`` keeps others from starting)
            has_bus = go | latching | start | unit.busy
            m.d.sync += [go.eq(goes), latching.eq(go), start.eq(latching),
                         *(copies[name].eq(has_bus) for copies in bus_flags)]
            bus_next.append(has_bus)
            if not (name == "sdp_memory" and shared_start is not None):
                write_next.append(has_bus)
            if name == "sdp_memory":
                m.d.sync += shared_start.eq(latching)
            ahead.append(wants)
            layout, assign = configs[name]
            cfg, value = Signal(layout, name=f"{name}_cfg"), Signal(layout)
            m.d.comb += assign(value)
            bits = len(cfg.as_value())
            for j in range(0, bits, LATCH_BITS):
                latch = kept(f"{name}_latch_{j // LATCH_BITS}")
                m.d.sync += latch.eq(go)
                with m.If(latch):
                    m.d.sync += cfg.as_value()[j:j + LATCH_BITS].eq(
                        value.as_value()[j:j + LATCH_BITS])
            m.d.comb += [unit.cfg.eq(cfg), unit.start.eq(start)]
            if name in ("pdp", "cdp"):
                m.d.comb += [getattr(csb, f"{port_name(u)}_done").eq(unit.done)
                             for u in units]
            if name == "cdp":
                m.d.comb += [unit.lut_cfg.eq(csb.cdp_lut_cfg_write),
                             unit.lut_cfg_value.eq(field("NVDLA_CDP", "S_LUT_ACCESS_CFG")),
                             unit.lut_data.eq(csb.cdp_lut_data_write),
                             unit.lut_data_value.eq(field("NVDLA_CDP", "S_LUT_ACCESS_DATA"))]
        conv_reads, conv_writes = conv_flags
        m.d.sync += [conv_reads.eq(~Cat(*bus_next).any()),
                     conv_writes.eq(~Cat(*write_next).any() if write_next else 1)]


def image_fields(field, fc, image, stride_x, out_w) -> list:
    """Assignments of the fetch's image registers (``fc.image``) and of the input
    converter's offset (``fc.cvt.offset``, ``CVT_OFFSET`` in every lane: the fetch puts
    the channels' means in their bytes' lanes, :class:`~accel.rtl.dma.ConvFetch`) from
    CDMA's registers, as they are (decoded after the latch)."""
    cdma, img = "NVDLA_CDMA", fc.image
    offset = field(cdma, "D_CVT_OFFSET")[:16].as_signed()
    return [
        *(lane.eq(offset) for lane in fc.cvt.offset),
        img.enable.eq(image),
        img.format.eq(field(cdma, "D_DATAIN_FORMAT", "PIXEL_FORMAT")),
        img.mean_format.eq(field(cdma, "D_MEAN_FORMAT", "MEAN_FORMAT")),
        *(img.means[i].eq(field(cdma, f"D_MEAN_GLOBAL_{i // 2}", name)[:16].as_signed())
          for i, name in enumerate(("MEAN_RY", "MEAN_GU", "MEAN_BV", "MEAN_AX"))),
        img.width.eq(field(cdma, "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1),
        img.x_offset.eq(field(cdma, "D_PIXEL_OFFSET", "PIXEL_X_OFFSET")),
        img.pad_left.eq(field(cdma, "D_ZERO_PADDING", "PAD_LEFT")),
        img.pad_value.eq(field(cdma, "D_ZERO_PADDING_VALUE", "PAD_VALUE")[:8]),
        img.stride_x.eq(stride_x), img.out_w.eq(out_w),
    ]


def sdp_fields(field, post) -> list:
    """Assignments of the post-processing's X1, X2 and converter fields (``post``, a
    :class:`~accel.rtl.postproc.ConfigLayout`) from SDP's registers in the consumer group
    (``field(unit, reg, name)``); CACC's truncation is the caller's."""
    sdp = "NVDLA_SDP"
    out = [post.cvt_offset.eq(field(sdp, "D_CVT_OFFSET", "CVT_OFFSET")),
           post.cvt_scale.eq(field(sdp, "D_CVT_SCALE", "CVT_SCALE")),
           post.cvt_shift.eq(field(sdp, "D_CVT_SHIFT", "CVT_SHIFT"))]
    for stage, p in (("x1", "BS"), ("x2", "BN")):
        st = getattr(post, stage)
        out += [
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
    return out
