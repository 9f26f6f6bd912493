"""Credits: how a pipeline that moves every cycle is kept from overrunning its buffer.

A unit whose stages never stall writes each result into a FIFO at the end of the
pipeline.  It takes an input only while the FIFO has an entry that no input in
flight has been promised: the count starts at the FIFO's depth, an input taken
spends one and a result read out gives one back.  Back-pressure on the output so
never reaches the stages.

Where both sides keep count, the producer with credits and the consumer with a count of
the entries written, the buffer need not check either side: :class:`CountedFIFO`.
"""

from __future__ import annotations

from itertools import pairwise

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.rtl.timing import kept


def credit_room(m: Module, depth: int, take: Value, give: Value, name: str = "credits", *,
                late_give: bool = False) -> Signal:
    """Count credits for a ``depth``-entry buffer (``take``: an input spends one this
    cycle, ``give``: an entry leaves the buffer) and return a flag, high while at least one
    is left.  The flag is a register computed from the next count, so a ``ready`` made
    from it leaves a flip-flop rather than a comparison of the count.  ``late_give``: the
    credit comes back a cycle after the entry leaves, from a register, so that whatever
    decides the buffer's reads ends there instead of running on into the count (the
    buffer then needs a cycle's worth more entries to keep a beat a cycle flowing)."""
    return credit_flags(m, depth, take, give, name, late_give=late_give)[0]


def credit_flags(m: Module, depth: int, take: Value, give: Value, name: str = "credits", *,
                 copies: int = 1, late_give: bool = False) -> list[Signal]:
    """:func:`credit_room`'s flag as ``copies`` registers that take the same value (after
    the first, marked ``keep``), for a take whose enables fan out to many registers: each
    group of them gets a flag of its own, placed beside it."""
    credits = Signal(range(depth + 1), init=depth, name=name)
    flags = [Signal(init=1, name=f"{name}_left"),
             *(kept(f"{name}_left_{i}", init=1) for i in range(1, copies))]
    if late_give:
        given = Signal(name=f"{name}_given")
        m.d.sync += given.eq(give)
        give = given
    # the take and the give only select among outcomes worked out from the count alone,
    # so the loop from the flag back into itself is not the count's adder and comparison.
    # A take spends a credit there is (its ready is the flag), so with a give
    # the count stays above 0.
    up = Signal(range(depth + 2), name=f"{name}_up")
    down = Signal(range(depth + 1), name=f"{name}_down")
    m.d.comb += [up.eq(credits + 1), down.eq(credits - 1)]
    room = give | Mux(take, credits != 1, credits != 0)
    m.d.sync += [credits.eq(Mux(give, Mux(take, credits, up), Mux(take, down, credits))),
                 *(flag.eq(room) for flag in flags)]
    return flags


