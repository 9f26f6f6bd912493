"""The timing-closure helpers (:mod:`accel.rtl.timing`) in Amaranth's simulator.

A kept register carries the ``keep`` attribute the FPGA flow honours; registered copies
are the value a cycle late; :class:`BeforeLast` holds ``count - 1`` and ``count - 2``
modulo its width; :class:`PassCount` counts a loop's passes down and flags the last;
``set_all`` writes every copy.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from accel.rtl.timing import BeforeLast, PassCount, kept, kept_copies, registered_copies, set_all


def _simulate(dut, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_kept_registers_carry_keep_and_their_names() -> None:
    flag = kept("flag", 3, init=5)
    copies = kept_copies("copy", 3)
    assert flag.attrs == {"keep": 1} and flag.init == 5 and len(flag) == 3
    assert [c.name for c in copies] == ["copy_0", "copy_1", "copy_2"]
    assert all(c.attrs == {"keep": 1} for c in copies)


def test_registered_copies_are_the_value_a_cycle_late() -> None:
    m = Module()
    value = Signal(4)
    copies = registered_copies(m, "value", value, 2)
    inputs = [3, 9, 0, 15, 7]

    async def bench(ctx) -> None:
        previous = 0                                # the registers' reset value
        for x in inputs:
            ctx.set(value, x)
            assert [ctx.get(c) for c in copies] == [previous, previous]
            await ctx.tick()
            previous = x
        assert [ctx.get(c) for c in copies] == [inputs[-1]] * 2

    _simulate(m, bench)


def test_before_last_holds_count_less_one_and_two() -> None:
    m = Module()
    count = Signal(6)
    bounds = BeforeLast("n", 6)
    m.d.sync += bounds.take(count)
    assert (bounds.last.name, bounds.before.name) == ("n_m1", "n_m2")

    async def bench(ctx) -> None:
        # 1 and 0 wrap around the 6-bit registers: 1 - 2 = -1 = 63, 0 - 1 = 63, 0 - 2 = 62
        for n, last, before in ((5, 4, 3), (1, 0, 63), (0, 63, 62), (32, 31, 30)):
            ctx.set(count, n)
            await ctx.tick()
            assert (ctx.get(bounds.last), ctx.get(bounds.before)) == (last, before)

    _simulate(m, bench)


def test_set_all_writes_every_copy() -> None:
    m = Module()
    go = Signal()
    copies = kept_copies("flag", 3)
    with m.If(go):
        m.d.sync += set_all(copies, 1)

    async def bench(ctx) -> None:
        await ctx.tick()
        assert [ctx.get(c) for c in copies] == [0, 0, 0]
        ctx.set(go, 1)
        await ctx.tick()
        assert [ctx.get(c) for c in copies] == [1, 1, 1]

    _simulate(m, bench)


def test_pass_count_flags_the_last_pass_of_every_loop() -> None:
    """A loop of ``total`` passes, run twice (first, then a restart) for totals 1, 2 and 5:
    each pass sees the passes left after it, and ``last`` on the final one only."""
    m = Module()
    total, step, begin, again = Signal(8), Signal(), Signal(), Signal()
    loop = PassCount(m, "loop", total, 8)
    with m.If(begin):
        loop.first(m)
    with m.Elif(again):
        loop.restart(m)
    with m.Elif(step):
        loop.next(m)

    async def bench(ctx) -> None:
        for n in (1, 2, 5):
            ctx.set(total, n)
            await ctx.tick()                    # ``total`` held a cycle before a restart
            for start in (begin, again):
                ctx.set(start, 1)
                await ctx.tick()
                ctx.set(start, 0)
                seen = []
                for _ in range(n):
                    seen.append((ctx.get(loop.left), ctx.get(loop.last)))
                    ctx.set(step, 1)
                    await ctx.tick()
                    ctx.set(step, 0)
                assert seen == [(n - 1 - i, int(i == n - 1)) for i in range(n)], (n, start)

    _simulate(m, bench)
