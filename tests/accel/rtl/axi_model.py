"""A memory on the AXI4 ports of an RTL unit in Amaranth's simulator, stalling at random.

:func:`serve_axi` makes a testbench that pulses the unit's ``start``, then answers its
``axi_read`` bursts from ``memory`` and writes its ``axi_write`` beats into it (single
beats of whole words, as the units write), each channel ready or valid on a random
share of the cycles, until the unit pulses ``done``.
"""

from __future__ import annotations

import random
from collections import deque

#: cycles a unit may take before the testbench gives up
BUDGET = 200_000


def serve_axi(dut, memory: bytearray, rng: random.Random, cycles: list, before=None):
    """A testbench for ``dut`` over ``memory`` (changed in place); appends the cycles from
    ``start`` to ``done`` to ``cycles``.  ``before(ctx)``, if given, runs first (to set
    the unit's configuration)."""
    rd, wr = dut.axi_read, dut.axi_write
    word = len(wr.wstrb)

    async def bench(ctx):
        if before is not None:
            before(ctx)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        bursts: deque = deque()
        beat = 0
        addrs: deque = deque()
        datas: deque = deque()
        responses = 0
        for cycle in range(BUDGET):
            ar_ready, r_valid = rng.random() < 0.7, bool(bursts) and rng.random() < 0.8
            aw_ready, w_ready = rng.random() < 0.7, rng.random() < 0.7
            b_valid = responses > 0 and rng.random() < 0.8
            ctx.set(rd.arready, ar_ready)
            ctx.set(wr.awready, aw_ready)
            ctx.set(wr.wready, w_ready)
            ctx.set(wr.bvalid, b_valid)
            ctx.set(wr.bresp, 0)
            if r_valid:
                addr, beats = bursts[0]
                at = addr + beat * word
                ctx.set(rd.rdata, int.from_bytes(memory[at:at + word], "little"))
                ctx.set(rd.rlast, beat == beats - 1)
                ctx.set(rd.rresp, 0)
            ctx.set(rd.rvalid, r_valid)
            # the handshakes of this edge
            if ar_ready and ctx.get(rd.arvalid):
                bursts.append((ctx.get(rd.araddr), ctx.get(rd.arlen) + 1))
            if r_valid and ctx.get(rd.rready):
                beat += 1
                if beat == bursts[0][1]:
                    bursts.popleft()
                    beat = 0
            if aw_ready and ctx.get(wr.awvalid):
                assert ctx.get(wr.awlen) == 0
                addrs.append(ctx.get(wr.awaddr))
            if w_ready and ctx.get(wr.wvalid):
                assert ctx.get(wr.wstrb) == (1 << word) - 1
                datas.append(ctx.get(wr.wdata))
            while addrs and datas:
                at = addrs.popleft()
                memory[at:at + word] = datas.popleft().to_bytes(word, "little")
                responses += 1
            if b_valid:
                responses -= 1
            await ctx.tick()
            if ctx.get(dut.done):
                cycles.append(cycle)
                assert not bursts and not addrs and not datas and responses == 0
                assert not ctx.get(dut.bus_error)
                for _ in range(8):          # and nothing more on the bus
                    await ctx.tick()
                    assert not ctx.get(rd.arvalid) and not ctx.get(wr.awvalid)
                assert not ctx.get(dut.busy)
                return
        raise AssertionError(f"the unit did not finish in {BUDGET} cycles")

    return bench
