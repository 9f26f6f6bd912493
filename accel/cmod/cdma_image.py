"""CDMA image input: pixel fetch, channel extraction, mean and input converter, padding.

With ``D_DATAIN_FORMAT.DATAIN_FORMAT = PIXEL`` the CDMA reads a pitch-linear
image instead of a feature cube and writes to the CBUF one line per image row:
``PAD_LEFT`` pad pixels, the ``W`` converted pixels, ``PAD_RIGHT`` pad pixels,
each pixel ``C`` consecutive int8 elements (C = 1, 3 or 4 by format).  The
formats' memory layouts are in :mod:`accel.pixel_formats`.  Facts from the
NVDLA cmod (``NV_NVDLA_cdma.cpp`` image request/response sequencers,
``hls/cdma_libs/cdma_cvt.cpp``) and RTL (``NV_NVDLA_CDMA_cvt.v`` assertions):

* **Fetch.** Row ``h`` of plane 0 starts at ``DAIN_ADDR_0 + h * LINE_STRIDE``;
  the image starts ``PIXEL_X_OFFSET`` pixels into the line.  Semi-planar YUV
  formats keep Y in plane 0 and the chroma pair in plane 1
  (``DAIN_ADDR_1 + h * LINE_UV_STRIDE``).  Plane 1 starts at the block of
  ``atom * e`` bytes holding the first fetched chroma pair (``e`` = bytes per
  element, 1 or 2), so pixel ``p`` of plane 1 is at byte
  ``b1 * p - floor(b1 * x_offset / (atom * e)) * atom * e`` (``b1`` = plane-1
  bytes per pixel).  A line that does not fit its stride is an error, as in
  the cmod.
* **Precision.** ``D_MISC_CFG.IN_PRECISION`` must be the format's (INT8 for
  8-bit, INT16 for 10/12/16-bit and packed, FP16 for ``_F``) and the preset
  must have it.  The CBUF receives ``PROC_PRECISION`` elements; a change of
  precision needs the converter (RTL: "cvt mode is not enable when format
  change"), and FP16 input stays FP16 ("invalid precision transform"; the HLS
  converter passes FP16 through).  This model computes INT8 processing only:
  INT16/FP16 processing raises :class:`UnsupportedError` naming the register.
* **Converter** (``D_CVT_CFG.CVT_EN``): the element is read unsigned, or
  signed with ``PIXEL_SIGN_OVERRIDE`` (17-bit input); ``(x - m) * CVT_SCALE``
  (34 bits), right shift by ``CVT_TRUNCATE`` with round half away from zero
  and saturation to 17 bits, then saturation to int8 (int16 for INT16
  processing).  ``m`` is the channel's ``D_MEAN_*`` (int16) when
  ``MEAN_FORMAT`` is enabled, otherwise ``CVT_OFFSET`` (int16).  Without the
  converter an 8-bit element passes through unchanged (as int8) and the mean
  is unused.
* **Padding.** Left/right pad pixels hold the low byte of CDMA
  ``D_ZERO_PADDING_VALUE``, unconverted; top/bottom padding is the CSC's.
"""

from __future__ import annotations

import numpy as np

from accel.arith import saturate, shift_round, sign_extend
from accel.cmod.csb import GroupView
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.config import HwConfig
from accel.pixel_formats import FP16, INT8, PIXEL_FORMATS, PRECISION_NAMES, PixelFormat, unpack

UNIT = "CDMA"

__all__ = ["PIXEL_FORMATS", "PixelFormat", "check_precision", "convert", "fetch_image",
           "fetch_pixels", "image_bytes", "pixel_format"]


def pixel_format(g: GroupView) -> PixelFormat:
    """The format programmed in CDMA ``D_DATAIN_FORMAT.PIXEL_FORMAT`` (clear error otherwise)."""
    code = g("D_DATAIN_FORMAT", "PIXEL_FORMAT")
    fmt = PIXEL_FORMATS.get(code)
    if fmt is None:
        raise ConfigError(UNIT, "D_DATAIN_FORMAT", g("D_DATAIN_FORMAT"),
                          f"PIXEL_FORMAT={code} is not a pixel format "
                          f"(0..{len(PIXEL_FORMATS) - 1})")
    return fmt


def _precision(g: GroupView, field: str) -> int:
    p = g("D_MISC_CFG", field)
    if p not in PRECISION_NAMES:
        raise ConfigError(UNIT, "D_MISC_CFG", g("D_MISC_CFG"),
                          f"{field}={p} is not INT8 (0), INT16 (1) or FP16 (2)")
    return p


