"""The RTL PDP (:class:`accel.rtl.pdp.Pdp`) in Amaranth's simulator against the cmodel.

Random operations (max, min, average with padding values and reciprocals, every kernel
and stride within small cubes, strided memory, split-width slices) run on the component
with its AXI ports served by a Python memory that stalls at random on every channel
(:mod:`tests.accel.rtl.axi_model`); the
bytes it writes must be the bytes :meth:`accel.cmod.pdp.PdpPlan.execute` writes into the
same memory.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel.cmod.dram import Dram
from accel.cmod.pdp import AVERAGE, MAX, MIN, PAD_VALUE_BITS, PdpPlan
from accel.config import get_preset
from accel.rtl.pdp import Pdp
from tests.accel.rtl.axi_model import serve_axi

HW = get_preset("nv_small")
ATOM = HW.atom_size
SRC, DST = 0x10000, 0x80000
MEMORY = 0x100000


def _recip(n: int) -> int:
    """The 16.16 reciprocal the compiler programs for a window side of ``n``."""
    return round((1 << 16) / n)


def _random_op(rng: random.Random) -> dict:
    """A random valid PDP operation: sizes, window, padding, strides and split slices."""
    method = rng.choice((AVERAGE, MAX, MIN))
    kh, kw = rng.randint(1, 8), rng.randint(1, 8)
    sh, sw = rng.randint(1, 4), rng.randint(1, 4)
    pt, pl = rng.randint(0, min(kh - 1, 3)), rng.randint(0, min(kw - 1, 3))
    h, w = rng.randint(max(1, kh - pt), 9), rng.randint(max(1, kw - pl), 12)
    oh = (h + pt - kh) // sh + 1 + rng.randint(0, 1)         # some windows past the cube
    ow = (w + pl - kw) // sw + 1 + rng.randint(0, 1)
    c = rng.randint(1, 3 * ATOM)
    line = w * ATOM + ATOM * rng.randint(0, 2)
    surf = h * line + ATOM * rng.randint(0, 3)
    dline = ow * ATOM + ATOM * rng.randint(0, 2)
    dsurf = oh * dline + ATOM * rng.randint(0, 2)
    splits = [(0, w, pl, 0, ow)]
    widths = None
    overlap = kw - sw
    if ow >= 3 and rng.random() < 0.4 and overlap >= 0:        # split-width: 2 or 3 slices
        n = rng.randint(2, min(3, ow))
        out_mid = max(1, ow // n)
        out_first, out_last = out_mid, ow - out_mid * (n - 1)
        in_first = (out_first - 1) * sw + kw - pl
        in_mid = out_mid * sw
        in_last = w - in_first - (n - 2) * in_mid
        if in_first > 0 and in_last > 0 and in_first - overlap >= 0:
            splits = [(0, in_first, pl, 0, out_first)]
            for i in range(1, n):
                last = i == n - 1
                splits.append((in_first + (i - 1) * in_mid - overlap,
                               (in_last if last else in_mid) + overlap, 0,
                               out_first + (i - 1) * out_mid, out_last if last else out_mid))
            if all(a >= 0 and b > 0 and a + b <= w for a, b, *_ in splits):
                widths = (in_first, in_mid, in_last, out_first, out_mid, out_last)
            else:
                splits = [(0, w, pl, 0, ow)]
    pad_values = [0] + [rng.randint(-(1 << (b - 1)), (1 << (b - 1)) - 1)
                        for b in PAD_VALUE_BITS]
    return dict(c=c, h=h, w=w, oh=oh, ow=ow, method=method, kernel=(kh, kw),
                stride=(sh, sw), pad=(pt, pl), src=(SRC, line, surf), dst=(DST, dline, dsurf),
                recip=(_recip(kh), _recip(kw)) if rng.random() < 0.8
                else (rng.randrange(1 << 17), rng.randrange(1 << 17)),
                pad_values=pad_values, splits=splits, widths=widths)


def _plan(op: dict) -> PdpPlan:
    return PdpPlan(c=op["c"], h=op["h"], w=op["w"], oh=op["oh"], ow=op["ow"],
                   c_pad=-(-op["c"] // ATOM) * ATOM, src=op["src"], method=op["method"],
                   kernel=op["kernel"], stride=op["stride"], pad_top=op["pad"][0],
                   recip=op["recip"], splits=tuple(op["splits"]),
                   pad_values=np.array(op["pad_values"], np.int64), dst=op["dst"], cycles=0)


def _config(dut: Pdp, op: dict) -> list:
    """The component's config fields for ``op``: ``(field, value)`` pairs."""
    (kh, kw), (sh, sw), (pt, pl) = op["kernel"], op["stride"], op["pad"]
    w = op["widths"] or (op["w"],) * 3 + (op["ow"],) * 3
    cfg = dut.cfg
    values = dict(surfaces=-(-op["c"] // ATOM), h=op["h"], w=op["w"], out_h=op["oh"],
                  out_w=op["ow"], method=op["method"], kernel_w=kw, kernel_h=kh, stride_w=sw,
                  stride_h=sh, pad_left=pl, pad_top=pt, recip_h=op["recip"][0],
                  recip_w=op["recip"][1], splits_m1=len(op["splits"]) - 1,
                  in_first=w[0], in_mid=w[1], in_last=w[2], out_first=w[3], out_mid=w[4],
                  out_last=w[5], src=op["src"][0], src_line=op["src"][1],
                  src_surf=op["src"][2], dst=op["dst"][0], dst_line=op["dst"][1],
                  dst_surf=op["dst"][2])
    pairs = [(getattr(cfg, name), v) for name, v in values.items()]
    return pairs + [(cfg.pad_values[i], v) for i, v in enumerate(op["pad_values"])]


def _simulate(op: dict, memory: bytearray, rng: random.Random) -> int:
    """Run ``op`` on the component over ``memory`` (changed in place); returns cycles."""
    dut = Pdp(HW)

    def configure(ctx):
        for signal, value in _config(dut, op):
            ctx.set(signal, value)

    cycles: list[int] = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(serve_axi(dut, memory, rng, cycles, configure))
    sim.run()
    return cycles[0]


@pytest.mark.parametrize("seed", range(40))
def test_random_operations_write_the_cmodels_bytes(seed: int) -> None:
    rng = random.Random(seed)
    op = _random_op(rng)
    data = np.random.default_rng(seed).integers(0, 256, MEMORY, dtype=np.uint8)
    dram = Dram()
    dram.map(0, MEMORY)
    dram.write(0, data)
    _plan(op).execute(dram, HW)
    want = dram.read(0, MEMORY)
    memory = bytearray(data.tobytes())
    _simulate(op, memory, rng)
    got = np.frombuffer(bytes(memory), np.uint8)
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, (op, f"{diff.size} bytes differ, first at {int(diff[0]):#x}: "
                                f"RTL {got[diff[0]]}, cmodel {want[diff[0]]}")
