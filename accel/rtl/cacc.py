"""CACC's accumulation: partial sums of the MAC array gathered into 34-bit saturating sums.

A direct convolution produces each output point's sum over all input channels
and kernel taps as a sequence of MAC-array results, one per (channel group,
tap) atom pair; NVDLA's CACC adds them up in its assembly buffer, one entry
of ``atomic_k`` 34-bit lanes per output point of the stripe in flight
(``CACC_PARSUM_WIDTH``), saturating at every addition as the cmodel's
:func:`accel.cmod.cacc.accumulate` does, and hands each point on when its
last partial sum arrives.  (With ``mac_result_bits``-wide partial sums the
34-bit range holds at least 2**15 of them exactly, so saturating at each
addition and saturating the exact total, as the cmodel does, agree.)

Each ``psum`` beat names its entry (``point``) and whether it is the point's
first partial sum (the entry starts from it) and last (the sum goes out on
``sum``).  One beat per cycle: each beat is registered as it comes in, and
its entry is read, added and written in the next cycle (the buffer is a memory
per lane of ``points`` entries read asynchronously, written at the clock:
distributed RAM on an FPGA, not ``points x atomic_k`` 34-bit registers and
their read multiplexer; each lane's memory is addressed by its own copy of the
point register).  A beat whose ``last`` result cannot leave because ``sum`` is
stalled stays in the register and holds ``psum``.  An entry is only read after
its ``first`` beat wrote it: the buffer needs no reset.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.postproc import ACC_BITS, saturate


class PsumLayout(data.StructLayout):
    """A MAC-array result for output point ``point`` with its place in the sequence."""

    def __init__(self, cfg: HwConfig, points: int) -> None:
        super().__init__({"data": data.ArrayLayout(signed(cfg.mac_result_bits), cfg.atomic_k),
                          "point": range(points), "first": 1, "last": 1})


class SumLayout(data.ArrayLayout):
    """The finished 34-bit sums of one output point, ``atomic_k`` lanes."""

    def __init__(self, cfg: HwConfig) -> None:
        super().__init__(signed(ACC_BITS), cfg.atomic_k)


class Accumulator(wiring.Component):
    """The assembly buffer of ``points`` entries; see the module docstring.

    Attributes
    ----------
    psum : ``In(stream.Signature(PsumLayout(cfg, points)))``
    sum : ``Out(stream.Signature(SumLayout(cfg)))``
    """

    def __init__(self, cfg: HwConfig, points: int = 16) -> None:
        if points < 1:
            raise ValueError(f"points={points} must be at least 1")
        self.hw, self.points = cfg, points
        super().__init__({
            "psum": In(stream.Signature(PsumLayout(cfg, points))),
            "sum": Out(stream.Signature(SumLayout(cfg))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        lanes = self.hw.atomic_k
        # the beat, registered as it comes in: the buffer is addressed from flip-flops, one
        # copy of the point per lane (``keep``: not merged), each beside its lane's memory
        beat = Signal(PsumLayout(self.hw, self.points), name="beat")
        point = [Signal(range(self.points), name=f"point{k}", attrs={"keep": 1})
                 for k in range(lanes)]
        have = Signal()
        # output register: a finished sum waits here until taken
        out_valid = Signal()
        out_data = [Signal(signed(ACC_BITS), name=f"out{k}") for k in range(lanes)]
        m.d.comb += [self.sum.valid.eq(out_valid)]
        m.d.comb += [self.sum.payload[k].eq(out_data[k]) for k in range(lanes)]
        # the held beat is added in unless it is a last one and the output register is full
        # (and not being emptied this cycle)
        out_free = ~out_valid | self.sum.ready
        advance = Signal()
        m.d.comb += [advance.eq(have & (~beat.last | out_free)),
                     self.psum.ready.eq(~have | advance)]
        # copied whenever the register may take a beat (valid or not: ``have`` says whether
        # it holds one), so the copy's enable does not wait on the upstream's valid
        with m.If(self.psum.ready):
            m.d.sync += [beat.eq(self.psum.payload), have.eq(self.psum.valid)]
            m.d.sync += [point[k].eq(self.psum.payload.point) for k in range(lanes)]

        # one memory per lane: the selected entry and its new value
        added = [Signal(signed(ACC_BITS), name=f"added{k}") for k in range(lanes)]
        for k in range(lanes):
            buffer = memory.Memory(shape=signed(ACC_BITS), depth=self.points, init=[])
            m.submodules[f"buffer{k}"] = buffer
            read = buffer.read_port(domain="comb")
            write = buffer.write_port()
            m.d.comb += [read.addr.eq(point[k]), write.addr.eq(point[k]),
                         write.data.eq(added[k]), write.en.eq(advance)]
            with m.If(beat.first):
                m.d.comb += added[k].eq(beat.data[k])
            with m.Else():
                m.d.comb += added[k].eq(saturate(beat.data[k] + read.data, ACC_BITS))

        with m.If(self.sum.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(advance & beat.last):
            m.d.sync += [out_valid.eq(1)] + [out_data[k].eq(added[k]) for k in range(lanes)]
        return m
