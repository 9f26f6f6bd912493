"""accel.cbuf against the values NVIDIA's traces program and against hand arithmetic.

Expected numbers are the traces' register values (``D_ENTRY_PER_SLICE``,
``D_WEIGHT_BYTES``, ``D_BANK`` of ``../shared/nvdla/traces``, copied here so
the test runs without the shared data) or worked out in the comments.
"""

from __future__ import annotations

import pytest

from accel import cbuf
from accel.config import get_preset

# (preset, trace, C, W, ENTRIES + 1 the trace programs)
TRACE_ENTRIES = [
    ("nv_small", "dc_24x44x14_5x3x14x41", 14, 24, 0x2F + 1),
    ("nv_small", "dc_13x15x64_5x3x64x16", 64, 13, 0x67 + 1),
    ("nv_small", "dc_14x7x49_3x4x49x32", 49, 14, 0x61 + 1),
    ("nv_small", "dc_32x26x76_6x3x76x270", 76, 32, 0x13F + 1),
    ("nv_small", "dc_6x8x192_3x3x192x32", 192, 6, 0x8F + 1),
    ("nv_small", "dc_8x8x36_4x4x36x16_dilation", 36, 8, 0x27 + 1),
    ("nv_small", "dc_4x1x8192_1x1x8192x1", 8192, 4, 0xFFF + 1),
    ("nv_small", "dc_1x1x8_1x1x8x1", 8, 1, 0 + 1),
    ("nv_medium_512", "dc_8x16x128_3x3x128x32", 128, 8, 0x1F + 1),
    ("nv_large", "dc_8x16x128_3x3x128x32", 128, 8, 0xF + 1),
    ("nv_large", "dc_8x8x32_1x1x32x32", 32, 8, 0x3 + 1),
]


@pytest.mark.parametrize("preset,trace,c,w,entries", TRACE_ENTRIES)
def test_entries_per_slice_is_what_nvidia_traces_program(preset, trace, c, w, entries):
    assert cbuf.entries_per_slice(get_preset(preset), c, w) == entries, trace


def test_entries_per_slice_partial_entries_by_hand():
    small256 = get_preset("nv_small_256")  # 8-byte atoms, 32-byte entries: 4 atoms per entry
    assert cbuf.entries_per_slice(small256, channels=32, width=5) == 5    # 4 atoms: 1 entry/px
    assert cbuf.entries_per_slice(small256, channels=24, width=5) == 5    # 3 of 4 atoms fill it
    assert cbuf.entries_per_slice(small256, channels=16, width=5) == 3    # 2 px/entry: ceil(5/2)
    assert cbuf.entries_per_slice(small256, channels=8, width=5) == 2     # 4 px/entry: ceil(5/4)
    assert cbuf.entries_per_slice(small256, channels=40, width=5) == 5 + 2  # 4 + 1 atoms
    with pytest.raises(ValueError, match="non-empty"):
        cbuf.entries_per_slice(small256, channels=0, width=5)


@pytest.mark.parametrize("preset,entries", [("nv_small", 0x19 + 1), ("nv_medium_512", 0x6 + 1),
                                            ("nv_large", 0x3 + 1)])
def test_image_entries_are_what_the_img_traces_program(preset, entries):
    # img_51x96x4_*: 51 pixels x 4 channels = 204 bytes over 8 / 32 / 64-byte entries
    assert cbuf.image_entries_per_slice(get_preset(preset), channels=4, width_ext=51) == entries


def test_banks_and_weight_bytes_of_the_270_kernel_trace():
    small = get_preset("nv_small")   # banks of 512 entries x 8 bytes = 4096 bytes
    # dc_32x26x76_6x3x76x270: 320 entries x 26 rows = 8320 entries -> 17 banks (it gives 24)
    assert cbuf.data_banks(small, channels=76, width=32, height=26) == 17
    bpk = 6 * 3 * 76                                   # 1368 bytes per kernel
    assert cbuf.weight_bytes(270, bpk) == 0x5A300      # 369360 padded to 128: 369408
    assert cbuf.weight_banks_total(small, 270, bpk) == 91   # 46170 entries / 512
    assert cbuf.weight_banks_min(small, 270, bpk) == 3      # 8 x 1368 = 1368 entries
    # the trace streams them through WEIGHT_BANK + 1 = 6 banks
    assert cbuf.weight_banks_min(small, 270, bpk) <= 0x5 + 1 < cbuf.weight_banks_total(
        small, 270, bpk)


def test_weight_bytes_padding_by_hand():
    assert cbuf.weight_bytes(41, 14 * 5 * 3) == 0x2200    # 8610 -> 8704 (dc_24x44x14)
    assert cbuf.weight_bytes(1, 8) == 0x80                 # dc_1x1x8: 8 -> 128
    assert cbuf.weight_bytes(32, 49 * 12) == 0x4980        # 18816 is already 147 x 128
    large = get_preset("nv_large")                         # banks of 512 x 64 = 32 KiB
    assert cbuf.weight_banks_total(large, 32, 1152) == 2   # 36864 bytes
    assert cbuf.weight_banks_min(large, 32, 1152) == 2     # a group is all 32 kernels
    assert cbuf.weight_banks_min(large, 3, 1152) == 1      # fewer kernels than a group


@pytest.mark.parametrize("preset,kh,sy,width", [
    ("nv_small", 2, 2, 512),   # 1 overlap line: 7168 * 8 / (1 * 8 * 14)
    ("nv_small", 3, 1, 128),   # 3 lines -> the buffer keeps 4
    ("nv_small", 3, 2, 256),   # ceil(3/2) = 2 lines
    ("nv_small", 8, 1, 64),    # 8 lines
    ("nv_large", 3, 1, 32),    # 7168 * 8 / (4 * 32 * 14)
    ("nv_large", 1, 1, 128),
])
def test_pdp_max_width_by_hand(preset, kh, sy, width):
    assert cbuf.pdp_max_width(get_preset(preset), kh, sy) == width


def test_pdp_max_width_rejects_kernels_outside_1_to_8():
    with pytest.raises(ValueError, match=r"kernel height 9 \(1..8\)"):
        cbuf.pdp_max_width(get_preset("nv_small"), 9, 1)
