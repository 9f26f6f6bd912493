"""NVDLA feature-cube addressing (NVDLA_FACTS section 2), vectorized.

Byte offset of element ``(c, h, w)`` of a cube in memory, for elements of
``esize`` bytes grouped ``atom`` channels per atom::

    (c // atom) * surf_stride + h * line_stride + w * atom * esize + (c % atom) * esize

With ``esize = 1`` this is the int8 feature layout; SDP operand cubes with two
bytes or two (ALU, MUL) components per element use the same formula with a
larger ``esize`` (the channel group is still ``atom`` elements).

>>> cube_offsets(3, 1, 2, atom=2, line_stride=8, surf_stride=16)[:, 0, :].tolist()
[[0, 2], [1, 3], [16, 18]]
"""

from __future__ import annotations

import numpy as np

from accel.cmod.dram import Dram
from accel.cmod.errors import check_elements


def cube_offsets(c: int, h: int, w: int, atom: int, line_stride: int, surf_stride: int,
                 esize: int = 1) -> np.ndarray:
    """int64 ``[c, h, w]`` byte offsets of the first byte of every element."""
    check_elements("DMA", f"a {c}x{h}x{w} (CxHxW) cube", c * h * w)
    ci = np.arange(c, dtype=np.int64)[:, None, None]
    hi = np.arange(h, dtype=np.int64)[None, :, None]
    wi = np.arange(w, dtype=np.int64)[None, None, :]
    return (ci // atom) * surf_stride + hi * line_stride + wi * (atom * esize) + (ci % atom) * esize


def padded_channels(c: int, atom: int) -> int:
    """Channels rounded up to whole atoms."""
    return -(-c // atom) * atom


def read_int8_cube(dram: Dram, base: int, c: int, h: int, w: int, atom: int,
                   line_stride: int, surf_stride: int, unit: str) -> np.ndarray:
    """Signed int8 cube ``[c, h, w]`` as int64."""
    offs = cube_offsets(c, h, w, atom, line_stride, surf_stride)
    return dram.gather(base, offs, unit).view(np.int8).astype(np.int64)


def write_int8_cube(dram: Dram, base: int, data: np.ndarray, atom: int,
                    line_stride: int, surf_stride: int, unit: str) -> None:
    """Write ``data[c, h, w]`` (already saturated to int8) at its NVDLA addresses."""
    c, h, w = data.shape
    dram.scatter(base, cube_offsets(c, h, w, atom, line_stride, surf_stride), data, unit)
