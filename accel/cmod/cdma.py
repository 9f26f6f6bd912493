"""CDMA: convolution DMA - fetches the input feature cube and the direct-conv weights.

Direct convolution with feature input; image (pixel) input is in
:mod:`accel.cmod.cdma_image` (which checks the precisions of pixel input).
With ``D_CVT_CFG.CVT_EN`` the feature elements go through the same input
converter as pixels (:func:`accel.cmod.cdma_image.convert`), read signed, with
``CVT_OFFSET`` as the mean of every channel: NVIDIA's cmod converts feature
data on the way into the CBUF (``DirectConvDataResponseSequencerCommon``,
``PIXEL_SIGNED_INT8``), and the RTL's converter sits on the path the feature
data and the pixels share (``NV_NVDLA_CDMA_cvt.v``).  The CSC's padding value
is not converted.
Winograd, compressed weights and int16/fp16 processing raise
:class:`UnsupportedError`.
"""

from __future__ import annotations

import numpy as np

from accel.arith import sign_extend
from accel.cmod.cdma_image import convert
from accel.cmod.csb import GroupView
from accel.cmod.cube import read_int8_pixels, read_int8_raw
from accel.cmod.dram import Dram
from accel.cmod.errors import (
    MAX_WEIGHT_BYTES,
    ConfigError,
    UnsupportedError,
    check_elements,
)
from accel.config import HwConfig

UNIT = "CDMA"


def check_supported(g: GroupView) -> None:
    """Reject programming outside the direct-conv int8 feature and image paths."""
    if g("D_MISC_CFG", "CONV_MODE") != 0:
        raise UnsupportedError("CDMA Winograd convolution is not modelled")
    pixel = g("D_DATAIN_FORMAT", "DATAIN_FORMAT")
    if not pixel and (g("D_MISC_CFG", "IN_PRECISION") or g("D_MISC_CFG", "PROC_PRECISION")):
        raise UnsupportedError(f"CDMA precision other than int8 (D_MISC_CFG={g('D_MISC_CFG'):#x})")
    if g("D_WEIGHT_FORMAT", "WEIGHT_FORMAT") != 0:
        raise UnsupportedError("CDMA compressed weights are not modelled")
    if g("D_BATCH_NUMBER") & 0x1F:
        raise UnsupportedError("CDMA batch > 1 is not modelled")


