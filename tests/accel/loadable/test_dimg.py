from __future__ import annotations

import struct

import pytest

from accel.loadable.dimg import read_dimg
from tests.conftest import shared_path


def test_hand_made_dimg():
    raw = b"DIMG" + struct.pack("<8I", 0, 40, 2, 1, 8, 16, 16, 4) + b"\x01\x02\x03\x04"
    d = read_dimg(raw)
    assert (d.surface_format, d.width, d.height, d.channel) == (40, 2, 1, 8)
    assert (d.line_stride, d.surf_stride, d.data) == (16, 16, b"\x01\x02\x03\x04")
    assert d.to_bytes() == raw


def test_bad_magic_and_size():
    with pytest.raises(ValueError, match="magic"):
        read_dimg(b"XIMG" + bytes(32))
    with pytest.raises(ValueError, match="declares 4 data bytes but holds 0"):
        read_dimg(b"DIMG" + struct.pack("<8I", 0, 0, 0, 0, 0, 0, 0, 4))


def test_conv_golden_meta():
    path = shared_path("nvdla", "loadables", "golden", "CONV_D_L0_0_small_3c77f6", "dla",
                       "o_000000.dimg")
    d = read_dimg(path.read_bytes())
    assert (d.width, d.height, d.channel, d.line_stride, d.surf_stride) == (8, 8, 32, 64, 512)
    assert len(d.data) == 2048