def check_precision(g: GroupView, fmt: PixelFormat, cfg: HwConfig) -> None:
    """Check ``D_MISC_CFG`` precisions and ``CVT_EN`` against the format and the preset.

    Raises :class:`UnsupportedError` for formats the preset's hardware lacks
    and for INT16/FP16 processing (not modelled), :class:`ConfigError` for
    inconsistent programming.
    """
    need = PRECISION_NAMES[fmt.precision]
    has = {INT8: True, 1: cfg.feature_data_type_int16, FP16: cfg.feature_data_type_fp16}
    if not has[fmt.precision]:
        raise UnsupportedError(
            f"CDMA.D_DATAIN_FORMAT PIXEL_FORMAT={fmt.name}: {need} pixels need {need} feature "
            f"data, which {cfg.name} does not have (its CDMA reads 8-bit pixel formats only)")
    in_p, proc_p = _precision(g, "IN_PRECISION"), _precision(g, "PROC_PRECISION")
    if in_p != fmt.precision:
        raise ConfigError(UNIT, "D_MISC_CFG", g("D_MISC_CFG"),
                          f"IN_PRECISION={PRECISION_NAMES[in_p]} but {fmt.name} pixels are read "
                          f"as {need}")
    if in_p == FP16 and proc_p != FP16:
        raise ConfigError(UNIT, "D_MISC_CFG", g("D_MISC_CFG"),
                          f"FP16 pixels ({fmt.name}) cannot be converted to "
                          f"PROC_PRECISION={PRECISION_NAMES[proc_p]}: the converter passes FP16 "
                          "through")
    if proc_p != INT8:
        raise UnsupportedError(
            f"CDMA.D_MISC_CFG PROC_PRECISION={PRECISION_NAMES[proc_p]} (image {fmt.name}): "
            f"{PRECISION_NAMES[proc_p]} convolution is not modelled, only INT8 processing")
    if in_p != proc_p and not g("D_CVT_CFG", "CVT_EN"):
        raise ConfigError(UNIT, "D_CVT_CFG", g("D_CVT_CFG"),
                          f"{fmt.name} pixels ({need}) reach PROC_PRECISION=INT8 only through "
                          "the input converter: CVT_EN must be 1")


def _check_aligned(name: str, value: int, atom: int) -> None:
    if value % atom:
        raise ConfigError(UNIT, name, value, f"must be a multiple of the {atom}-byte atom")


