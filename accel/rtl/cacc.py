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
``sum``).  One beat per cycle, in two stages: a beat is registered as it
comes in, and in the next cycle its entry is read and the partial sum added
(stage A); the cycle after, the exact sum is saturated, written back and, for a
``last`` beat, handed to the output register (stage B).  The buffer is a memory
per lane of ``points`` entries read asynchronously, written at the clock
(distributed RAM on an FPGA, not ``points x atomic_k`` 34-bit registers and
their read multiplexer), each read and written through its own copies of the
point registers.  A beat whose entry stage B is still writing waits a cycle
(only a stripe of one point adds to an entry in consecutive beats), and a
``last`` sum that cannot leave because ``sum`` is stalled holds both stages and
``psum``.  An entry is only read after its ``first`` beat wrote it: the buffer
needs no reset.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.postproc import ACC_BITS, saturate
from accel.rtl.timing import kept


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
        # stage A: the beat, registered as it comes in.  The buffer is read from flip-flops,
        # one copy of the point per lane (``keep``: not merged), each beside its lane's
        # memory, and the partial sum added to the entry (or not, for the point's first:
        # that flag copied per lane too).
        beat = Signal(PsumLayout(self.hw, self.points), name="beat")
        point = [kept(f"point{k}", range(self.points))
                 for k in range(lanes)]
        first = [kept(f"first{k}") for k in range(lanes)]
        have = Signal()
        # stage B: the exact sums, saturated and written back (and handed on if last)
        b_valid, b_last = Signal(), Signal()
        b_point = [kept(f"b_point{k}", range(self.points))
                   for k in range(lanes)]
        b_sum = [Signal(signed(ACC_BITS + 1), name=f"b_sum{k}") for k in range(lanes)]
        # output register: a finished sum waits here until taken
        out_valid = Signal()
        out_data = [Signal(signed(ACC_BITS), name=f"out{k}") for k in range(lanes)]
        m.d.comb += [self.sum.valid.eq(out_valid)]
        m.d.comb += [self.sum.payload[k].eq(out_data[k]) for k in range(lanes)]

        # B goes unless it is a last beat and the output register is full (and not being
        # emptied this cycle).  A goes into B when B is free, unless B holds the same entry:
        # its new value is written at the end of this cycle, so A reads it a cycle later
        # (only a stripe of one point adds to an entry in consecutive beats)
        out_free = ~out_valid | self.sum.ready
        b_go, a_go = Signal(), Signal()
        # the hazard (B valid with A's entry) as a register of the next cycle's values, not
        # the points' comparison in front of A's take, whose enable reaches every bit of
        # the beat
        hazard = Signal()
        m.d.comb += [b_go.eq(b_valid & (~b_last | out_free)),
                     a_go.eq(have & (~b_valid | b_go) & ~hazard)]
        # ``psum.ready`` is the same function as ``~have | a_go``, worked out from copies
        # of those five registers (``keep``) so that it is a net of its own rather than
        # a_go's, which fans out to every lane
        flags = {"have": have, "hazard": hazard, "b_valid": b_valid, "b_last": b_last,
                 "out_valid": out_valid}
        copies = {name: kept(f"{name}_for_ready") for name in flags}
        m.d.comb += self.psum.ready.eq(
            ~copies["have"] | (~copies["hazard"] & (
                ~copies["b_valid"] | ~copies["b_last"] | ~copies["out_valid"]
                | self.sum.ready)))
        next_point = Mux(self.psum.ready, self.psum.payload.point, point[0])
        next_b_point = Mux(a_go, point[0], b_point[0])
        next_b_valid = a_go | (b_valid & ~b_go)
        following = {
            "have": Mux(self.psum.ready, self.psum.valid, have),
            "hazard": next_b_valid & (next_b_point == next_point),
            "b_valid": next_b_valid,
            "b_last": Mux(a_go, beat.last, b_last),
            "out_valid": (b_go & b_last) | (out_valid & ~self.sum.ready),
        }
        for name, value in following.items():
            m.d.sync += [flags[name].eq(value), copies[name].eq(value)]
        # stage A is loaded whenever it may take a beat (valid or not: ``have`` says whether
        # it holds one), so the copy's enable does not wait on the upstream's valid
        with m.If(self.psum.ready):
            m.d.sync += beat.eq(self.psum.payload)
            m.d.sync += [point[k].eq(self.psum.payload.point) for k in range(lanes)]
            m.d.sync += [first[k].eq(self.psum.payload.first) for k in range(lanes)]
        with m.If(a_go):
            m.d.sync += [b_point[k].eq(point[k]) for k in range(lanes)]

        # one memory per lane
        for k in range(lanes):
            buffer = memory.Memory(shape=signed(ACC_BITS), depth=self.points, init=[])
            m.submodules[f"buffer{k}"] = buffer
            read = buffer.read_port(domain="comb")
            write = buffer.write_port()
            saturated = Signal(signed(ACC_BITS), name=f"saturated{k}")
            m.d.comb += [read.addr.eq(point[k]), write.addr.eq(b_point[k]),
                         saturated.eq(saturate(b_sum[k], ACC_BITS)),
                         write.data.eq(saturated), write.en.eq(b_go)]
            with m.If(a_go):
                m.d.sync += b_sum[k].eq(Mux(first[k], beat.data[k], beat.data[k] + read.data))
            with m.If(b_go & b_last):
                m.d.sync += out_data[k].eq(saturated)
        return m
