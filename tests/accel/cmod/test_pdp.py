"""PDP pooling against hand-computed windows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.cmod.errors import ConfigError
from accel.cmod.pdp import AVERAGE, MAX, MIN, pool

X = np.array([[[1, -2, 3],
               [4, 5, -6]]])  # C=1, H=2, W=3


def test_max_and_min_ignore_padding():
    # 2x2 windows, stride 1, one padded column on the left: window 0 = {pad,1,pad,4}
    out = pool(X, MAX, (2, 2), (1, 1), (0, 1), (1, 3))
    assert out.tolist() == [[[4, 5, 5]]]
    # all inputs negative-or-positive: min never sees a padded zero
    out = pool(-np.abs(X) - 1, MIN, (2, 2), (1, 1), (0, 1), (1, 3))
    assert out.tolist() == [[[-5, -6, -7]]]


def _windowed(x, method, k, stride, pad, out_hw):
    """Each output as the max/min of its window's in-range inputs, one window at a time."""
    c, h, w = x.shape
    out = np.zeros((c, *out_hw), dtype=np.int64)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            ys = [y for y in range(i * stride[0] - pad[0], i * stride[0] - pad[0] + k[0])
                  if 0 <= y < h]
            xs = [v for v in range(j * stride[1] - pad[1], j * stride[1] - pad[1] + k[1])
                  if 0 <= v < w]
            win = x[:, ys][:, :, xs].reshape(c, -1)
            out[:, i, j] = win.max(axis=1) if method == MAX else win.min(axis=1)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4), st.integers(1, 4),
       st.integers(0, 3), st.integers(0, 3), st.integers(1, 12), st.integers(1, 12),
       st.integers(0, 3), st.integers(0, 3), st.sampled_from([MAX, MIN]),
       st.integers(0, 2**31), st.sampled_from([np.int8, np.int64]))
def test_max_min_equal_the_windows_one_by_one(kh, kw, sh, sw, pt, pl, h, w, pb, pr, method,
                                              seed, dtype):
    """Both frames: int16 for int8 data (as the PDP reads it), int64 for any other."""
    # padding on every side, each less than the window: every window holds an input
    pt, pl, pb, pr = min(pt, kh - 1), min(pl, kw - 1), min(pb, kh - 1), min(pr, kw - 1)
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    if oh < 1 or ow < 1:
        return
    rng = np.random.default_rng(seed)
    x = np.where(rng.random((3, h, w)) < 0.2, rng.choice([-128, 127], (3, h, w)),
                 rng.integers(-128, 128, (3, h, w))).astype(dtype)
    got = pool(x, method, (kh, kw), (sh, sw), (pt, pl), (oh, ow))
    np.testing.assert_array_equal(got, _windowed(x, method, (kh, kw), (sh, sw), (pt, pl),
                                                 (oh, ow)))


def test_average_adds_pad_values_per_row_and_kernel_width_per_padded_row():
    pv = np.array([0, 10, 20, 30, 40, 50, 60, 70])
    # 3x3 window at output (0,0) with pad top 1, left 1 over the 2x3 input:
    # real rows 0,1 each have 1 padded column -> 2 * pv[1] = 20
    # 1 padded row -> kw * pv[1] = 30 ; real cells 1 - 2 + 4 + 5 = 8 ; total 58
    out = pool(X, AVERAGE, (3, 3), (1, 1), (1, 1), (1, 1), pv, (1 << 16, 1 << 16))
    assert out.tolist() == [[[58]]]


def test_average_reciprocals_round_twice_half_away_from_zero():
    x = np.array([[[-1, -2], [-3, -1]]])  # sum -7 over a 2x2 window
    # width: -7 * 0x8000 / 2**16 = -3.5 -> -4 ; height: -4 * 0x8000 / 2**16 = -2
    out = pool(x, AVERAGE, (2, 2), (1, 1), (0, 0), (1, 1), None, (0x8000, 0x8000))
    assert out.tolist() == [[[-2]]]
    # one rounding of -7/4 = -1.75 would give -2 as well; -5 shows the double rounding:
    x = np.array([[[-1, -1], [-2, -1]]])  # -5: -2.5 -> -3, then -1.5 -> -2 (single: -1)
    out = pool(x, AVERAGE, (2, 2), (1, 1), (0, 0), (1, 1), None, (0x8000, 0x8000))
    assert out.tolist() == [[[-2]]]


