"""Credit helpers (:mod:`accel.rtl.credits`) in Amaranth's simulator, against plain Python.

``credit_flags``: every copy of the flag follows one Python count of the credits left;
``CountedFIFO``: entries come out in the order they went in, across the pointers' wrap at
a depth that is not a power of two, with writes and reads in the same cycle.
``PartedFIFO``: the parts keep one order and one level, as one FIFO would.
``StreamSlice``: the skid buffer's cycle-by-cycle behaviour on a hand-worked sequence (its
ordering under random handshakes is tested through ``AxiSlice``, test_axi_slice.py).
``PointerSlice``: the same sequence, order and level under random handshakes, a stream at
one entry a cycle.  ``SlicedFIFO``: order, level and room against a plain count, and one
word a cycle through it.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import fifo
from amaranth.sim import Simulator

from accel.rtl.credits import (
    CountedFIFO,
    PartedFIFO,
    PointerSlice,
    SlicedFIFO,
    StreamSlice,
    credit_flags,
)


def _simulate(dut, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("late_give", [False, True])
def test_credit_flags_follow_the_count(late_give: bool) -> None:
    depth, copies = 3, 3
    m = Module()
    take, give = Signal(), Signal()
    flags = credit_flags(m, depth, take, give, copies=copies, late_give=late_give)
    rng = random.Random(7)

    async def bench(ctx) -> None:
        left, given_last = depth, 0      # the model: credits left, a give a cycle late
        in_buffer = 0
        for _ in range(400):
            values = [ctx.get(flag) for flag in flags]
            assert values == [int(left > 0)] * copies
            t = int(left > 0 and rng.random() < 0.6)
            g = int(in_buffer > 0 and rng.random() < 0.5)
            ctx.set(take, t)
            ctx.set(give, g)
            await ctx.tick()
            back = given_last if late_give else g
            left += back - t
            given_last = g
            in_buffer += t - g
            assert 0 <= left <= depth

    _simulate(m, bench)


def test_counted_fifo_keeps_order() -> None:
    dut = CountedFIFO(width=12, depth=5)
    rng = random.Random(11)

    async def bench(ctx) -> None:
        model: deque[int] = deque()
        written = 0
        for _ in range(600):
            read = bool(model) and rng.random() < 0.5
            write = len(model) - read < dut.depth and rng.random() < 0.55
            if read:
                assert ctx.get(dut.r_data) == model[0]
            value = rng.randrange(1 << 12)
            ctx.set(dut.r_en, read)
            ctx.set(dut.w_en, write)
            ctx.set(dut.w_data, value)
            await ctx.tick()
            if read:
                model.popleft()
            if write:
                model.append(value)
                written += 1
        assert written > 2 * dut.depth            # the pointers wrapped

    _simulate(dut, bench)



@pytest.mark.parametrize("kind", [StreamSlice, PointerSlice])
def test_slice_cycle_by_cycle(kind) -> None:
    dut = kind(8)

    async def bench(ctx) -> None:
        def state():
            return (ctx.get(dut.out.valid), ctx.get(dut.out.payload), ctx.get(dut.inp.ready))
        ctx.set(dut.out.ready, 0)
        assert state() == (0, 0, 1)                     # empty, ready for an entry
        ctx.set(dut.inp.valid, 1)
        ctx.set(dut.inp.payload, 5)
        await ctx.tick()                                # 5 into the (free) first entry
        assert state() == (1, 5, 1)                     # although the consumer is not ready
        ctx.set(dut.inp.payload, 6)
        await ctx.tick()                                # 6 into the second
        assert state() == (1, 5, 0)                     # full: the producer must wait
        ctx.set(dut.inp.payload, 7)                     # (offered, not taken)
        ctx.set(dut.out.ready, 1)
        await ctx.tick()                                # 5 taken, 6 offered
        assert state() == (1, 6, 1)
        await ctx.tick()                                # 6 taken, 7 taken in
        assert state() == (1, 7, 1)
        ctx.set(dut.inp.valid, 0)
        await ctx.tick()                                # 7 taken, nothing more
        assert ctx.get(dut.out.valid) == 0

    _simulate(dut, bench)


@pytest.mark.parametrize("kind", [StreamSlice, PointerSlice])
@pytest.mark.parametrize("parts", [1, 3])
def test_slice_keeps_order_and_level_in_parts(kind, parts: int) -> None:
    dut = kind(16, parts=parts)
    rng = random.Random(parts + 10 * (kind is PointerSlice))
    sent = [rng.randrange(1 << 16) for _ in range(300)]

    async def bench(ctx) -> None:
        got, i, inside, cycles = [], 0, 0, 0
        while len(got) < len(sent):
            offering = i < len(sent) and rng.random() < 0.7
            ctx.set(dut.inp.valid, offering)
            ctx.set(dut.inp.payload, sent[i] if offering else rng.randrange(1 << 16))
            ready = rng.random() < 0.6
            ctx.set(dut.out.ready, ready)
            assert ctx.get(dut.level) == inside
            assert ctx.get(dut.inp.ready) == (inside < 2)
            assert ctx.get(dut.out.valid) == (inside > 0)
            if kind is StreamSlice:
                assert ctx.get(dut.ready_copies) == ((1 << parts) - 1 if inside < 2 else 0)
            took = offering and ctx.get(dut.inp.ready)
            gave = ready and ctx.get(dut.out.valid)
            if gave:
                got.append(ctx.get(dut.out.payload))
            await ctx.tick()
            i += took
            inside += took - gave
            cycles += 1
            assert cycles < 10 * len(sent)
        assert got == sent

    _simulate(dut, bench)


def test_pointer_slice_passes_an_entry_a_cycle() -> None:
    """Offered and taken every cycle, the slice passes one entry a cycle after the first
    one's cycle of latency."""
    dut = PointerSlice(8)

    async def bench(ctx) -> None:
        ctx.set(dut.out.ready, 1)
        ctx.set(dut.inp.valid, 1)
        got = []
        for value in range(40):
            ctx.set(dut.inp.payload, value)
            assert ctx.get(dut.inp.ready)
            if ctx.get(dut.out.valid):
                got.append(ctx.get(dut.out.payload))
            await ctx.tick()
        assert got == list(range(39))

    _simulate(dut, bench)


