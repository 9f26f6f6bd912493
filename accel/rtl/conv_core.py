"""A direct-convolution core in NVDLA's blocks: CBUF, CSC, CMAC, CACC, SDP.

The feature cube and the weights sit in on-chip memories (NVDLA's CBUF banks hold the
same atoms), written by CDMA (:class:`accel.rtl.dma.ConvFetch` in the full engine) while
the convolution runs.  :class:`~accel.rtl.csc.Csc` walks the operation in rounds and
sends the kernels and the feature atoms into the MAC array
(:class:`~accel.rtl.cmac.Cmac`, shadow kernel bank); the
:class:`~accel.rtl.cacc.Accumulator` adds the partial sums up per point and hands each
finished point to :class:`~accel.rtl.sdp.Sdp` (X1/X2, CVT), whose int8 beats leave on
``out`` in the same order: kernel group, then point.

The registers arrive on ``cfg`` (constant from ``start`` until the last output; the CSB
register file drives them in the full engine).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cacc import Accumulator
from accel.rtl.cmac import Cmac, capacity
from accel.rtl.conv_layout import (
    ConvConfigLayout,
    operand_layout,
    operand_write_layout,
    write_layout,
)
from accel.rtl.credits import credit_room
from accel.rtl.csc import Csc
from accel.rtl.postproc import BeatLayout, ResultLayout, lanes_per_cycle, memory_ready_copies
from accel.rtl.sdp import Sdp
from accel.rtl.timing import stage

#: Entries of the FIFO between the MAC array and CACC: a beat a cycle flows through it
#: with its credit given back from a register, a cycle after the beat leaves.
PSUM_BUFFER = 4


class ConvCore(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(ConvConfigLayout())``
    start : ``In(1)``, a one-cycle pulse; ``busy`` : ``Out(1)`` until every atom is sent
    feature_write, weight_write : ``In`` address / data / enable of the memories (the
    feature entries in lane groups of one memory atom)
    feature_level, weight_level : ``In``: entries of the feature / weight memory written
    so far (every entry below the level is complete); the sequencer reads an entry only
    below it, so the input and the weights may stream in while the convolution runs
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    memory, from_memory : with ``memory_input``, SDP's input read from memory, a lane group
    at a time, and whether the operation is one (:class:`~accel.rtl.sdp.Sdp`): their
    results leave on ``out`` too; memory_ready_copies: ``memory.ready``'s copies (Sdp's)
    """

    def __init__(self, cfg: HwConfig, points: int = 16, feature_entries: int = 2048,
                 weight_entries: int = 2048, operand_entries: int = 64,
                 ecp5_dsp: bool | None = None, memory_input: bool = False) -> None:
        self.hw, self.points, self.ecp5_dsp = cfg, points, ecp5_dsp
        self.feature_entries, self.weight_entries = feature_entries, weight_entries
        self.operand_entries, self.memory_input = operand_entries, memory_input
        members = {
            "cfg": In(ConvConfigLayout()),
            "start": In(1),
            "busy": Out(1),
            "feature_write": In(write_layout(cfg, feature_entries,
                                             cfg.atomic_c // cfg.atom_size)),
            "weight_write": In(write_layout(cfg, weight_entries)),
            "feature_level": In(range(feature_entries + 1)),
            "weight_level": In(range(weight_entries + 1)),
            "operand_write": In(operand_write_layout(cfg, operand_entries)),
            "elements": In(stream.Signature(operand_layout(cfg))),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        }
        if memory_input:
            members.update(memory=In(stream.Signature(BeatLayout(cfg, lanes_per_cycle(cfg)))),
                           from_memory=In(1))
            if memory_ready_copies(cfg):
                members["memory_ready_copies"] = Out(memory_ready_copies(cfg))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        hw, n_c = self.hw, self.hw.atomic_c
        atom = data.ArrayLayout(signed(8), n_c)
        m.submodules.fmem = fmem = memory.Memory(shape=atom, depth=self.feature_entries,
                                                 init=[])
        m.submodules.wmem = wmem = memory.Memory(shape=atom, depth=self.weight_entries,
                                                 init=[])
        for mem, port in ((fmem, self.feature_write), (wmem, self.weight_write)):
            wr = mem.write_port(granularity=hw.atom_size if mem is fmem else None)
            m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(port.data), wr.en.eq(port.en)]
        m.submodules.csc = csc = Csc(hw, fmem.read_port(), wmem.read_port(), self.points,
                                     self.feature_entries, self.weight_entries, self.ecp5_dsp)
        m.submodules.cmac = cmac = Cmac(hw, shadow=True, ecp5_dsp=self.ecp5_dsp)
        m.submodules.cacc = cacc = Accumulator(hw, self.points)
        m.submodules.sdp = sdp = Sdp(hw, self.points, self.operand_entries, self.ecp5_dsp,
                                     self.memory_input)
        m.d.comb += [csc.cfg.eq(self.cfg), csc.start.eq(self.start),
                     csc.feature_level.eq(self.feature_level),
                     csc.weight_level.eq(self.weight_level), self.busy.eq(csc.busy)]
        wiring.connect(m, csc.weight, cmac.weight)
        wiring.connect(m, csc.data, cmac.data)
        self._accumulate(m, csc, cmac, cacc)
        wiring.connect(m, cacc.sum, sdp.sum)
        m.d.comb += [sdp.post.eq(self.cfg.post), sdp.start.eq(self.start),
                     sdp.points_m1.eq(csc.points_m1), sdp.points_m2.eq(csc.points_m2),
                     sdp.counted.eq(csc.counted), sdp.operand_write.eq(self.operand_write),
                     sdp.per_element.eq(self.cfg.per_element)]
        wiring.connect(m, wiring.flipped(self.elements), sdp.elements)
        if self.memory_input:
            wiring.connect(m, wiring.flipped(self.memory), sdp.memory)
            m.d.comb += sdp.from_memory.eq(self.from_memory)
            if memory_ready_copies(self.hw):
                m.d.comb += self.memory_ready_copies.eq(sdp.memory_ready_copies)
        wiring.connect(m, sdp.out, wiring.flipped(self.out))
        return m

    def _accumulate(self, m: Module, csc: Csc, cmac: Cmac, cacc: Accumulator) -> None:
        """The MAC array's partial sums into the CACC, each with its point and its place in
        the point's sum, which travel beside the MAC pipeline in a FIFO.

        The partial sums reach CACC through a small FIFO taken on credits: the MAC array's
        output FIFO is emptied on a register, not on CACC's ready (which goes back through
        both of its stages).
        """
        point_bits = len(csc.point)
        m.submodules.meta = meta = fifo.SyncFIFOBuffered(width=point_bits + 2,
                                                         depth=capacity(self.hw) + 1)
        m.d.comb += [meta.w_data.eq(csc.point | (csc.first << point_bits)
                                    | (csc.last << (point_bits + 1))),
                     meta.w_en.eq(cmac.data.valid & cmac.data.ready)]
        psum = Signal(cacc.psum.payload.shape())
        m.submodules.psums = psums = fifo.SyncFIFO(width=len(psum.as_value()),
                                                   depth=PSUM_BUFFER)
        moved = Signal()
        m.d.comb += moved.eq(cmac.result.valid & meta.r_rdy & credit_room(
            m, PSUM_BUFFER, moved, psums.r_rdy & psums.r_en, name="psum_credits",
            late_give=True))                            # CACC's ready ends at a register
        m.d.comb += [
            psum.data.eq(cmac.result.payload),
            psum.point.eq(meta.r_data[:point_bits]),
            psum.first.eq(meta.r_data[point_bits]),
            psum.last.eq(meta.r_data[point_bits + 1]),
            cmac.result.ready.eq(moved), meta.r_en.eq(moved),
            # written a cycle after the move, from registers (the move into the write
            # enables of the FIFO's storage was 11.03 ns in the full engine); the credit
            # taken at the move covers the entry on its way
            psums.w_en.eq(stage(m, "psum_moved", moved)),
            psums.w_data.eq(stage(m, "psum_entry", psum)),
            cacc.psum.valid.eq(psums.r_rdy), cacc.psum.payload.eq(psums.r_data),
            psums.r_en.eq(cacc.psum.ready),
        ]