def feature_source(g: GroupView, cfg: HwConfig) -> tuple[int, int, int, int, int, int]:
    """``(base, C, H, W, line stride, surface stride)`` of the input feature cube, checked."""
    w = g("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = g("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    c = g("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    line, surf = g("D_LINE_STRIDE"), g("D_SURF_STRIDE")
    base = g.addr("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0")
    a = cfg.atom_size
    for name, value in (("D_LINE_STRIDE", line), ("D_SURF_STRIDE", surf),
                        ("D_DAIN_ADDR_LOW_0", base)):
        if value % a:
            raise ConfigError(UNIT, name, value, f"must be a multiple of the {a}-byte atom")
    return base, c, h, w, line, surf


def feature_converter(g: GroupView) -> tuple[int, int, int] | None:
    """``(offset, scale, truncate)`` of the input converter on feature input
    (``D_CVT_OFFSET``, ``D_CVT_SCALE`` as int16, ``D_CVT_CFG.CVT_TRUNCATE``), or None when
    ``CVT_EN`` is off."""
    if not g("D_CVT_CFG", "CVT_EN"):
        return None
    return (int(sign_extend(g("D_CVT_OFFSET", "CVT_OFFSET"), 16)),
            int(sign_extend(g("D_CVT_SCALE", "CVT_SCALE"), 16)), g("D_CVT_CFG", "CVT_TRUNCATE"))


def read_feature(dram: Dram, cfg: HwConfig, source: tuple[int, int, int, int, int, int],
                 converter: tuple[int, int, int] | None = None) -> np.ndarray:
    """The int8 input cube ``[C, H, W]`` (int8) of a :func:`feature_source`, through the
    input converter when ``converter`` (:func:`feature_converter`) is given."""
    base, c, h, w, line, surf = source
    x = read_int8_raw(dram, base, c, h, w, cfg.atom_size, line, surf, UNIT)
    if converter is None:
        return x
    offset, scale, truncate = converter
    return convert(x, np.array([offset]), scale, truncate).astype(np.int8)


def read_feature_pixels(dram: Dram, cfg: HwConfig, source: tuple[int, int, int, int, int, int]
                        ) -> tuple[np.ndarray, bool] | None:
    """The input cube of a :func:`feature_source` as int8 pixels ``[H * W, C_pad]``
    (:func:`accel.cmod.cube.read_int8_pixels`) and whether they are all non-negative, or
    None."""
    base, c, h, w, line, surf = source
    return read_int8_pixels(dram, base, c, h, w, cfg.atom_size, line, surf, UNIT, sign=True)


def weight_offsets(k: int, c: int, r: int, s: int, atomic_k: int, atomic_c: int) -> np.ndarray:
    """Byte offsets ``[K, C, R, S]`` of direct-conv weights (NVDLA_FACTS section 2).

    Kernels are grouped by ``atomic_k`` (last group may be partial); inside a
    group the order is, innermost first, channel-in-block -> kernel -> S -> R
    -> channel block of ``atomic_c`` (last block partial, not padded).

    >>> weight_offsets(2, 3, 1, 1, atomic_k=2, atomic_c=2)[:, :, 0, 0].tolist()
    [[0, 1, 4], [2, 3, 5]]
    """
    ki = np.arange(k, dtype=np.int64)[:, None, None, None]
    ci = np.arange(c, dtype=np.int64)[None, :, None, None]
    ri = np.arange(r, dtype=np.int64)[None, None, :, None]
    si = np.arange(s, dtype=np.int64)[None, None, None, :]
    grp, kk = ki // atomic_k, ki % atomic_k
    kg = np.minimum(atomic_k, k - grp * atomic_k)  # kernels in this group
    blk, cc = ci // atomic_c, ci % atomic_c
    cw = np.minimum(atomic_c, c - blk * atomic_c)  # channels in this block
    return (grp * atomic_k * r * s * c + blk * atomic_c * r * s * kg
            + (ri * s + si) * kg * cw + kk * cw + cc)


def fetch_weight_bytes(g: GroupView, dram: Dram) -> np.ndarray:
    """The ``K * BYTE_PER_KERNEL`` packed weight bytes (uint8) as the CBUF receives them."""
    k = g("D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
    bpk = g("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
    check_elements(UNIT, f"weights of {k} kernels x {bpk} bytes", k * bpk, MAX_WEIGHT_BYTES)
    return dram.read(g.addr("D_WEIGHT_ADDR_LOW", "D_WEIGHT_ADDR_HIGH"), k * bpk, UNIT)


def check_kernels(g: GroupView, k: int, c: int, r: int, s: int) -> None:
    """CDMA's weight size against the CSC's kernels ``k`` of ``r x s x c``."""
    bpk = g("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
    if bpk != r * s * c:
        raise ConfigError(UNIT, "D_WEIGHT_SIZE_0", bpk - 1,
                          f"BYTE_PER_KERNEL+1={bpk} but the kernel is "
                          f"{r}x{s}x{c}={r * s * c} bytes")
    kernels = g("D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
    if kernels != k:
        raise ConfigError("CSC", "D_WEIGHT_SIZE_EXT_1", k - 1,
                          f"CSC kernels {k} != CDMA WEIGHT_KERNEL+1 {kernels}")


def unpack_weights(raw: np.ndarray, cfg: HwConfig, k: int, c: int, r: int, s: int) -> np.ndarray:
    """The int8 weights ``[K, C, R, S]`` (int64) of the packed bytes ``raw``.

    ``raw`` holds ``k * r * s * c`` bytes in :func:`weight_offsets` order.
    """
    offs = weight_offsets(k, c, r, s, cfg.atomic_k, cfg.atomic_c)
    return raw[offs].view(np.int8).astype(np.int64)