@pytest.mark.parametrize("offer, take", [(0.6, 0.5), (0.9, 0.2), (1.0, 1.0)])
def test_sliced_fifo_keeps_order_level_and_rate(offer: float, take: float) -> None:
    dut = SlicedFIFO(width=12, depth=5)
    rng = random.Random(int(offer * 10 + take * 100))
    sent = [rng.randrange(1 << 12) for _ in range(300)]

    async def bench(ctx) -> None:
        got, i, inside, cycles = [], 0, 0, 0
        while len(got) < len(sent):
            assert ctx.get(dut.level) == inside
            assert inside <= dut.depth + 2
            offering = i < len(sent) and rng.random() < offer
            ctx.set(dut.w_en, offering)
            ctx.set(dut.w_data, sent[i] if offering else rng.randrange(1 << 12))
            reading = rng.random() < take
            ctx.set(dut.r_en, reading)
            wrote = offering and ctx.get(dut.w_rdy)
            read = reading and ctx.get(dut.r_rdy)
            if read:
                got.append(ctx.get(dut.r_data))
            await ctx.tick()
            i += wrote
            inside += wrote - read
            cycles += 1
        assert got == sent
        if offer == take == 1.0:           # a word a cycle after the first's latency
            assert cycles <= len(sent) + 3

    _simulate(dut, bench)


def test_parted_fifo_is_one_fifo() -> None:
    """Beside amaranth's own ``SyncFIFOBuffered`` on the same stimulus: the same flags,
    level and data every cycle, and the entries in order."""
    m = Module()
    m.submodules.dut = dut = PartedFIFO(width=16, depth=5, parts=3)
    m.submodules.ref = ref = fifo.SyncFIFOBuffered(width=16, depth=5)
    w_en, w_data, r_en = Signal(), Signal(16), Signal()
    for f in (dut, ref):
        m.d.comb += [f.w_en.eq(w_en & f.w_rdy), f.w_data.eq(w_data), f.r_en.eq(r_en)]
    rng = random.Random(7)
    sent = [rng.randrange(1 << 16) for _ in range(300)]

    async def bench(ctx) -> None:
        got, i, cycles = [], 0, 0
        while len(got) < len(sent):
            for name in ("w_rdy", "r_rdy", "level"):
                assert ctx.get(getattr(dut, name)) == ctx.get(getattr(ref, name)), name
            offering = i < len(sent) and rng.random() < 0.6
            ctx.set(w_en, offering)
            ctx.set(w_data, sent[i] if offering else rng.randrange(1 << 16))
            read = rng.random() < 0.5
            ctx.set(r_en, read)
            if read and ctx.get(dut.r_rdy):
                assert ctx.get(dut.r_data) == ctx.get(ref.r_data)
                got.append(ctx.get(dut.r_data))
            i += offering and ctx.get(dut.w_rdy)
            await ctx.tick()
            cycles += 1
            assert cycles < 10 * len(sent)
        assert got == sent

    _simulate(m, bench)
