"""SDP X stages and output converter against hand-computed values (NVDLA_FACTS section 3)."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod.sdp import ALU_MAX, ALU_MIN, ALU_SUM, StageConfig, output_cvt, x_stage


def stage(**kw) -> StageConfig:
    base = dict(bypass=False, alu_bypass=True, alu_algo=ALU_SUM, mul_bypass=True, prelu=False,
                relu_bypass=True, alu_src_mem=False, alu_shift=0, alu_operand=0,
                mul_src_mem=False, mul_shift=0, mul_operand=1)
    base.update(kw)
    return StageConfig(**base)


def test_bypassed_stage_passes_33_bit_values_untouched():
    x = np.array([2**32, -5])
    assert x_stage(x, stage(bypass=True, mul_shift=3), 0, 0).tolist() == [2**32, -5]


def test_truncate_applies_even_with_mul_bypassed():
    x = np.array([5, -5, 6, -6, 7, 2**33])
    y = x_stage(x, stage(mul_bypass=True, mul_shift=1), 0, 1)
    assert y.tolist() == [3, -3, 3, -3, 4, 2**31 - 1]  # round half away, then int32 sat


def test_alu_ops_and_shift_saturation():
    x = np.array([-10, 3, 100])
    st = dict(alu_bypass=False, alu_shift=2)
    assert x_stage(x, stage(alu_algo=ALU_SUM, **st), 5, 1).tolist() == [10, 23, 120]
    assert x_stage(x, stage(alu_algo=ALU_MAX, **st), 5, 1).tolist() == [20, 20, 100]
    assert x_stage(x, stage(alu_algo=ALU_MIN, **st), 5, 1).tolist() == [-10, 3, 20]
    # int16 -32768 << 20 saturates to int32 min before the sum; sum is 33 bits, then sat32
    big = x_stage(np.array([-1]), stage(alu_bypass=False, alu_shift=20, alu_algo=ALU_SUM),
                  -32768, 1)
    assert big.tolist() == [-(2**31)]


def test_mul_with_truncate_and_relu():
    x = np.array([7, -7, 3])
    st = stage(mul_bypass=False, mul_shift=2, relu_bypass=False)
    # 7*-3=-21 -> /4 = -5.25 -> -5 -> relu 0 ; -7*-3=21 -> 5.25 -> 5 ; 3*-3=-9 -> -2.25 -> 0
    assert x_stage(x, st, 0, -3).tolist() == [0, 5, 0]


def test_prelu_skips_multiply_and_truncation_for_non_negative_inputs():
    x = np.array([9, 0, -9, -3])
    y = x_stage(x, stage(mul_bypass=False, prelu=True, mul_shift=2), 0, 3)
    # 9 and 0 pass unshifted; -9*3=-27 -> -6.75 -> -7 ; -3*3=-9 -> -2.25 -> -2
    assert y.tolist() == [9, 0, -7, -2]


def test_per_channel_operands_broadcast():
    x = np.ones((2, 1, 2), dtype=np.int64)
    ops = np.array([10, -10]).reshape(2, 1, 1)
    y = x_stage(x, stage(alu_bypass=False, alu_algo=ALU_SUM), ops, 1)
    assert y[:, 0, :].tolist() == [[11, 11], [-9, -9]]


@pytest.mark.parametrize("x,offset,scale,shift,expect,sat", [
    (100, 10, 3, 2, 68, False),          # (90*3)/4 = 67.5 -> 68
    (-100, 10, 3, 2, -83, False),        # (-110*3)/4 = -82.5 -> -83
    (-100, 10, 3, 3, -41, False),        # -330/8 = -41.25 -> -41
    (50, 0, 1, 0, 50, False),
    (300, 0, 1, 0, 127, False),          # int8 saturation only
    (2**20, 0, 1, 0, 127, True),         # beyond 17 bits: counted
    (-(2**16) - 1, 0, 1, 0, -128, True),
    (2**31 - 1, -(2**31), 2, 0, 127, True),  # 33-bit difference times scale
])
def test_output_converter(x, offset, scale, shift, expect, sat):
    out, flags = output_cvt(np.array([x]), offset, scale, shift)
    assert out.tolist() == [expect] and flags.tolist() == [sat]


def _plan(dst, to_pdp=False, c=20, h=3, w=5):
    from accel.cmod.sdp import SdpPlan
    return SdpPlan(c=c, h=h, w=w, c_pad=24, flying=True, src=None, stages=(), y_stage=False,
                   lut_perf=False, cvt=(0, 1, 0), to_pdp=to_pdp, dst=dst, cycles=0, note="")


def test_the_output_cube_written_in_place_follows_the_layout():
    """``dst_pixels``: channel ``c`` of pixel ``p`` at ``base + (c // 8) * surf + p * 8 +
    c % 8`` (dense lines, surfaces apart with a gap); None where lines have gaps, surfaces
    overlap, the output goes to the PDP or the cube leaves memory."""
    from accel.cmod.dram import Dram
    dram = Dram()
    dram.map(0x1000, 0x400)
    base, surf = 0x1010, 3 * 5 * 8 + 16
    view = _plan((base, 5 * 8, surf)).dst_pixels(dram, 8)
    assert view.shape == (3, 15, 8) and view.dtype == np.int8
    values = np.arange(-128, -128 + view.size).reshape(view.shape) % 256 - 128
    view[...] = values
    mem = dram.read(0x1000, 0x400).view(np.int8)
    for c in range(24):
        for p in range(15):
            assert mem[base - 0x1000 + (c // 8) * surf + p * 8 + c % 8] == values[c // 8, p, c % 8]
    assert _plan((base, 5 * 8 + 8, surf)).dst_pixels(dram, 8) is None      # line gaps
    assert _plan((base, 5 * 8, 3 * 5 * 8 - 8)).dst_pixels(dram, 8) is None  # overlap
    assert _plan(None, to_pdp=True).dst_pixels(dram, 8) is None
    assert _plan((0x1300, 5 * 8, surf)).dst_pixels(dram, 8) is None         # leaves memory
