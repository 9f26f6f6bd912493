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


class PointerSlice(wiring.Component):
    """:class:`StreamSlice`'s two entries for a consumer whose ``out.ready`` is a decision
    made late in its cycle (which reader the read data belongs to and whether its buffer
    has room): the entries stay where they were written and a read pointer picks the one
    offered, so ``out.ready`` reaches the pointer, the count and the entries' held flags,
    a few registers, rather than the enable of every payload bit (a slice moving its
    skid entry into its output register on ``out.ready`` put the full engine's read
    choice into 58 enables, 12.3 ns on an ECP5).  The price is a two-way choice between
    the entries in front of the consumer.

    An entry loads whatever ``inp`` holds whenever it holds nothing (its enable a
    register, as :class:`StreamSlice`'s), and counts as an entry if ``inp.valid`` was
    high and it was the one to write.  ``inp.ready`` is a register: the slice takes one
    entry a cycle while the consumer keeps up.  ``parts``: the payload's bits in that many
    parts, each with its own copies of the pointer and the held flags.  ``level``: the
    entries held, 0 to 2."""

    def __init__(self, shape, parts: int = 1) -> None:
        self.parts = parts
        super().__init__({"inp": In(stream.Signature(shape)),
                          "out": Out(stream.Signature(shape)), "level": Out(range(3))})

    def elaborate(self, platform) -> Module:
        m = Module()
        inp, out = self.inp, self.out
        incoming, outgoing = Value.cast(inp.payload), Value.cast(out.payload)
        entries = [Signal.like(incoming, name=f"entry{e}") for e in range(2)]
        count = Signal(range(3))
        room, filled = Signal(init=1), Signal()      # count != 2, count != 0 as registers
        write, read = Signal(), Signal()             # the entry the next push, pop uses
        push, pop = Signal(), Signal()
        m.d.comb += [inp.ready.eq(room), out.valid.eq(filled), self.level.eq(count),
                     push.eq(inp.valid & room), pop.eq(out.ready & filled)]
        after = Mux(push, Mux(pop, count, count + 1), Mux(pop, count - 1, count))
        m.d.sync += [count.eq(after), room.eq(after != 2), filled.eq(after != 0),
                     write.eq(write ^ push), read.eq(read ^ pop)]
        # a push and a pop never meet at one entry: with one held, the pop takes it and
        # the push goes to the other; with none, nothing pops; with two, nothing pushes
        held = [Signal(name=f"held{e}") for e in range(2)]
        held_next = [(push & (write == e)) | (h & ~(pop & (read == e)))
                     for e, h in enumerate(held)]
        m.d.sync += [h.eq(n) for h, n in zip(held, held_next, strict=True)]
        width = len(incoming)
        bounds = [width * i // self.parts for i in range(self.parts + 1)]
        for i, (lo, hi) in enumerate(pairwise(bounds)):
            part_held = [kept(f"held{e}_{i}") for e in range(2)]
            pointer = kept(f"read_{i}")
            m.d.sync += [*(h.eq(n) for h, n in zip(part_held, held_next, strict=True)),
                         pointer.eq(read ^ pop)]
            for e in range(2):
                with m.If(~part_held[e]):
                    m.d.sync += entries[e][lo:hi].eq(incoming[lo:hi])
            m.d.comb += outgoing[lo:hi].eq(Mux(pointer, entries[1][lo:hi],
                                               entries[0][lo:hi]))
        return m


class SlicedFIFO(wiring.Component):
    """amaranth's ``SyncFIFOBuffered`` of ``width`` bits and ``depth`` entries read through
    a :class:`PointerSlice`, with the FIFO's ports (``w_en``, ``w_data``, ``w_rdy``,
    ``r_en``, ``r_data``, ``r_rdy``, ``level``): the FIFO's block RAM output (5.6 ns
    after the clock on an ECP5, its output register unused by yosys's mapping) goes into
    the slice's registers beside it, not on across the die into its reader's (11.3 ns in
    the full engine).  A word written reaches the read side a cycle later than in the
    FIFO alone; the level counts the slice's entries, so it holds ``depth + 2`` words."""

    def __init__(self, width: int, depth: int) -> None:
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
                          "level": Out(range(depth + 3))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.storage = inner = fifo.SyncFIFOBuffered(width=self.width, depth=self.depth)
        m.submodules.slice = out = PointerSlice(self.width)
        m.d.comb += [inner.w_en.eq(self.w_en), inner.w_data.eq(self.w_data),
                     self.w_rdy.eq(inner.w_rdy),
                     out.inp.valid.eq(inner.r_rdy), out.inp.payload.eq(inner.r_data),
                     inner.r_en.eq(out.inp.ready),
                     self.r_rdy.eq(out.out.valid), self.r_data.eq(out.out.payload),
                     out.out.ready.eq(self.r_en), self.level.eq(inner.level + out.level)]
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