class CountedFIFO(wiring.Component):
    """A first-in first-out buffer of ``depth`` entries of ``width`` bits that checks
    neither side: its producer writes only entries it holds credits for and its consumer
    reads only entries it has counted in.  ``w_en`` is the storage's write enable as it
    comes (amaranth's ``SyncFIFO`` gates it with ``level != depth``, a comparison in front
    of the enable of every storage cell).  ``r_data`` is the oldest entry, read
    combinationally; ``r_en`` moves past it.  Writing a full buffer or reading an empty
    one is not detected."""

    def __init__(self, width: int, depth: int) -> None:
        self.width, self.depth = width, depth
        super().__init__({"w_en": In(1), "w_data": In(width),
                          "r_en": In(1), "r_data": Out(width)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.storage = storage = memory.Memory(shape=self.width, depth=self.depth,
                                                       init=[])
        w_port, r_port = storage.write_port(), storage.read_port(domain="comb")
        produce, consume = Signal(range(self.depth)), Signal(range(self.depth))
        m.d.comb += [w_port.addr.eq(produce), w_port.data.eq(self.w_data),
                     w_port.en.eq(self.w_en), r_port.addr.eq(consume),
                     self.r_data.eq(r_port.data)]
        for pointer, step in ((produce, self.w_en), (consume, self.r_en)):
            with m.If(step):
                m.d.sync += pointer.eq(Mux(pointer == self.depth - 1, 0, pointer + 1))
        return m


class StreamSlice(wiring.Component):
    """A stream of ``shape`` through registers: a two-entry skid buffer.  Every handshake of
    a full-rate stream still goes through, a cycle later, and neither the payload, the
    valid nor the ready crosses the slice in one cycle, so producer and consumer may be
    placed apart.  The registers' enables are the slice's own flags and ``out.ready``
    only (a register loads whatever ``inp`` holds whenever it is free; its valid flag says
    whether that was an entry): ``inp.valid`` arriving from afar goes into flip-flops,
    not into the enable of every payload bit.

    ``parts``: the payload's bits in that many parts, each with copies of the flags of
    its own (marked ``keep``, all of one value), so that no one enable reaches every bit
    of a wide payload.  ``level``: the entries held, 0 to 2.  ``ready_copies``:
    ``inp.ready`` as each part's flag gives it (all equal), for a producer whose take
    enables many registers: each group of them decides on a copy of its own."""

    def __init__(self, shape, parts: int = 1) -> None:
        self.parts = parts
        super().__init__({"inp": In(stream.Signature(shape)),
                          "out": Out(stream.Signature(shape)), "level": Out(range(3)),
                          "ready_copies": Out(parts)})

    def elaborate(self, platform) -> Module:
        m = Module()
        inp, out = self.inp, self.out
        incoming, outgoing = Value.cast(inp.payload), Value.cast(out.payload)
        skid = Signal.like(incoming, name="skid")
        width = len(incoming)
        bounds = [width * i // self.parts for i in range(self.parts + 1)]
        for i, (lo, hi) in enumerate(pairwise(bounds)):
            # the part's copies of the flags (the first: the slice's own)
            full = kept(f"out_valid_{i}") if i else Signal(name="out_valid")
            held = kept(f"skid_valid_{i}") if i else Signal(name="skid_valid")
            m.d.comb += self.ready_copies[i].eq(~held)
            if i == 0:
                m.d.comb += [out.valid.eq(full), inp.ready.eq(~held),
                             self.level.eq(full + held)]
            with m.If(out.ready | ~full):               # the output register is free
                with m.If(held):
                    m.d.sync += [outgoing[lo:hi].eq(skid[lo:hi]), full.eq(1), held.eq(0)]
                with m.Else():
                    m.d.sync += [outgoing[lo:hi].eq(incoming[lo:hi]), full.eq(inp.valid)]
            with m.Elif(~held):                         # it holds: an entry offered now waits
                m.d.sync += [skid[lo:hi].eq(incoming[lo:hi]), held.eq(inp.valid)]
        return m


class PartedFIFO(wiring.Component):
    """A ``SyncFIFOBuffered`` of ``width`` bits and ``depth`` entries built as ``parts``
    of them side by side, each holding its share of the bits with read and write pointers
    of its own, all written and read together: no one pointer register addresses the
    memory cells of every bit of a wide entry (in distributed RAM across the die, a read
    address into every cell was the full engine's path at 74 MHz).  The ports are
    ``SyncFIFOBuffered``'s; ``w_rdy``, ``r_rdy`` and ``level`` are the first part's (all
    parts count alike)."""

    def __init__(self, width: int, depth: int, parts: int) -> None:
        self.width, self.depth, self.parts = width, depth, parts
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        bounds = [self.width * i // self.parts for i in range(self.parts + 1)]
        for i, (lo, hi) in enumerate(pairwise(bounds)):
            part = fifo.SyncFIFOBuffered(width=hi - lo, depth=self.depth)
            m.submodules[f"part{i}"] = part
            m.d.comb += [part.w_data.eq(self.w_data[lo:hi]), part.w_en.eq(self.w_en),
                         self.r_data[lo:hi].eq(part.r_data), part.r_en.eq(self.r_en)]
            if i == 0:
                m.d.comb += [self.w_rdy.eq(part.w_rdy), self.r_rdy.eq(part.r_rdy),
                             self.level.eq(part.level)]
        return m
