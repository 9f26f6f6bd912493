"""The RTL CDP (:class:`accel.rtl.cdp.Cdp`) in Amaranth's simulator against the cmodel.

Random CDP operations are programmed as register values and LUT contents: local sizes
3-9 or the square sum bypassed, the multiply on or bypassed, random input and output
converters, both tables filled at random, the LE table linear or exponential, starts,
ends, index selects and offsets, under/overflow slopes with shifts of both signs and
every priority; strided cubes of 1-3 surfaces.  A share of them is the exact-table
program NVIDIA's ``cdp_8x8x32_lrn3`` traces use.  The cmodel runs them from its registers
(:class:`accel.cmod.dla.Dla`); the RTL unit takes its configuration through the engine's
register decode (:func:`accel.rtl.cdp.config_from_registers`) and its tables through the
same ``S_LUT_ACCESS_*`` writes, then runs with every AXI channel stalling at random.  The
bytes it writes must be the cmodel's.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel.cmod.dla import Dla
from accel.cmod.lut import LE_ENTRIES, LO_ENTRIES
from accel.config import get_preset
from accel.regs import lookup
from accel.rtl.cdp import Cdp, config_from_registers
from tests.accel.rtl.axi_model import serve_axi
from tests.accel.rtl.registers import RegisterTop, reg

HW = get_preset("nv_small")
ATOM = HW.atom_size
SRC, DST = 0x10000, 0x40000
MEMORY = 0x80000
CDP, RDMA = "NVDLA_CDP", "NVDLA_CDP_RDMA"




def _geometry(rng: random.Random) -> list[tuple[str, int]]:
    c, h, w = rng.randint(1, 4 * ATOM), rng.randint(1, 3), rng.randint(1, 6)
    line = w * ATOM + ATOM * rng.randint(0, 2)
    surf = h * line + ATOM * rng.randint(0, 2)
    dline = w * ATOM + ATOM * rng.randint(0, 1)
    dsurf = h * dline + ATOM * rng.randint(0, 1)
    return [reg(f"{RDMA}.D_DATA_CUBE_WIDTH", WIDTH=w - 1),
            reg(f"{RDMA}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1),
            reg(f"{RDMA}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1),
            reg(f"{RDMA}.D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=SRC),
            reg(f"{RDMA}.D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line),
            reg(f"{RDMA}.D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
            reg(f"{RDMA}.D_DATA_FORMAT", INPUT_DATA=0),
            reg(f"{CDP}.D_DATA_FORMAT", INPUT_DATA_TYPE=0),
            reg(f"{CDP}.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=DST),
            reg(f"{CDP}.D_DST_LINE_STRIDE", DST_LINE_STRIDE=dline),
            reg(f"{CDP}.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=dsurf)]


def _exact_table(rng: random.Random) -> tuple[list[tuple[str, int]], list[int], list[int]]:
    """The int8 -> int8 table program (SQSUM and MUL bypassed, offset -128, LO linear
    from 0 to 256): a random table of 256 outputs."""
    regs = [reg(f"{CDP}.D_FUNC_BYPASS", SQSUM_BYPASS=1, MUL_BYPASS=1),
            reg(f"{CDP}.D_DATIN_OFFSET", DATIN_OFFSET=0xFF80),
            reg(f"{CDP}.D_DATIN_SCALE", DATIN_SCALE=1),
            reg(f"{CDP}.D_DATOUT_SCALE", DATOUT_SCALE=1),
            reg(f"{CDP}.S_LUT_CFG", LUT_LE_FUNCTION=1, LUT_HYBRID_PRIORITY=1,
                 LUT_UFLOW_PRIORITY=1, LUT_OFLOW_PRIORITY=1),
            reg(f"{CDP}.S_LUT_LO_END_LOW", LUT_LO_END_LOW=256),
            reg(f"{CDP}.S_LUT_LE_END_LOW", LUT_LE_END_LOW=64)]
    lo = [rng.randint(-128, 127) for _ in range(LO_ENTRIES)]
    return regs, [0] * LE_ENTRIES, lo


def _random_lut(rng: random.Random, wild: bool = False
                ) -> tuple[list[tuple[str, int]], list[int], list[int]]:
    """Random converters, LRN size, bypasses, tables and table fields.  Unless ``wild``,
    the fields are drawn around the values the operation meets (the tables' starts and
    index selects around the converted lanes or their square sums, the output converter's
    shift around the product's magnitude), so that most lanes interpolate inside a table
    and the outputs spread over int8; ``wild`` draws them from the fields' whole ranges
    (mostly under/overflows and saturated outputs)."""
    sqsum, mul = rng.randint(0, 1), rng.randint(0, 1)
    n = rng.randint(0, 3)
    scale = rng.choice((1, rng.randint(-3, 3) or 1)) if not wild else rng.randrange(1 << 16)
    in_shift = 0 if not wild else rng.randint(0, 31)
    # the converted lanes stay within about +-256 (sat9); their square sums within
    # (2n + 3) * 2**16
    low, high = (-256, 256) if sqsum else (0, (2 * n + 3) << 16)

    def table(prefix: str, entries: int, select: int) -> list[tuple[str, int]]:
        if wild:
            start = rng.randint(-400, 3000)
            end = start + rng.randint(1, 40000)
        else:
            start = rng.randint(low - (high - low) // 8, (low + high) // 2)
            end = start + (entries << select if select >= 0 else entries >> -select)
        out = []
        for end_name, v in (("START", start), ("END", end)):
            out += [reg(f"{CDP}.S_LUT_{prefix}_{end_name}_LOW",
                         **{f"LUT_{prefix}_{end_name}_LOW": v & 0xFFFFFFFF}),
                    reg(f"{CDP}.S_LUT_{prefix}_{end_name}_HIGH",
                         **{f"LUT_{prefix}_{end_name}_HIGH": (v >> 32) & 0x3F})]
        out += [reg(f"{CDP}.S_LUT_{prefix}_SLOPE_SCALE",
                     **{f"LUT_{prefix}_SLOPE_UFLOW_SCALE": rng.randint(-(1 << 15), 1 << 15),
                        f"LUT_{prefix}_SLOPE_OFLOW_SCALE": rng.randint(-(1 << 15), 1 << 15)}),
                reg(f"{CDP}.S_LUT_{prefix}_SLOPE_SHIFT",
                     **{f"LUT_{prefix}_SLOPE_UFLOW_SHIFT": rng.randint(-16, 15),
                        f"LUT_{prefix}_SLOPE_OFLOW_SHIFT": rng.randint(-16, 15)})]
        return out

    span = (high - low).bit_length()
    le_select = rng.randint(-4, 14) if wild else max(span - 6 + rng.randint(-2, 1), -3)
    lo_select = rng.randint(-4, 12) if wild else max(span - 8 + rng.randint(-2, 1), -3)
    le_offset = rng.randint(-8, 12) if wild else rng.randint(-4, max(span - 12, -3))
    magnitude = 15 + (0 if mul else 8)         # bits of the product before the converter
    regs = [reg(f"{CDP}.D_FUNC_BYPASS", SQSUM_BYPASS=sqsum, MUL_BYPASS=mul),
            reg(f"{CDP}.D_LRN_CFG", NORMALZ_LEN=n),
            # (the high byte of the input offset is not used: random)
            reg(f"{CDP}.D_DATIN_OFFSET", DATIN_OFFSET=rng.randrange(1 << 16)),
            reg(f"{CDP}.D_DATIN_SCALE", DATIN_SCALE=scale & 0xFFFF),
            reg(f"{CDP}.D_DATIN_SHIFTER", DATIN_SHIFTER=in_shift),
            reg(f"{CDP}.D_DATOUT_OFFSET", DATOUT_OFFSET=(
                rng.randrange(1 << 32) if wild else rng.randint(-3000, 3000)) & 0xFFFFFFFF),
            reg(f"{CDP}.D_DATOUT_SCALE", DATOUT_SCALE=(
                rng.randrange(1 << 16) if wild else rng.randint(-4, 4) or 1) & 0xFFFF),
            reg(f"{CDP}.D_DATOUT_SHIFTER", DATOUT_SHIFTER=(
                rng.randint(0, 63) if wild else magnitude - 7 + rng.randint(-1, 2))),
            reg(f"{CDP}.S_LUT_CFG", LUT_LE_FUNCTION=rng.randint(0, 1),
                 LUT_UFLOW_PRIORITY=rng.randint(0, 1), LUT_OFLOW_PRIORITY=rng.randint(0, 1),
                 LUT_HYBRID_PRIORITY=rng.randint(0, 1)),
            reg(f"{CDP}.S_LUT_INFO", LUT_LE_INDEX_OFFSET=le_offset & 0xFF,
                 LUT_LE_INDEX_SELECT=le_select & 0xFF, LUT_LO_INDEX_SELECT=lo_select & 0xFF)]
    regs += table("LE", 64, le_select) + table("LO", 256, lo_select)
    le = [rng.randint(-(1 << 15), (1 << 15) - 1) for _ in range(LE_ENTRIES)]
    lo = [rng.randint(-(1 << 15), (1 << 15) - 1) for _ in range(LO_ENTRIES)]
    return regs, le, lo


def _lut_writes(le: list[int], lo: list[int]) -> list[tuple[str, int]]:
    """``S_LUT_ACCESS_*`` writes filling both tables."""
    writes = []
    for table, entries in ((0, le), (1, lo)):
        writes.append(reg(f"{CDP}.S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table,
                           LUT_ACCESS_TYPE=1))
        writes += [(lookup(f"{CDP}.S_LUT_ACCESS_DATA").symbol, v & 0xFFFF) for v in entries]
    return writes


def _bench(dut: Cdp, writes: list[tuple[str, int]], memory: bytearray,
           rng: random.Random, cycles: list):
    """The LUT's writes through the unit's access strobes, then the operation."""
    serve = serve_axi(dut, memory, rng, cycles)
    cfg_symbol = lookup(f"{CDP}.S_LUT_ACCESS_CFG").symbol

    async def bench(ctx):
        for symbol, value in writes:
            is_cfg = symbol == cfg_symbol
            ctx.set(dut.lut_cfg, is_cfg)
            ctx.set(dut.lut_data, not is_cfg)
            ctx.set(dut.lut_cfg_value if is_cfg else dut.lut_data_value, value)
            await ctx.tick()
        ctx.set(dut.lut_cfg, 0)
        ctx.set(dut.lut_data, 0)
        await serve(ctx)
    return bench


def run_both(regs: list[tuple[str, int]], le: list[int], lo: list[int], seed: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input memory, cmodel's memory, RTL's memory)`` after the operation."""
    rng = random.Random(seed)
    data = np.random.default_rng(seed).integers(0, 256, MEMORY, dtype=np.uint8)
    writes = _lut_writes(le, lo)
    dla = Dla(HW)
    dla.dram.map(0, MEMORY)
    dla.dram.write(0, data)
    for symbol, value in writes + regs:
        dla.write_reg(symbol, value)
    dla.write_reg(f"{RDMA}.D_OP_ENABLE", 1)
    dla.write_reg(f"{CDP}.D_OP_ENABLE", 1)
    assert dla.stats and dla.stats[-1].unit == "CDP", "the cmodel did not run the op"
    want = dla.dram.read(0, MEMORY)
    top = RegisterTop(Cdp(HW), dict(regs), lambda field: config_from_registers(field, HW))
    memory = bytearray(data.tobytes())
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(_bench(top.dut, writes, memory, rng, []))
    sim.run()
    return data, want, np.frombuffer(bytes(memory), np.uint8)


@pytest.mark.parametrize("seed", range(24))
def test_random_operations_write_the_cmodels_bytes(seed: int) -> None:
    rng = random.Random(seed)
    kind = seed % 4             # the exact table, the fields drawn around the data, wild
    regs, le, lo = (_exact_table(rng) if kind == 0 else _random_lut(rng, wild=kind == 3))
    regs = _geometry(rng) + regs
    data, want, got = run_both(regs, le, lo, seed)
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, (seed, f"{diff.size} bytes differ, first at {int(diff[0]):#x}: "
                                  f"RTL {got[diff[0]]}, cmodel {want[diff[0]]}")
    assert np.any(want != data), "the operation wrote nothing"


def test_an_exponential_underflow_extrapolates_from_start_plus_two_to_the_offset() -> None:
    """LE exponential with index offset 0: a value below the table extrapolates from
    ``start + 2**0`` (NVDLA's cmod), one lane in two of a slope of 1 rounding the other
    way if the engine left the 1 out.  The lanes are the int8 input itself (both bypasses,
    no conversion); both tables underflow and the priority picks LE."""
    regs = [reg(f"{CDP}.D_FUNC_BYPASS", SQSUM_BYPASS=1, MUL_BYPASS=1),
            reg(f"{CDP}.D_DATIN_SCALE", DATIN_SCALE=1),
            reg(f"{CDP}.D_DATOUT_SCALE", DATOUT_SCALE=1),
            reg(f"{CDP}.D_DATOUT_SHIFTER", DATOUT_SHIFTER=1),
            reg(f"{CDP}.S_LUT_CFG", LUT_LE_FUNCTION=0),            # exponential, LE first
            reg(f"{CDP}.S_LUT_INFO", LUT_LE_INDEX_OFFSET=0),
            reg(f"{CDP}.S_LUT_LE_START_LOW", LUT_LE_START_LOW=200),
            reg(f"{CDP}.S_LUT_LE_END_LOW", LUT_LE_END_LOW=1000),
            reg(f"{CDP}.S_LUT_LO_START_LOW", LUT_LO_START_LOW=200),
            reg(f"{CDP}.S_LUT_LO_END_LOW", LUT_LO_END_LOW=1000),
            reg(f"{CDP}.S_LUT_LE_SLOPE_SCALE", LUT_LE_SLOPE_UFLOW_SCALE=1)]
    regs = _geometry(random.Random(7)) + regs
    data, want, got = run_both(regs, [0] * LE_ENTRIES, [0] * LO_ENTRIES, seed=7)
    assert np.any(want != data), "the operation wrote nothing"
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, f"{diff.size} bytes differ, first at {int(diff[0]):#x}"
