"""cocotb testbench of the RTL CACC accumulator (``accel/rtl/cacc.py``).

Stripes of output points are accumulated in NVDLA's order: for every (channel
group, kernel tap) pair, one MAC-array result per point of the stripe, so the
points' sums grow side by side; the first round starts each entry and the
last round sends it out.  Random stripe sizes, sequence lengths, gaps on the
input and stalls on the output; the scoreboard is the exact sum saturated to
34 bits (:func:`accel.cmod.cacc.accumulate`).
"""

from __future__ import annotations

import json
import os
from collections import deque

import cocotb
import numpy as np
from cmac_tb import pack
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from accel.cmod.cacc import accumulate
from accel.config import HwConfig
from accel.rtl.cacc import PsumLayout
from accel.rtl.postproc import ACC_BITS

CLOCK_NS = 10
POINTS = 16
STRIPES = 40


@cocotb.test()
async def random_stripes(dut) -> None:
    cfg = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    lanes, bits = cfg.atomic_k, cfg.mac_result_bits
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    layout = PsumLayout(cfg, POINTS)
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    dut.psum__valid.value = 0
    dut.sum__ready.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    beats, expected = [], deque()
    for _ in range(STRIPES):
        points = int(rng.integers(1, POINTS + 1))
        rounds = int(rng.integers(1, 24))
        lim = 1 << (bits - 1)
        psums = rng.integers(-lim, lim, (rounds, points, lanes))
        if rng.random() < 0.3:                 # the extremes of the MAC array's range
            psums = np.where(rng.random(psums.shape) < 0.5, -lim, lim - 1)
        base = int(rng.integers(0, POINTS - points + 1))
        for r in range(rounds):
            for p in range(points):
                beats.append({"data": psums[r, p], "point": base + p, "first": int(r == 0),
                              "last": int(r == rounds - 1)})
        for p in range(points):
            expected.append(accumulate(psums[:, p].sum(axis=0)))
    total, checked, stalled, sent = len(expected), 0, 0, 0
    while expected:
        if sent < len(beats) and rng.random() < 0.85:
            dut.psum__payload.value = pack(layout, beats[sent])
            dut.psum__valid.value = 1
        else:
            dut.psum__valid.value = 0
        ready = rng.random() < 0.6
        dut.sum__ready.value = int(ready)
        await ReadOnly()
        took = dut.psum__valid.value == 1 and dut.psum__ready.value == 1
        if dut.sum__valid.value == 1:
            if ready:
                raw = int(dut.sum__payload.value)
                got = [(raw >> (ACC_BITS * k)) & ((1 << ACC_BITS) - 1) for k in range(lanes)]
                got = [v - (1 << ACC_BITS) if v >> (ACC_BITS - 1) else v for v in got]
                want = expected.popleft()
                assert got == [int(v) for v in want], f"sum {checked}: {got} != {list(want)}"
                checked += 1
            else:
                stalled += 1
        await RisingEdge(dut.clk)
        if took:
            sent += 1
    assert checked == total and sent == len(beats)
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"config": cfg.name, "stripes": STRIPES, "vectors": checked,
                       "psums": len(beats), "stalled_cycles": stalled,
                       "sim_time_ns": get_sim_time("ns"), "clock_ns": CLOCK_NS}, f)