def test_average_three_wide_uses_floor_reciprocal():
    x = np.full((1, 3, 3), 100)
    # 900 * 0x5555 / 2**16 = 299.995 -> 300 ; 300 * 0x5555 / 2**16 = 99.998 -> 100
    out = pool(x, AVERAGE, (3, 3), (1, 1), (0, 0), (1, 1), None, (0x5555, 0x5555))
    assert out.tolist() == [[[100]]]


def _pdp_split_regs(split_num, win, wout, pad_left=1, pad_right=1, method=MAX):
    from accel.cmod.csb import make_register_file
    from accel.regs import UNITS

    regs = make_register_file()["NVDLA_PDP"]
    r = UNITS["NVDLA_PDP"].registers
    regs.write(r["D_OPERATION_MODE_CFG"], method | (split_num << 8))
    regs.write(r["D_POOLING_PADDING_CFG"], pad_left | (pad_right << 8))
    regs.write(r["D_PARTIAL_WIDTH_IN"], (win[0] - 1) | ((win[2] - 1) << 10) | ((win[1] - 1) << 20))
    regs.write(r["D_PARTIAL_WIDTH_OUT"],
               (wout[0] - 1) | ((wout[2] - 1) << 10) | ((wout[1] - 1) << 20))
    return regs.group(0)


def test_split_width_slices_overlap_and_pad_only_at_the_cube_edges():
    from accel.cmod.pdp import split_plan

    # 3-wide max, stride 1, pad 1 | 1 over 6 columns, split 2 + 2 + 2 in, 1 + 2 + 3 out:
    # slice 0 reads [0, 2) with the left pad, slice 1 [0, 4) (2 overlap columns),
    # slice 2 [2, 6) with the right pad
    g = _pdp_split_regs(2, (2, 2, 2), (1, 2, 3))
    assert split_plan(g, 3, 1, 6, 6) == [(0, 2, 1, 0, 1), (0, 4, 0, 1, 2), (2, 4, 0, 3, 3)]


def test_split_output_widths_must_cover_the_output_cube():
    import pytest

    from accel.cmod.errors import ConfigError
    from accel.cmod.pdp import split_plan

    g = _pdp_split_regs(2, (2, 2, 2), (1, 2, 2))
    with pytest.raises(ConfigError, match="D_PARTIAL_WIDTH_OUT"):
        split_plan(g, 3, 1, 6, 6)
    g = _pdp_split_regs(2, (2, 2, 9), (1, 2, 3))  # last slice runs past column 6
    with pytest.raises(ConfigError, match="outside the 6-wide input cube"):
        split_plan(g, 3, 1, 6, 6)


# ----------------------------------------------------------- line buffer (accel.cbuf)
IN, OUT = 0x1000_0000, 0x2000_0000


