"""CDP (LRN) programmed through the CSB against a hand-computed 3-channel case; with the
square sum bypassed, the speed layer's per-code datapath against the lane-by-lane one."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod import Dla, Dram
from accel.cmod.glb import status_bit
from accel.config import get_preset

SRC, DST = 0x1000, 0x2000


def _program(dla: Dla, x: list[int], **regs) -> None:
    dla.dram.map(SRC, 0x100)
    dla.dram.map(DST, 0x100)
    dla.dram.write(SRC, bytes(v & 0xFF for v in x))
    w = dla.write_reg
    w("NVDLA_CDP.S_LUT_CFG", 1)  # LE linear
    w("NVDLA_CDP.S_LUT_LE_END_LOW", 64)
    w("NVDLA_CDP.S_LUT_LO_END_LOW", 256)
    w("NVDLA_CDP.S_LUT_ACCESS_CFG", 1 << 17)  # write LE from entry 0: L[i] = i
    for i in range(65):
        w("NVDLA_CDP.S_LUT_ACCESS_DATA", i)
    base = {"D_DATA_FORMAT": 0, "D_DATIN_SCALE": 1, "D_DATOUT_SCALE": 1}
    for name, value in {**base, **regs}.items():
        w(f"NVDLA_CDP.{name}", value)
    w("NVDLA_CDP.D_DST_BASE_ADDR_LOW", DST)
    w("NVDLA_CDP.D_DST_LINE_STRIDE", 8)
    w("NVDLA_CDP.D_DST_SURFACE_STRIDE", 8)
    w("NVDLA_CDP_RDMA.D_DATA_FORMAT", 0)
    w("NVDLA_CDP_RDMA.D_DATA_CUBE_CHANNEL", len(x) - 1)
    w("NVDLA_CDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC)
    w("NVDLA_CDP_RDMA.D_SRC_LINE_STRIDE", 8)
    w("NVDLA_CDP_RDMA.D_SRC_SURFACE_STRIDE", 8)
    w("NVDLA_CDP_RDMA.D_OP_ENABLE", 1)
    w("NVDLA_CDP.D_OP_ENABLE", 1)


def test_lrn3_square_sum_lut_and_multiply():
    dla = Dla(get_preset("nv_small"), Dram())
    # lane 3 holds garbage: the hardware replaces lanes >= C with the input offset
    dla.dram.map(SRC, 0x100)
    dla.dram.write(SRC + 3, b"\x7f")
    _program(dla, [1, 2, 3])
    # squares 1 4 9; sums (0+1+4, 1+4+9, 4+9+0, 9+0+0, 0...) = 5 14 13 9 0 0 0 0
    # L(s) = s for 0 < s < 64, L(0) = L[0] = 0 (underflow); times v = 1 2 3 0 ...
    assert dla.dram.read(DST, 8).view(np.int8).tolist() == [5, 28, 39, 0, 0, 0, 0, 0]
    # LE and LO both cover 1..63: hybrid hits; the zero sums underflow both tables
    assert dla.read_reg("NVDLA_CDP.D_PERF_LUT_HYBRID") == 4
    assert dla.read_reg("NVDLA_CDP.D_PERF_LUT_UFLOW") == 4
    assert dla.glb.status & status_bit("CDP", 0)


@pytest.mark.parametrize("fast", [True, False])     # the speed layer computes it per code
def test_converters_offset_scale_shift_and_output_saturation(fast):
    dla = Dla(get_preset("nv_small"), Dram(), fast=fast)
    # v = (x - 1) * 3 >> 1 = 0, 3, 6 (padded lanes read int8(offset) = 1 -> 0);
    # square sum and multiply bypassed: y = L(v) = v (L(0) = L[0] = 0, an underflow)
    # out = (y - 2) * 100 >> 3 = -25, 12.5 -> 13, 50
    _program(dla, [1, 3, 5], D_DATIN_OFFSET=0xFF01, D_DATIN_SCALE=3, D_DATIN_SHIFTER=1,
             D_FUNC_BYPASS=3, D_DATOUT_OFFSET=2, D_DATOUT_SCALE=100, D_DATOUT_SHIFTER=3)
    assert dla.dram.read(DST, 8).view(np.int8).tolist() == [-25, 13, 50] + [-25] * 5
    assert dla.read_reg("NVDLA_CDP.D_OUT_SATURATION") == 0


@pytest.mark.parametrize("fast", [True, False])     # the speed layer computes it per code
def test_output_saturation_is_counted_on_every_lane(fast):
    dla = Dla(get_preset("nv_small"), Dram(), fast=fast)
    # scale 1000: -250 -> -128, 125, 500 -> 127; the 5 padded lanes also give -250
    _program(dla, [1, 3, 5], D_DATIN_OFFSET=1, D_DATIN_SCALE=3, D_DATIN_SHIFTER=1,
             D_FUNC_BYPASS=3, D_DATOUT_OFFSET=2, D_DATOUT_SCALE=1000, D_DATOUT_SHIFTER=3)
    assert dla.dram.read(DST, 3).view(np.int8).tolist() == [-128, 125, 127]
    assert dla.read_reg("NVDLA_CDP.D_OUT_SATURATION") == 7


@pytest.mark.parametrize("mul_bypass", [True, False])
def test_per_code_gives_the_lanes_bytes_and_counters(mul_bypass):
    """Random codes through a LUT with both tables, hits, hybrids, under- and overflows and
    saturating outputs: the fast model (per code) and the plain one (per lane) agree."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, 5).tolist()
    regs = dict(D_DATIN_OFFSET=0xFFF0, D_DATIN_SCALE=5, D_DATIN_SHIFTER=2,
                D_FUNC_BYPASS=1 | (2 if mul_bypass else 0), D_DATOUT_OFFSET=3,
                D_DATOUT_SCALE=7, D_DATOUT_SHIFTER=2)
    seen = []
    for fast in (True, False):
        dla = Dla(get_preset("nv_small"), Dram(), fast=fast)
        _program(dla, x, **regs)
        counters = [dla.read_reg(f"NVDLA_CDP.{r}") for r in (
            "D_OUT_SATURATION", "D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID",
            "D_PERF_LUT_LE_HIT", "D_PERF_LUT_LO_HIT")]
        seen.append((dla.dram.read(DST, 8).tobytes(), counters))
    assert seen[0] == seen[1]
    assert sum(seen[0][1][1:]) == 8          # every lane is counted once