def fetch_pixels(g: GroupView, dram: Dram, cfg: HwConfig) -> tuple[np.ndarray, PixelFormat]:
    """Unsigned channel values ``int64[H, W, C]`` in channel order (R, G, B, A / Y, U, V, A)."""
    fmt = pixel_format(g)
    check_precision(g, fmt, cfg)
    if g("D_DATAIN_FORMAT", "PIXEL_MAPPING") != 0:
        raise ConfigError(UNIT, "D_DATAIN_FORMAT", g("D_DATAIN_FORMAT"),
                          "PIXEL_MAPPING must be PITCH_LINEAR (RESERVED_LINEAR has no layout)")
    w = g("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = g("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    c = g("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    if c != fmt.channels:
        raise ConfigError(UNIT, "D_DATAIN_SIZE_1", c - 1,
                          f"DATAIN_CHANNEL+1={c} but {fmt.name} has {fmt.channels} channels")
    check_elements(UNIT, f"a {w}x{h} image of {fmt.name}",
                   w * h * (fmt.plane0_bytes + fmt.plane1_bytes))
    x_off = g("D_PIXEL_OFFSET", "PIXEL_X_OFFSET")
    atom = cfg.atom_size
    base0 = g.addr("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0")
    line = g("D_LINE_STRIDE")
    _check_aligned("D_DAIN_ADDR_LOW_0", base0, atom)
    _check_aligned("D_LINE_STRIDE", line, atom)
    if (x_off + w) * fmt.plane0_bytes > line:
        raise ConfigError(UNIT, "D_LINE_STRIDE", line,
                          f"a line of {x_off}+{w} pixels x {fmt.plane0_bytes} B does not fit")
    hi = np.arange(h, dtype=np.int64)[:, None, None]
    wi = np.arange(w, dtype=np.int64)[None, :, None] + x_off
    b0 = np.arange(fmt.plane0_bytes, dtype=np.int64)[None, None, :]
    raw = dram.gather(base0, hi * line + wi * fmt.plane0_bytes + b0, UNIT)
    if fmt.plane1_bytes:
        base1 = g.addr("D_DAIN_ADDR_LOW_1", "D_DAIN_ADDR_HIGH_1")
        uv_line = g("D_LINE_UV_STRIDE")
        _check_aligned("D_DAIN_ADDR_LOW_1", base1, atom)
        _check_aligned("D_LINE_UV_STRIDE", uv_line, atom)
        # the cmod counts plane-1 blocks in atoms of elements (atom * element bytes) and
        # skips at most one: the first chroma pair must lie in the first two blocks
        block = atom * fmt.element_bytes
        if x_off >= atom:
            raise ConfigError(UNIT, "D_PIXEL_OFFSET", g("D_PIXEL_OFFSET"),
                              f"PIXEL_X_OFFSET={x_off} must be below the {atom}-byte atom "
                              f"for semi-planar {fmt.name}")
        skip = (x_off * fmt.plane1_bytes) // block * block
        if x_off * fmt.plane1_bytes - skip + w * fmt.plane1_bytes > uv_line:
            raise ConfigError(UNIT, "D_LINE_UV_STRIDE", uv_line,
                              f"a chroma line of {w} pixels x {fmt.plane1_bytes} B does not fit")
        b1 = np.arange(fmt.plane1_bytes, dtype=np.int64)[None, None, :]
        raw1 = dram.gather(base1, hi * uv_line + wi * fmt.plane1_bytes - skip + b1, UNIT)
        raw = np.concatenate([raw, raw1], axis=2)
    return unpack(raw, fmt), fmt


def convert(x: np.ndarray, mean: np.ndarray, scale: int, truncate: int,
            out_bits: int = 8) -> np.ndarray:
    """Input converter on channel values ``x[..., C]`` (already signed or unsigned as read).

    ``mean`` (one int16 per channel) is subtracted, the difference multiplied
    by the int16 ``scale``, shifted right by ``truncate`` with round half away
    from zero, saturated to 17 bits and then to ``out_bits`` (8 or 16).

    >>> convert(np.array([65472, -64]), np.array([0]), 1, 6).tolist()
    [127, -1]
    >>> convert(np.array([65472]), np.array([0]), 1, 0, out_bits=16).tolist()
    [32767]
    """
    y = (np.asarray(x, np.int64) - np.asarray(mean, np.int64)) * scale
    return saturate(saturate(shift_round(y, min(truncate, 40)), 17), out_bits)


def fetch_image(g: GroupView, dram: Dram, cfg: HwConfig) -> tuple[np.ndarray, PixelFormat]:
    """CBUF image lines ``int64[H, (PAD_LEFT + W + PAD_RIGHT) * C]`` and the format.

    Element ``(h, p * C + c)`` is channel ``c`` of padded pixel ``p`` of row ``h``.
    """
    px, fmt = fetch_pixels(g, dram, cfg)
    if g("D_CVT_CFG", "CVT_EN"):
        if g("D_MEAN_FORMAT", "MEAN_FORMAT"):
            means = [g("D_MEAN_GLOBAL_0", "MEAN_RY"), g("D_MEAN_GLOBAL_0", "MEAN_GU"),
                     g("D_MEAN_GLOBAL_1", "MEAN_BV"), g("D_MEAN_GLOBAL_1", "MEAN_AX")]
            mean = sign_extend(np.array(means[:fmt.channels], np.int64), 16)
        else:
            mean = np.full(fmt.channels, int(sign_extend(g("D_CVT_OFFSET", "CVT_OFFSET"), 16)))
        if g("D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE"):
            px = sign_extend(px, fmt.bits)
        x = convert(px, mean, int(sign_extend(g("D_CVT_SCALE", "CVT_SCALE"), 16)),
                    g("D_CVT_CFG", "CVT_TRUNCATE"))
    else:  # INT8 in and out (check_precision): the byte goes to the CBUF as it is
        x = sign_extend(px, 8)
    left, right = g("D_ZERO_PADDING", "PAD_LEFT"), g("D_ZERO_PADDING", "PAD_RIGHT")
    pad = int(sign_extend(g("D_ZERO_PADDING_VALUE", "PAD_VALUE") & 0xFF, 8))
    x = np.pad(x, ((0, 0), (left, right), (0, 0)), constant_values=pad)
    return x.reshape(x.shape[0], -1), fmt


def image_bytes(fmt: PixelFormat, h: int, w: int) -> int:
    """Bytes the CDMA reads for an ``h x w`` image (both planes)."""
    return h * w * (fmt.plane0_bytes + fmt.plane1_bytes)
