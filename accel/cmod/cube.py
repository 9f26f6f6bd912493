"""NVDLA feature-cube DMA (NVDLA_FACTS section 2), vectorized.

The byte-offset formula is :func:`accel.layout.cube_offsets` (the compiler
packs with the same one).  With ``esize = 1`` it is the int8 feature layout;
SDP operand cubes with two bytes or two (ALU, MUL) components per element use
a larger ``esize`` (the channel group is still ``atom`` elements).
"""

from __future__ import annotations

import numpy as np

from accel import layout
from accel.cmod.dram import Dram
from accel.cmod.errors import check_elements
from accel.jit import njit


def cube_offsets(c: int, h: int, w: int, atom: int, line_stride: int, surf_stride: int,
                 esize: int = 1) -> np.ndarray:
    """int64 ``[c, h, w]`` byte offsets, after the model's size limit check."""
    check_elements("DMA", f"a {c}x{h}x{w} (CxHxW) cube", c * h * w)
    return layout.cube_offsets(c, h, w, atom, line_stride, surf_stride, esize)


def padded_channels(c: int, atom: int) -> int:
    """Channels rounded up to whole atoms."""
    return -(-c // atom) * atom


def _atoms(c: int, h: int, w: int, atom: int, line_stride: int, surf_stride: int):
    """Shape and byte strides of a cube as ``[surface, lane, row, column]``."""
    return (-(-c // atom), atom, h, w), (surf_stride, 1, line_stride, atom)


def read_int8_raw(dram: Dram, base: int, c: int, h: int, w: int, atom: int,
                  line_stride: int, surf_stride: int, unit: str) -> np.ndarray:
    """Signed int8 cube ``[c, h, w]`` (int8): a strided view of memory copied once, or a
    gather when the cube's whole atoms leave the region (the gather then names the
    address)."""
    check_elements("DMA", f"a {c}x{h}x{w} (CxHxW) cube", c * h * w)
    shape, strides = _atoms(c, h, w, atom, line_stride, surf_stride)
    view = dram.strided(base, shape, strides, unit)
    if view is None:
        offs = cube_offsets(c, h, w, atom, line_stride, surf_stride)
        return dram.gather(base, offs, unit).view(np.int8)
    return view.reshape(shape[0] * atom, h, w)[:c].view(np.int8)


def read_int8_pixels(dram: Dram, base: int, c: int, h: int, w: int, atom: int,
                     line_stride: int, surf_stride: int, unit: str, batch: int = 1,
                     step: int = 0, sign: bool = False
                     ) -> np.ndarray | tuple[np.ndarray, bool] | None:
    """The cube as int8 pixels ``[h * w, C_pad]`` (``C_pad``: ``c`` rounded up to whole
    atoms, the lanes past ``c`` as memory holds them): whole atoms copied at once, or
    memory itself for one surface of consecutive lines; None when the cube's whole
    atoms leave the region (:func:`read_int8_raw` then gathers, naming the address).
    ``batch`` cubes ``step`` bytes apart: ``[h * w, batch * C_pad]``, cube ``b``'s
    channels at columns ``b * C_pad ...``.  With ``sign``: ``(pixels, whether every byte
    read is non-negative)``, the test taken in the copy where it is compiled."""
    check_elements("DMA", f"a {c}x{h}x{w} (CxHxW) cube", batch * c * h * w)
    (surfaces, _, _, _), _ = _atoms(c, h, w, atom, line_stride, surf_stride)
    view = dram.strided(base, (batch, surfaces, h, w, atom),
                        (step, surf_stride, line_stride, atom, 1), unit)
    if view is None:
        return None
    words = batch * surfaces * atom // 8
    if atom % 8 == 0 and words <= FEW_WORDS and batch * surfaces > 1:
        # whole atoms as 64-bit words, a line of pixels at a time (one surface of
        # consecutive lines is taken as memory holds it, below)
        pixels = np.empty((h * w, words), dtype=np.uint64)
        bits = _pixel_words(view.view(np.uint64).reshape(batch, surfaces, h,
                                                         w * atom // 8), pixels)
        pixels = pixels.view(np.int8)
        return (pixels, not bits & _SIGN_BITS) if sign else pixels
    if atom % 8 == 0:        # whole atoms as 64-bit words: a copy moves 8 bytes at a time
        view = view.view(np.uint64)
    pixels = np.ascontiguousarray(view.transpose(2, 3, 0, 1, 4))
    pixels = pixels.view(np.int8).reshape(h * w, batch * surfaces * atom)
    return (pixels, int(pixels.view(np.uint8).max()) < 128) if sign else pixels


#: the sign bit of each byte of a 64-bit word
_SIGN_BITS = 0x8080808080808080


#: 64-bit words per pixel up to which :func:`read_int8_pixels` copies cubes of several
#: surfaces with :func:`_pixel_words`: numpy's transposing copy takes 1.7-3.5x as long on
#: 104x104 to 208x208 cubes of 2-4 words, and less on more words (measured on yolox_nano's
#: shapes)
FEW_WORDS = 4


@njit(cache=True, nogil=True)
def _pixel_words(words, out):
    """``out[y * W + x, (b * S + s) * Q + k] = words[b, s, y, x * Q + k]`` (uint64;
    ``words`` as memory holds them, any strides): a line of output pixels at a time,
    each surface's line read in order; returns the OR of all words."""
    batch, surfaces, h, line_words = words.shape
    row = out.shape[1]
    q = row // (batch * surfaces)
    w = line_words // q
    flat = out.reshape(out.size)
    bits = np.uint64(0)
    for y in range(h):
        first = y * w * row
        for b in range(batch):
            for s in range(surfaces):
                col = first + (b * surfaces + s) * q
                line = words[b, s, y]
                if q == 1:
                    for x in range(w):
                        flat[col + x * row] = line[x]
                        bits |= line[x]
                else:
                    for x in range(w):
                        for k in range(q):
                            flat[col + x * row + k] = line[x * q + k]
                            bits |= line[x * q + k]
    return bits


def read_int8_cube(dram: Dram, base: int, c: int, h: int, w: int, atom: int,
                   line_stride: int, surf_stride: int, unit: str) -> np.ndarray:
    """Signed int8 cube ``[c, h, w]`` as int64."""
    return read_int8_raw(dram, base, c, h, w, atom, line_stride, surf_stride,
                         unit).astype(np.int64)


def write_int8_cube(dram: Dram, base: int, data: np.ndarray, atom: int,
                    line_stride: int, surf_stride: int, unit: str) -> None:
    """Write ``data[c, h, w]`` (already saturated to int8) at its NVDLA addresses."""
    c, h, w = data.shape
    shape, strides = _atoms(c, h, w, atom, line_stride, surf_stride)
    # whole atoms, lines that do not overlap, surfaces that do not overlap
    disjoint = (c % atom == 0 and line_stride >= w * atom
                and (shape[0] == 1 or surf_stride >= (h - 1) * line_stride + w * atom))
    view = dram.strided(base, shape, strides, unit, "write") if disjoint else None
    if view is None:
        dram.scatter(base, cube_offsets(c, h, w, atom, line_stride, surf_stride), data, unit)
        return
    # int8 values as their two's-complement bytes: the unsafe cast wraps them mod 256
    np.copyto(view, np.asarray(data).reshape(shape), casting="unsafe")
    dram.touched(base)


def write_packed_cube(dram: Dram, base: int, packed: np.ndarray, line_stride: int,
                      surf_stride: int, unit: str) -> None:
    """Write ``packed[S, H, W, atom]`` (int8, channel-packed as memory holds it: see
    :func:`planar`) at its NVDLA addresses: whole pixels of an atom
    at a time, or through :func:`write_int8_cube` when lines or surfaces overlap."""
    s, h, w, atom = packed.shape
    disjoint = (line_stride >= w * atom
                and (s == 1 or surf_stride >= (h - 1) * line_stride + w * atom))
    view = (dram.strided(base, (s, h, w, atom), (surf_stride, line_stride, atom, 1), unit,
                         "write") if disjoint else None)
    if view is None:
        write_int8_cube(dram, base, planar(packed), atom, line_stride, surf_stride, unit)
        return
    np.copyto(view, packed, casting="unsafe")
    dram.touched(base)


def planar(packed: np.ndarray) -> np.ndarray:
    """``[..., S, H, W, atom]`` (channel-packed: the atom's channels of a pixel side by
    side) as planes ``[..., S * atom, H, W]``."""
    *lead, s, h, w, atom = packed.shape
    return np.ascontiguousarray(np.moveaxis(packed, -1, -3)).reshape(*lead, s * atom, h, w)