def test_the_fast_model_keeps_a_code_table_while_registers_and_entries_hold():
    """The speed layer's table of 256 codes is derived again when a LUT entry changes (each
    op loads its table through the access port), and not while nothing does."""
    from accel.cmod import cdp

    x = [-100, -3, 0, 7, 90]
    regs = dict(D_DATIN_OFFSET=0xFFF0, D_DATIN_SCALE=5, D_DATIN_SHIFTER=2, D_FUNC_BYPASS=3,
                D_DATOUT_OFFSET=3, D_DATOUT_SCALE=7, D_DATOUT_SHIFTER=2)
    fast, plain = (Dla(get_preset("nv_small"), Dram(), fast=f) for f in (True, False))
    for dla in (fast, plain):
        _program(dla, x, **regs)
    cache = fast.fast.cdp_tables
    assert (cache.misses, cache.hits) == (1, 0)

    def again(dla: Dla, tables=None) -> bytes:
        """Group 0's op once more (enabled again: the consumer is group 1 now, so the
        enable alone starts nothing)."""
        dla.write_reg("NVDLA_CDP.D_OP_ENABLE", 1)
        units = [dla.regs[u].group(0) for u in ("NVDLA_CDP", "NVDLA_CDP_RDMA")]
        cdp.run(*units, dla.dram, dla.cfg, dla.luts["NVDLA_CDP"], per_code=tables is not None,
                tables=tables)
        return dla.dram.read(DST, 8).tobytes()

    first = fast.dram.read(DST, 8).tobytes()
    assert again(fast, fast.fast.cdp_table) == first and (cache.misses, cache.hits) == (1, 1)
    # LE entry 20 from 20 to -40: the entry of x = 0, v = (0 + 16) * 5 / 4
    for dla in (fast, plain):
        dla.write_reg("NVDLA_CDP.S_LUT_ACCESS_CFG", (1 << 17) | 20)
        dla.write_reg("NVDLA_CDP.S_LUT_ACCESS_DATA", -40 & 0xFFFF)
    changed = again(fast, fast.fast.cdp_table)
    assert (cache.misses, cache.hits) == (2, 1)
    assert changed == again(plain) and changed != first


