"""The RTL lookup (:class:`accel.rtl.cdp.LutLookup`) value by value against the cmodel's.

The CDP's random operations (``test_cdp.py``) reach the lookup through the converters and
the square sums, a few hundred values an operation.  Here the lookup runs alone, a value a
cycle, over every field at the edges of its range: starts and ends over all 38 bits, every
raw ``INDEX_SELECT`` (the cmodel widens bit 5 as a sign, shifts by the count mod 64 and
wraps at 64 bits), exponential index offsets up to 127 (an underflow subtracts
``2**offset`` in int64), slope shifts -16..15 and scales over int16, input values near
each table's start and end and over the whole 21-bit input.  The reference is
:func:`accel.cmod.lut.lookup_classes` on the cmodel's own decode of the same registers.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from accel.cmod.lut import LE_ENTRIES, LO_ENTRIES, LutRam, lookup_classes, lut_config
from accel.config import get_preset
from accel.regs import lookup
from accel.rtl.cdp import LUT_IN_BITS, CdpConfigLayout, LutLookup, config_from_registers
from tests.accel.rtl.registers import RegisterTop, reg

CDP = "NVDLA_CDP"
HW = get_preset("nv_small")
VALUES = 400


class _LookupTop(Elaboratable):
    """The lookup with its configuration in a CDP configuration's ``lut`` field, for
    :class:`RegisterTop`."""

    def __init__(self) -> None:
        self.cfg = Signal(CdpConfigLayout())
        self.lut = LutLookup(tag_bits=16)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.lut = self.lut
        m.d.comb += self.lut.cfg.eq(self.cfg.lut)
        return m


def _field(regs: dict[str, int], register: str, name: str | None = None) -> int:
    r = lookup(f"{CDP}.{register}")
    value = regs.get(r.symbol, r.reset)
    if name is None:
        return value
    f = r.field(name)
    return (value >> f.lsb) & (f.mask >> f.lsb)


def _random_registers(rng: random.Random, wild: bool) -> list[tuple[str, int]]:
    """``S_LUT_*`` values: ``wild`` over every field's whole range, else tables that the
    values below mostly hit (starts near 0, selects that span the input)."""
    regs = [reg(f"{CDP}.S_LUT_CFG", LUT_LE_FUNCTION=rng.randint(0, 1),
                 LUT_UFLOW_PRIORITY=rng.randint(0, 1), LUT_OFLOW_PRIORITY=rng.randint(0, 1),
                 LUT_HYBRID_PRIORITY=rng.randint(0, 1))]
    if wild:
        selects = [rng.randrange(256) for _ in range(2)]
        offset = rng.randrange(256)
    else:
        selects = [rng.randint(0, 14), rng.randint(0, 12)]
        selects = [s if rng.random() < 0.8 else (-rng.randint(1, 4)) & 0xFF for s in selects]
        offset = rng.randint(-4, 14) & 0xFF
    regs.append(reg(f"{CDP}.S_LUT_INFO", LUT_LE_INDEX_OFFSET=offset,
                    LUT_LE_INDEX_SELECT=selects[0], LUT_LO_INDEX_SELECT=selects[1]))
    for table in ("LE", "LO"):
        if wild:
            ends = [rng.randrange(1 << 38) if rng.random() < 0.3
                    else rng.randint(-(1 << 21), 1 << 21) for _ in range(2)]
        else:
            start = rng.randint(-(1 << 12), 1 << 12)
            ends = [start, start + rng.randint(1, 1 << 20)]
        for name, v in zip(("START", "END"), ends, strict=True):
            regs += [reg(f"{CDP}.S_LUT_{table}_{name}_LOW",
                         **{f"LUT_{table}_{name}_LOW": v & 0xFFFFFFFF}),
                     reg(f"{CDP}.S_LUT_{table}_{name}_HIGH",
                         **{f"LUT_{table}_{name}_HIGH": (v >> 32) & 0x3F})]
        regs += [reg(f"{CDP}.S_LUT_{table}_SLOPE_SCALE",
                     **{f"LUT_{table}_SLOPE_{flow}_SCALE": rng.randrange(1 << 16)
                        for flow in ("UFLOW", "OFLOW")}),
                 reg(f"{CDP}.S_LUT_{table}_SLOPE_SHIFT",
                     **{f"LUT_{table}_SLOPE_{flow}_SHIFT": rng.randrange(32)
                        for flow in ("UFLOW", "OFLOW")})]
    return regs


def _values(rng: random.Random, regs: dict[str, int]) -> list[int]:
    """Input values: around each table's start and end (their low 21 bits as signed),
    small ones, and any."""
    lo, hi = -(1 << (LUT_IN_BITS - 1)), (1 << (LUT_IN_BITS - 1)) - 1
    marks = [0]
    for table in ("LE", "LO"):
        for name in ("START", "END"):
            v = _field(regs, f"S_LUT_{table}_{name}_LOW")
            marks.append(((v + (1 << 20)) & ((1 << 21) - 1)) - (1 << 20))
    out = []
    for _ in range(VALUES):
        kind = rng.random()
        if kind < 0.5:
            v = rng.choice(marks) + rng.randint(-300, 300)
        elif kind < 0.7:
            v = rng.randint(-600, 600)
        else:
            v = rng.randint(lo, hi)
        out.append(min(max(v, lo), hi))
    return out


def _cmodel(regs: dict[str, int], le: list[int], lo: list[int], xs: list[int]) -> np.ndarray:
    ram = LutRam("CDP")
    for table, entries in ((0, le), (1, lo)):
        ram.access_cfg(table << 16 | 1 << 17)
        ram.access_data_block(entries)
    config = lut_config(lambda register, name=None: _field(regs, register, name))
    out, _ = lookup_classes(np.asarray(xs, np.int64), ram, config)
    return out


def _rtl(regs: dict[str, int], le: list[int], lo: list[int], xs: list[int]) -> list[int]:
    top = RegisterTop(_LookupTop(), regs, lambda field: config_from_registers(field, HW))
    lut = top.dut.lut
    got: list[int] = []

    async def bench(ctx):
        for table, entries in ((0, le), (1, lo)):
            ctx.set(lut.write_cfg, 1)
            ctx.set(lut.write_cfg_value, table << 16 | 1 << 17)
            await ctx.tick()
            ctx.set(lut.write_cfg, 0)
            ctx.set(lut.write_data, 1)
            for v in entries:
                ctx.set(lut.write_data_value, v & 0xFFFF)
                await ctx.tick()
            ctx.set(lut.write_data, 0)
        # a value a cycle, the tag its index; then until every value is out
        for i in range(len(xs) + LutLookup.LATENCY + 2):
            feeding = i < len(xs)
            ctx.set(lut.valid, feeding)
            ctx.set(lut.x, xs[i] if feeding else 0)
            ctx.set(lut.tag, i if feeding else 0)
            await ctx.tick()
            if ctx.get(lut.out_valid):
                assert ctx.get(lut.out_tag) == len(got), "values out of order"
                got.append(ctx.get(lut.out))
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("seed", range(16))
def test_lookups_match_the_cmodel_over_every_fields_range(seed: int) -> None:
    rng = random.Random(seed)
    regs = dict(_random_registers(rng, wild=seed % 2 == 1))
    le = [rng.randint(-(1 << 15), (1 << 15) - 1) for _ in range(LE_ENTRIES)]
    lo = [rng.randint(-(1 << 15), (1 << 15) - 1) for _ in range(LO_ENTRIES)]
    xs = _values(rng, regs)
    want = _cmodel(regs, le, lo, xs)
    got = _rtl(regs, le, lo, xs)
    assert len(got) == len(xs), f"{len(got)} of {len(xs)} values came out"
    bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert not bad, (f"{len(bad)} of {len(xs)} differ; first x={xs[bad[0]]}: "
                     f"RTL {got[bad[0]]}, cmodel {int(want[bad[0]])}")


def test_an_exponential_offset_of_63_wraps_the_underflow_like_int64() -> None:
    """LE exponential with index offset 63: an underflow extrapolates from
    ``start + 2**63``, and int64 arithmetic wraps ``2**63`` to ``-2**63``, so the
    distance is ``x - start + 2**63`` modulo ``2**64``.  Hand-worked, slope 1 and shift 0:
    for ``x < start`` that is below ``2**63``, a huge positive distance (the entry plus it
    saturates to 32767); for ``x == start`` it is ``2**63``, read back as ``-2**63``
    (-32768).  Both tables underflow and the priority picks LE."""
    regs = dict([reg(f"{CDP}.S_LUT_CFG", LUT_LE_FUNCTION=0, LUT_UFLOW_PRIORITY=0),
                 reg(f"{CDP}.S_LUT_INFO", LUT_LE_INDEX_OFFSET=63),
                 reg(f"{CDP}.S_LUT_LE_START_LOW", LUT_LE_START_LOW=100),
                 reg(f"{CDP}.S_LUT_LE_END_LOW", LUT_LE_END_LOW=1000),
                 reg(f"{CDP}.S_LUT_LO_START_LOW", LUT_LO_START_LOW=100),
                 reg(f"{CDP}.S_LUT_LO_END_LOW", LUT_LO_END_LOW=1000),
                 reg(f"{CDP}.S_LUT_LE_SLOPE_SCALE", LUT_LE_SLOPE_UFLOW_SCALE=1)])
    xs = [-5, 0, 50, 99, 100]
    got = _rtl(regs, [0] * LE_ENTRIES, [0] * LO_ENTRIES, xs)
    assert got == [32767, 32767, 32767, 32767, -32768]
