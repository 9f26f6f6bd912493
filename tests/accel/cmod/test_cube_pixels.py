"""``read_int8_pixels``: a feature cube as pixels ``[H*W, C_pad]``, against the byte-offset
formula of NVDLA's layout written out plainly (channel ``c`` of pixel ``(y, x)`` at
``base + (c // atom) * surf + y * line + x * atom + c % atom``)."""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod.cube import read_int8_pixels
from accel.cmod.dram import Dram


@pytest.mark.parametrize("atom", [4, 8, 32])
@pytest.mark.parametrize("c", [1, 5, 8, 13, 40])
def test_pixels_follow_the_layout(atom, c):
    h, w = 3, 5
    line = w * atom + 2 * atom                  # gaps after each line and each surface
    surf = h * line + atom
    surfaces = -(-c // atom)
    dram = Dram()
    base = 0x40 + atom
    dram.map(0x40, base - 0x40 + surfaces * surf + 64)
    rng = np.random.default_rng(c * atom)
    size = dram.regions[0][1]
    dram.write(0x40, rng.integers(0, 256, size).astype(np.uint8))
    mem = dram.read(0x40, size).view(np.int8)
    got = read_int8_pixels(dram, base, c, h, w, atom, line, surf, "test")
    assert got.shape == (h * w, surfaces * atom) and got.dtype == np.int8
    for y in range(h):
        for x in range(w):
            for ch in range(surfaces * atom):   # the lanes past c as memory holds them
                at = base - 0x40 + (ch // atom) * surf + y * line + x * atom + ch % atom
                assert got[y * w + x, ch] == mem[at]


def test_a_cube_leaving_its_region_is_not_read():
    dram = Dram()
    dram.map(0, 256)
    assert read_int8_pixels(dram, 0, 8, 10, 4, 8, 32, 320, "test") is None   # 320 bytes


@pytest.mark.parametrize("batch", [2, 3])    # 4 and 6 words a pixel: both copies
def test_a_batch_of_cubes_side_by_side(batch):
    """16-channel cubes 0x300 bytes apart: cube ``b``'s channels at columns ``16 b ...`` of
    each pixel."""
    h, w, atom, line, surf, step = 2, 3, 8, 32, 64, 0x300
    dram = Dram()
    dram.map(0, batch * step)
    rng = np.random.default_rng(3)
    dram.write(0, rng.integers(0, 256, batch * step).astype(np.uint8))
    mem = dram.read(0, batch * step).view(np.int8)
    got = read_int8_pixels(dram, 0, 16, h, w, atom, line, surf, "test", batch=batch,
                           step=step)
    assert got.shape == (h * w, 16 * batch)
    for b in range(batch):
        for y in range(h):
            for x in range(w):
                for ch in range(16):
                    at = b * step + (ch // atom) * surf + y * line + x * atom + ch % atom
                    assert got[y * w + x, 16 * b + ch] == mem[at]


@pytest.mark.parametrize("c", [16, 40])          # 2 and 5 words a pixel: both copies
def test_the_sign_of_what_was_read(c):
    """``sign=True``: whether every byte read is non-negative, one byte of 0x80 or more
    anywhere (here the last lane of the last pixel, or the first) being enough to say no;
    the gaps between lines are not read."""
    h, w, atom = 3, 4, 8
    line, surf = w * atom + atom, 4 * (w * atom + atom)
    surfaces = -(-c // atom)
    for where in (None, 0, -1):
        dram = Dram()
        dram.map(0, surfaces * surf)
        mem = np.random.default_rng(c).integers(0, 128, surfaces * surf).astype(np.uint8)
        for s in range(surfaces):        # negative bytes in the gaps only
            for y in range(h):
                mem[s * surf + y * line + w * atom:s * surf + (y + 1) * line] = 0xFF
        if where is not None:
            at = (surfaces - 1) * surf + (h - 1) * line + (w - 1) * atom + atom - 1
            mem[0 if where == 0 else at] = 0x80
        dram.write(0, mem)
        pixels, nonnegative = read_int8_pixels(dram, 0, c, h, w, atom, line, surf, "test",
                                               sign=True)
        assert nonnegative == (where is None)
        assert np.array_equal(pixels, read_int8_pixels(dram, 0, c, h, w, atom, line, surf,
                                                       "test"))