def _run_cube(preset: str, fast: bool, c: int, h: int, w: int, in_place: bool,
              memory: bytes) -> tuple[bytes, list[int]]:
    """A ``c x h x w`` cube with gaps between lines and surfaces through a per-code CDP
    (square sum bypassed, a LUT with hits, hybrids, under- and overflows, saturating
    outputs): the whole memory after the op, and its counters."""
    dla = Dla(get_preset(preset), Dram(), fast=fast)
    atom = dla.cfg.atom_size
    line, surf = (w + 1) * atom, (h * (w + 1) + 2) * atom
    dla.dram.map(SRC, len(memory))
    dla.dram.write(SRC, memory)
    dst = SRC if in_place else SRC + len(memory) // 2
    wr = dla.write_reg
    wr("NVDLA_CDP.S_LUT_CFG", 1)
    wr("NVDLA_CDP.S_LUT_LE_END_LOW", 64)
    wr("NVDLA_CDP.S_LUT_LO_END_LOW", 256)
    wr("NVDLA_CDP.S_LUT_ACCESS_CFG", 1 << 17)
    for i in range(65):
        wr("NVDLA_CDP.S_LUT_ACCESS_DATA", (37 * i - 900) & 0xFFFF)
    regs = dict(D_DATA_FORMAT=0, D_DATIN_OFFSET=0xFFF0, D_DATIN_SCALE=5, D_DATIN_SHIFTER=2,
                D_FUNC_BYPASS=3, D_DATOUT_OFFSET=3, D_DATOUT_SCALE=7, D_DATOUT_SHIFTER=4,
                D_DST_BASE_ADDR_LOW=dst, D_DST_LINE_STRIDE=line, D_DST_SURFACE_STRIDE=surf)
    for name, value in regs.items():
        wr(f"NVDLA_CDP.{name}", value)
    for name, value in dict(D_DATA_FORMAT=0, D_DATA_CUBE_CHANNEL=c - 1,
                            D_DATA_CUBE_HEIGHT=h - 1, D_DATA_CUBE_WIDTH=w - 1,
                            D_SRC_BASE_ADDR_LOW=SRC, D_SRC_LINE_STRIDE=line,
                            D_SRC_SURFACE_STRIDE=surf, D_OP_ENABLE=1).items():
        wr(f"NVDLA_CDP_RDMA.{name}", value)
    wr("NVDLA_CDP.D_OP_ENABLE", 1)
    counters = [dla.read_reg(f"NVDLA_CDP.{r}") for r in (
        "D_OUT_SATURATION", "D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID",
        "D_PERF_LUT_LE_HIT", "D_PERF_LUT_LO_HIT")]
    return dla.dram.read(SRC, len(memory)).tobytes(), counters


@pytest.mark.parametrize("preset,c", [("nv_small", 13), ("nv_large", 45), ("nv_large", 64)])
@pytest.mark.parametrize("in_place", [False, True])
def test_per_code_on_a_cube_of_several_surfaces_with_gaps(preset, c, in_place):
    """Several surfaces, a last one part padding (its lanes hold garbage the hardware reads
    as the input offset), lines and surfaces with gaps between them, written elsewhere or
    over the input: the per-code model (a pass over memory as it holds the cube) leaves
    every byte and counter as the lane-by-lane one, the gaps untouched."""
    memory = np.random.default_rng(c).integers(0, 256, 0x8000, dtype=np.uint8).tobytes()
    fast = _run_cube(preset, True, c, 3, 5, in_place, memory)
    plain = _run_cube(preset, False, c, 3, 5, in_place, memory)
    assert fast == plain
    atom = get_preset(preset).atom_size
    assert fast[0] != memory
    assert sum(fast[1][1:]) == -(-c // atom) * atom * 3 * 5     # every lane counted once
