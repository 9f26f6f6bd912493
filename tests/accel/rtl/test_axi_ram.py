"""The board RAM (:class:`accel.rtl.uart.AxiRam`) in Amaranth's simulator, against a dict.

The full engine runs on it in tests/rtl (bridge and block-RAM trace tests); here its two
ports are driven directly: the bridge port's words across every bank, its read data
held after ``done`` (the bridge takes the byte a cycle later), AXI bursts read back with
random ``rready`` back-pressure, bridge requests between AXI traffic.
"""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from accel.rtl.axi import axi4_signature
from accel.rtl.uart import AxiRam

WORD_BYTES = 8


def _run(dut: AxiRam, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


async def _port(ctx, dut: AxiRam, addr: int, value: int | None = None,
                strb: int = 0xFF) -> tuple[int, int]:
    """One bridge request; returns (cycles from request to done, the read data)."""
    ctx.set(dut.port.valid, 1)
    ctx.set(dut.port.write, value is not None)
    ctx.set(dut.port.addr, addr)
    ctx.set(dut.port.wdata, value or 0)
    ctx.set(dut.port.strb, strb)
    cycles = 0
    while True:
        await ctx.tick()
        cycles += 1
        if ctx.get(dut.done):
            break
    ctx.set(dut.port.valid, 0)
    data = ctx.get(dut.rdata)
    for _ in range(3):                  # the data stays until the next request
        await ctx.tick()
        assert ctx.get(dut.rdata) == data
    return cycles, data


async def _axi_write(ctx, axi, word: int, value: int) -> None:
    """One single-beat AXI write of a whole word, address and data together."""
    ctx.set(axi.awvalid, 1)
    ctx.set(axi.awaddr, word * WORD_BYTES)
    ctx.set(axi.wvalid, 1)
    ctx.set(axi.wdata, value)
    ctx.set(axi.wstrb, 0xFF)
    while not ctx.get(axi.awready):
        await ctx.tick()
    await ctx.tick()                    # the handshake
    ctx.set(axi.awvalid, 0)
    ctx.set(axi.wvalid, 0)


@pytest.mark.parametrize(("words", "banked"), [(512, True), (16384, True), (16384, False)])
def test_bridge_port_writes_and_reads_every_bank(words: int, banked: bool) -> None:
    """Every bank's ends and random words through the bridge port, each access
    :data:`AxiRam.PORT_LATENCY` cycles whether the RAM is split into banks (the board's)
    or one memory (the simulation tops')."""
    dut = AxiRam(axi4_signature(32, 8 * WORD_BYTES), words, WORD_BYTES, banked=banked)
    assert dut.banks == (max(1, words // AxiRam.BANK_WORDS) if banked else 1)
    rng = random.Random(words)
    # both ends of every bank, and random words
    addrs = sorted({b * dut.bank_words + o for b in range(dut.banks)
                    for o in (0, dut.bank_words - 1)} | {rng.randrange(words) for _ in range(20)})
    model: dict[int, int] = {}

    async def bench(ctx):
        for a in addrs:
            model[a] = rng.getrandbits(8 * WORD_BYTES)
            cycles, _ = await _port(ctx, dut, a, model[a])
            assert cycles == AxiRam.PORT_LATENCY        # granted the cycle it asks
        a = addrs[len(addrs) // 2]                      # a byte-strobed write
        await _port(ctx, dut, a, 0xAB << 16, strb=1 << 2)
        model[a] = (model[a] & ~(0xFF << 16)) | (0xAB << 16)
        for a in reversed(addrs):
            _, data = await _port(ctx, dut, a)
            assert data == model[a], f"word {a}: {data:#x}, wrote {model[a]:#x}"

    _run(dut, bench)


@pytest.mark.parametrize("banked", [True, False])
def test_axi_bursts_with_back_pressure_and_bridge_requests_between(banked: bool) -> None:
    words = 4 * AxiRam.BANK_WORDS
    dut = AxiRam(axi4_signature(32, 8 * WORD_BYTES), words, WORD_BYTES, banked=banked)
    rng = random.Random(7)
    # bursts that cross bank boundaries, and others at random
    bases = [b * AxiRam.BANK_WORDS - 5 for b in range(1, 4)]
    bases += [rng.randrange(words - 40) for _ in range(6)]
    model: dict[int, int] = {}

    async def bench(ctx):
        axi = dut.axi
        ctx.set(axi.bready, 1)
        for base in bases:
            for a in range(base, base + 24):
                model[a] = rng.getrandbits(8 * WORD_BYTES)
                await _axi_write(ctx, axi, a, model[a])
                for _ in range(rng.randrange(2)):
                    await ctx.tick()
        for base in bases:
            n = rng.randrange(1, 25)
            ctx.set(axi.arvalid, 1)
            ctx.set(axi.araddr, base * WORD_BYTES)
            ctx.set(axi.arlen, n - 1)
            while not ctx.get(axi.arready):
                await ctx.tick()
            await ctx.tick()
            ctx.set(axi.arvalid, 0)
            got, lasts = [], []
            while len(got) < n:
                ready = rng.random() < 0.7
                ctx.set(axi.rready, ready)
                if ready and ctx.get(axi.rvalid):
                    got.append(ctx.get(axi.rdata))
                    lasts.append(ctx.get(axi.rlast))
                await ctx.tick()
            ctx.set(axi.rready, 0)
            assert got == [model[a] for a in range(base, base + n)], f"burst at word {base}"
            assert lasts == [0] * (n - 1) + [1]
            # the bridge between bursts sees what the AXI side wrote
            _, data = await _port(ctx, dut, base)
            assert data == model[base]

    _run(dut, bench)


def test_back_to_back_bursts_stream_a_word_per_cycle() -> None:
    dut = AxiRam(axi4_signature(32, 8 * WORD_BYTES), 2 * AxiRam.BANK_WORDS, WORD_BYTES)

    async def bench(ctx):
        axi = dut.axi
        ctx.set(axi.rready, 1)
        ctx.set(axi.arlen, 15)
        ctx.set(axi.arvalid, 1)
        beats = first = cycle = 0
        bursts = 0
        while beats < 64:
            if bursts < 4 and ctx.get(axi.arready):
                ctx.set(axi.araddr, (AxiRam.BANK_WORDS - 32 + 16 * bursts) * WORD_BYTES)
                bursts += 1
            if ctx.get(axi.rvalid):
                first = first or cycle
                beats += 1
            await ctx.tick()
            cycle += 1
            if bursts == 4:
                ctx.set(axi.arvalid, 0)
        # 64 words after the first in 63 more cycles: no bubble between bursts or banks
        assert cycle - first == 64

    _run(dut, bench)


def test_bridge_requests_racing_axi_writes_lose_nothing() -> None:
    """The bridge and an AXI manager at once: AXI writes with random gaps while the bridge
    writes and reads other words.  The RAM takes one of them a cycle (the bridge's grant
    closes the write channels), so every word holds what its last writer put there."""
    words = 2 * AxiRam.BANK_WORDS
    dut = AxiRam(axi4_signature(32, 8 * WORD_BYTES), words, WORD_BYTES)
    rng = random.Random(11)
    axi_words = rng.sample(range(0, words, 2), 200)         # even words: AXI, odd: bridge
    bridge_words = rng.sample(range(1, words, 2), 40)
    model: dict[int, int] = {}
    written = {"axi": 0, "bridge": 0, "reads": 0, "checked": 0}

    async def axi_side(ctx):
        axi = dut.axi
        ctx.set(axi.bready, 1)
        for a in axi_words:
            model[a] = rng.getrandbits(8 * WORD_BYTES)
            await _axi_write(ctx, axi, a, model[a])
            written["axi"] += 1
            for _ in range(rng.choice((0, 0, 0, 1, 3))):     # the bridge's turns: the gaps
                await ctx.tick()

    async def bridge_side(ctx):
        for a in bridge_words:
            value = rng.getrandbits(8 * WORD_BYTES)
            await _port(ctx, dut, a, value)
            model[a] = value
            written["bridge"] += 1
            _, data = await _port(ctx, dut, a)
            assert data == value, f"bridge word {a}"
            written["reads"] += 1
        while written["axi"] < len(axi_words):
            await ctx.tick()
        for a in sorted(model):          # every word through the bridge, the AXI side idle
            _, data = await _port(ctx, dut, a)
            assert data == model[a], f"word {a}"
            written["checked"] += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_side)
    sim.add_testbench(bridge_side)
    sim.run()
    assert written == {"axi": 200, "bridge": 40, "reads": 40, "checked": 240}
