"""BDMA on nv_full: queued transfers, launches, interrupts, errors - against plain-loop copies.

Register facts used here (NVDLA_BDMA.rdl / cmod bdma): addresses and strides
count 32-byte units (fields from bit 5), ``CFG_LINE.SIZE`` is 32-byte units
minus one, repeats are counts minus one, the FIFO holds 20 transfers, and the
GLB done bits of BDMA groups 0/1 are bits 6/7 of ``S_INTR_STATUS``.
"""

from __future__ import annotations

import dataclasses

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from accel.cmod import ConfigError, Dla, DramAccessError, UnsupportedError
from accel.config import get_preset

SRC, DST = 0x8000_0000, 0x9000_0000
BDMA0, BDMA1 = 1 << 6, 1 << 7


def _queue(dla, src, dst, line_bytes, lines, surfs, src_line, dst_line, src_surf, dst_surf,
           cmd=0b11):
    wr = dla.write_reg
    wr("NVDLA_BDMA.CFG_SRC_ADDR_LOW_0", src & 0xFFFFFFFF)
    wr("NVDLA_BDMA.CFG_SRC_ADDR_HIGH_0", src >> 32)
    wr("NVDLA_BDMA.CFG_DST_ADDR_LOW_0", dst & 0xFFFFFFFF)
    wr("NVDLA_BDMA.CFG_DST_ADDR_HIGH_0", dst >> 32)
    wr("NVDLA_BDMA.CFG_LINE_0", line_bytes // 32 - 1)
    wr("NVDLA_BDMA.CFG_CMD_0", cmd)
    wr("NVDLA_BDMA.CFG_LINE_REPEAT_0", lines - 1)
    wr("NVDLA_BDMA.CFG_SRC_LINE_0", src_line)
    wr("NVDLA_BDMA.CFG_DST_LINE_0", dst_line)
    wr("NVDLA_BDMA.CFG_SURF_REPEAT_0", surfs - 1)
    wr("NVDLA_BDMA.CFG_SRC_SURF_0", src_surf)
    wr("NVDLA_BDMA.CFG_DST_SURF_0", dst_surf)
    wr("NVDLA_BDMA.CFG_OP_0", 1)


def _plain_copy(mem_src, mem_dst, src, dst, line_bytes, lines, surfs, sl, dl, ss, ds):
    for s in range(surfs):
        for ln in range(lines):
            for b in range(line_bytes):
                mem_dst[dst + s * ds + ln * dl + b] = mem_src[src + s * ss + ln * sl + b]


def _dla():
    dla = Dla(get_preset("nv_full"))
    dla.dram.map(SRC, 4096)
    dla.dram.map(DST, 4096)
    return dla


def test_two_transfers_with_line_and_surface_repeats_then_launch_group0():
    dla = _dla()
    rng = np.random.default_rng(5)
    src_bytes = rng.integers(0, 256, 4096).astype(np.uint8)
    dla.dram.write(SRC, src_bytes)
    a = (0x40, 0x20, 64, 3, 2, 96, 64, 512, 192)  # src off, dst off, line, lines, surfs, strides
    b = (0x800, 0x400, 32, 1, 1, 32, 32, 32, 32)
    for t in (a, b):
        _queue(dla, SRC + t[0], DST + t[1], *t[2:])
    assert dla.read_reg("NVDLA_BDMA.STATUS_0") & 0xFF == 18  # two FIFO slots used
    assert not dla.dram.read(DST, 4096).any()  # nothing moves before the launch
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == 0
    dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    want = bytearray(4096)
    for t in (a, b):
        _plain_copy(src_bytes, want, t[0], t[1], *t[2:])
    assert dla.dram.read(DST, 4096).tobytes() == bytes(want)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == BDMA0
    status = dla.read_reg("NVDLA_BDMA.STATUS_0")
    assert status & 0xFF == 20 and status >> 8 & 1  # FIFO empty, idle
    rec = dla.stats[-1]
    assert (rec.unit, rec.details["group"], rec.details["transfers"],
            rec.details["bytes"]) == ("BDMA", 0, 2, 64 * 3 * 2 + 32)
    assert rec.cycles == -(-2 * rec.details["bytes"] // 64)  # read + write over a 512-bit bus


def test_group1_runs_only_transfers_queued_since_the_last_launch_in_order():
    dla = _dla()
    dla.dram.write(SRC, np.arange(256, dtype=np.uint8))
    _queue(dla, SRC, DST, 32, 1, 1, 32, 32, 32, 32)
    dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    dla.write_reg("NVDLA_GLB.S_INTR_STATUS_0", BDMA0)  # acknowledge
    _queue(dla, SRC + 32, DST, 32, 1, 1, 32, 32, 32, 32)  # same destination: later one wins
    _queue(dla, DST, DST + 64, 32, 1, 1, 32, 32, 32, 32)  # reads what the previous one wrote
    dla.write_reg("NVDLA_BDMA.CFG_LAUNCH1_0", 1)
    out = dla.dram.read(DST, 96)
    assert out[:32].tolist() == list(range(32, 64))
    assert out[64:96].tolist() == list(range(32, 64))
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == BDMA1
    assert [r.details["transfers"] for r in dla.stats] == [1, 2]


def test_masked_interrupt_is_not_raised():
    dla = _dla()
    dla.write_reg("NVDLA_GLB.S_INTR_MASK_0", BDMA0)
    _queue(dla, SRC, DST, 32, 1, 1, 32, 32, 32, 32)
    dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == 0


def test_fifo_holds_20_transfers():
    dla = _dla()
    for _ in range(20):
        _queue(dla, SRC, DST, 32, 1, 1, 32, 32, 32, 32)
    assert dla.read_reg("NVDLA_BDMA.STATUS_0") & 0x1FF == 0  # no free slot, not idle
    with pytest.raises(ConfigError, match=r"BDMA.CFG_OP = 0x1: the command FIFO already holds 20"):
        _queue(dla, SRC, DST, 32, 1, 1, 32, 32, 32, 32)


def test_errors():
    with pytest.raises(UnsupportedError, match="nv_small has no BDMA"):
        _queue(Dla(get_preset("nv_small")), SRC, DST, 32, 1, 1, 32, 32, 32, 32)
    dla = _dla()
    _queue(dla, SRC, DST + 4064, 64, 1, 1, 64, 64, 64, 64)  # runs 32 bytes past the region
    with pytest.raises(DramAccessError, match="BDMA: transfer 0 write of 64 bytes"):
        dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    no_cvsram = dataclasses.replace(get_preset("nv_full"), secondary_memif=False)
    dla = Dla(no_cvsram)
    dla.dram.map(SRC, 4096)
    _queue(dla, SRC, SRC + 1024, 32, 1, 1, 32, 32, 32, 32, cmd=0b01)  # DST_RAM_TYPE = CVSRAM
    with pytest.raises(ConfigError, match=r"BDMA.CFG_CMD = 0x1: transfer 0: DST_RAM_TYPE is "
                                          r"CVSRAM but nv_full has no secondary memory"):
        dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(values=st.lists(st.integers(0, 2**32 - 1), min_size=12, max_size=12),
       small=st.lists(st.integers(0, 300), min_size=6, max_size=6))
def test_random_registers_copy_or_fail_clearly(values, small):
    dla = Dla(get_preset("nv_full"))
    dla.dram.map(0, 1 << 16)
    regs = ["CFG_SRC_ADDR_LOW", "CFG_SRC_ADDR_HIGH", "CFG_DST_ADDR_LOW", "CFG_DST_ADDR_HIGH",
            "CFG_LINE", "CFG_CMD", "CFG_LINE_REPEAT", "CFG_SRC_LINE", "CFG_DST_LINE",
            "CFG_SURF_REPEAT", "CFG_SRC_SURF", "CFG_DST_SURF"]
    for i, (name, v) in enumerate(zip(regs, values, strict=True)):
        if small[0] % 2:  # half the examples get small values so that some copies fit
            counts = "REPEAT" in name or name == "CFG_LINE"
            v = {"CFG_SRC_ADDR_HIGH": 0, "CFG_DST_ADDR_HIGH": 0, "CFG_CMD": v & 3}.get(
                name, small[i % 6] % 8 if counts else small[i % 6] * 32)
        dla.write_reg(f"NVDLA_BDMA.{name}_0", v)
    dla.write_reg("NVDLA_BDMA.CFG_OP_0", 1)
    try:
        dla.write_reg("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    except ConfigError as exc:
        assert str(exc).startswith("BDMA.")
    except (DramAccessError, UnsupportedError) as exc:  # ModelLimitError is an Unsupported
        assert "BDMA" in str(exc)
    else:
        assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == BDMA0
    assert dla.read_reg("NVDLA_BDMA.STATUS_0") & 0xFF == 20