def _pdp_from_memory(x, oh, ow, kernel, stride, split=None):
    """Max-pool ``x[8, H, W]`` on nv_small from memory; ``split`` = (in widths, out widths)
    of two slices.  Returns the output cube [8, oh, ow]."""
    from accel.cmod import Dla
    from accel.config import get_preset

    dla = Dla(get_preset("nv_small"))
    c, h, w = x.shape
    data = x.astype(np.int8).transpose(1, 2, 0).tobytes()   # one 8-channel surface
    dla.dram.map(IN, len(data))
    dla.dram.write(IN, data)
    dla.dram.map(OUT, oh * ow * 8)
    wr = dla.write_reg
    wr("NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0", IN)
    wr("NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0", w * 8)
    wr("NVDLA_PDP_RDMA.D_SRC_SURFACE_STRIDE_0", w * h * 8)
    wr("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", w - 1)
    wr("NVDLA_PDP.D_DATA_CUBE_IN_HEIGHT_0", h - 1)
    wr("NVDLA_PDP.D_DATA_CUBE_IN_CHANNEL_0", c - 1)
    wr("NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0", ow - 1)
    wr("NVDLA_PDP.D_DATA_CUBE_OUT_HEIGHT_0", oh - 1)
    wr("NVDLA_PDP.D_DATA_CUBE_OUT_CHANNEL_0", c - 1)
    wr("NVDLA_PDP.D_POOLING_KERNEL_CFG_0", (kernel[1] - 1) | ((kernel[0] - 1) << 8)
       | ((stride[1] - 1) << 16) | ((stride[0] - 1) << 20))
    wr("NVDLA_PDP.D_OPERATION_MODE_CFG_0", MAX | (1 << 4) | ((1 if split else 0) << 8))
    if split:
        (in0, in1), (out0, out1) = split
        wr("NVDLA_PDP.D_PARTIAL_WIDTH_IN_0", (in0 - 1) | ((in1 - 1) << 10))
        wr("NVDLA_PDP.D_PARTIAL_WIDTH_OUT_0", (out0 - 1) | ((out1 - 1) << 10))
    wr("NVDLA_PDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_PDP.D_DST_LINE_STRIDE_0", ow * 8)
    wr("NVDLA_PDP.D_DST_SURFACE_STRIDE_0", oh * ow * 8)
    wr("NVDLA_PDP.D_OP_ENABLE_0", 1)
    wr("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    raw = dla.dram.read(OUT, oh * ow * 8).view(np.int8)
    return raw.reshape(oh, ow, 8).transpose(2, 0, 1).astype(np.int64)


def _max_2x2(x):
    c, h, w = x.shape
    return x[:, :h // 2 * 2, :w // 2 * 2].reshape(c, h // 2, 2, w // 2, 2).max(axis=(2, 4))


def test_one_pass_writes_at_most_the_line_buffer_width():
    import pytest

    from accel.cmod.errors import ConfigError

    # 2x2 windows at stride 2 on nv_small: 7 KiB / (1 line x 8 kernels x 14 bits) = 512
    x = np.random.default_rng(5).integers(-128, 128, (8, 2, 1026))
    assert np.array_equal(_pdp_from_memory(x[:, :, :1024], 1, 512, (2, 2), (2, 2)),
                          _max_2x2(x[:, :, :1024]))
    with pytest.raises(ConfigError, match=r"PDP.D_DATA_CUBE_OUT_WIDTH = 0x200: 513 output "
                                          r"columns in one pass, but the PDP line buffer holds "
                                          r"512 output columns for a 2-high window at stride 2 "
                                          r"on nv_small; use split-width mode"):
        _pdp_from_memory(x, 1, 513, (2, 2), (2, 2))
    # the same 513 columns in two slices of 257 + 256 (514 + 512 input columns)
    assert np.array_equal(_pdp_from_memory(x, 1, 513, (2, 2), (2, 2), ((514, 512), (257, 256))),
                          _max_2x2(x))


def test_each_split_slice_writes_at_most_the_line_buffer_width():
    import pytest

    from accel.cmod.errors import ConfigError

    # 3-high windows at stride 1 keep 4 lines: 7 KiB / (4 x 8 x 14 bits) = 128 columns;
    # 1-wide windows make input and output columns the same
    x = np.random.default_rng(6).integers(-128, 128, (8, 3, 200))
    expect = x.max(axis=1, keepdims=True)
    assert np.array_equal(_pdp_from_memory(x, 1, 200, (3, 1), (1, 1), ((100, 100), (100, 100))),
                          expect)
    with pytest.raises(ConfigError, match=r"PDP.D_PARTIAL_WIDTH_OUT = 0x11880: a split-width "
                                          r"slice writes 129 output columns, but the PDP line "
                                          r"buffer holds 128 output columns for a 3-high window"):
        # 128 | (70 << 10) = 0x11880
        _pdp_from_memory(x, 1, 200, (3, 1), (1, 1), ((129, 71), (129, 71)))
    with pytest.raises(ConfigError, match=r"D_DATA_CUBE_OUT_WIDTH = 0xc7: 200 output columns"):
        _pdp_from_memory(x, 1, 200, (3, 1), (1, 1))


def test_pooling_windows_are_1_to_8():
    import pytest

    from accel.cmod.errors import ConfigError

    x = np.zeros((8, 9, 2), np.int64)
    with pytest.raises(ConfigError, match=r"PDP.D_POOLING_KERNEL_CFG = 0x800: KERNEL_HEIGHT\+1 = "
                                          r"9: pooling windows are 1..8"):
        _pdp_from_memory(x, 1, 2, (9, 1), (1, 1))


def test_average_window_wholly_in_the_padding_is_refused():
    """An average of an 8-wide window past the input's last column has 8 padded cells,
    one more than PAD_VALUE_1X..7X cover: refused, naming the output width's register
    (it indexed past the pad values before)."""
    x = np.zeros((1, 2, 8), dtype=np.int64)
    pool(x, AVERAGE, (1, 8), (1, 8), (0, 0), (1, 1))       # one whole window: fine
    with pytest.raises(ConfigError, match="D_DATA_CUBE_OUT_WIDTH.*wholly in the padding"):
        pool(x, AVERAGE, (1, 8), (1, 8), (0, 0), (1, 2))
