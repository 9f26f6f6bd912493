"""CDMA image input: pixel fetch, channel extraction, mean and input converter, padding.

With ``D_DATAIN_FORMAT.DATAIN_FORMAT = PIXEL`` the CDMA reads a pitch-linear
image instead of a feature cube and writes to the CBUF one line per image row:
``PAD_LEFT`` pad pixels, the ``W`` converted pixels, ``PAD_RIGHT`` pad pixels,
each pixel ``C`` consecutive int8 elements (C = 1, 3 or 4 by format).  Facts
from the NVDLA cmod (``NV_NVDLA_cdma.cpp`` image request/response sequencers,
``hls/cdma_libs/cdma_cvt.cpp``):

* **Fetch.** Row ``h`` of plane 0 starts at ``DAIN_ADDR_0 + h * LINE_STRIDE``;
  the image starts ``PIXEL_X_OFFSET`` pixels into the line.  Semi-planar YUV
  formats keep Y in plane 0 (1 byte/pixel) and the chroma pair in plane 1
  (``DAIN_ADDR_1 + h * LINE_UV_STRIDE``, 2 bytes/pixel); plane 1 starts at the
  atom holding the first fetched chroma pair, so pixel ``p`` of plane 1 is at
  byte ``2p - floor(2 * x_offset / atom) * atom``.  A line that does not fit
  its stride is an error, as in the cmod.
* **Channel order.** Channels are stored R, G, B, A (Y, U, V, A) whatever
  the memory order; :data:`PIXEL_FORMATS` lists the byte of each channel
  (byte 0 = lowest address; ``T_A8B8G8R8`` names the most significant byte
  first, so R is byte 0).  X channels are read like A.
* **Converter** (``D_CVT_CFG.CVT_EN``): the byte is read unsigned, or signed
  with ``PIXEL_SIGN_OVERRIDE``; ``(x - m) * CVT_SCALE`` (34 bits), right shift
  by ``CVT_TRUNCATE`` with round half away from zero and saturation to 17 bits,
  then saturation to int8.  ``m`` is the channel's ``D_MEAN_*`` (int16) when
  ``MEAN_FORMAT`` is enabled, otherwise ``CVT_OFFSET`` (int16).  Without the
  converter the byte passes through unchanged (as int8) and the mean is unused.
* **Padding.** Left/right pad pixels hold the low byte of CDMA
  ``D_ZERO_PADDING_VALUE``, unconverted; top/bottom padding is the CSC's.

Only the 8-bit formats are modelled (every int8-only preset's CDMA reads 8-bit
pixels); 10/12/16-bit and fp16 formats raise :class:`UnsupportedError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.arith import saturate, shift_round, sign_extend
from accel.cmod.csb import GroupView
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.config import HwConfig

UNIT = "CDMA"


@dataclass(frozen=True)
class PixelFormat:
    """An 8-bit pixel format: bytes per pixel in each plane and the byte of each channel.

    ``channel_bytes[i]`` indexes the pixel's bytes, plane 0 first then plane 1.
    """

    name: str
    plane0_bytes: int
    plane1_bytes: int
    channel_bytes: tuple[int, ...]

    @property
    def channels(self) -> int:
        return len(self.channel_bytes)


_RGBA = (0, 1, 2, 3)  # byte i -> channel i
_ARGB = (2, 1, 0, 3)  # *8R8G8B8: B G R A in memory
_BGRA = (1, 2, 3, 0)  # B8G8R8*8: A R G B in memory
_RGBA_REV = (3, 2, 1, 0)  # R8G8B8*8: A B G R in memory

#: D_DATAIN_FORMAT.PIXEL_FORMAT value -> 8-bit format this model reads.
PIXEL_FORMATS: dict[int, PixelFormat] = {
    0: PixelFormat("T_R8", 1, 0, (0,)),
    12: PixelFormat("T_A8B8G8R8", 4, 0, _RGBA),
    13: PixelFormat("T_A8R8G8B8", 4, 0, _ARGB),
    14: PixelFormat("T_B8G8R8A8", 4, 0, _BGRA),
    15: PixelFormat("T_R8G8B8A8", 4, 0, _RGBA_REV),
    16: PixelFormat("T_X8B8G8R8", 4, 0, _RGBA),
    17: PixelFormat("T_X8R8G8B8", 4, 0, _ARGB),
    18: PixelFormat("T_B8G8R8X8", 4, 0, _BGRA),
    19: PixelFormat("T_R8G8B8X8", 4, 0, _RGBA_REV),
    26: PixelFormat("T_A8Y8U8V8", 4, 0, _ARGB),
    27: PixelFormat("T_V8U8Y8A8", 4, 0, _BGRA),
    # semi-planar 4:4:4: Y in plane 0; "U8V8" names V first, i.e. V is the lower byte
    28: PixelFormat("T_Y8___U8V8_N444", 1, 2, (0, 2, 1)),
    29: PixelFormat("T_Y8___V8U8_N444", 1, 2, (0, 1, 2)),
}


def pixel_format(g: GroupView) -> PixelFormat:
    """The 8-bit format programmed in CDMA ``D_DATAIN_FORMAT`` (clear error otherwise)."""
    code = g("D_DATAIN_FORMAT", "PIXEL_FORMAT")
    fmt = PIXEL_FORMATS.get(code)
    if fmt is None:
        reg = g.regs.unit.registers["D_DATAIN_FORMAT"]
        names = {v: k for k, v in reg.field("PIXEL_FORMAT").enums.items()}
        raise UnsupportedError(
            f"CDMA pixel format {names.get(code, code)} ({code}) is not modelled: only 8-bit "
            f"formats ({', '.join(f.name for f in PIXEL_FORMATS.values())}) are")
    return fmt


def _check_aligned(name: str, value: int, atom: int) -> None:
    if value % atom:
        raise ConfigError(UNIT, name, value, f"must be a multiple of the {atom}-byte atom")


def fetch_pixels(g: GroupView, dram: Dram, cfg: HwConfig) -> tuple[np.ndarray, PixelFormat]:
    """Raw pixel bytes ``uint8[H, W, C]`` in channel order (R, G, B, A / Y, U, V, A)."""
    fmt = pixel_format(g)
    if g("D_DATAIN_FORMAT", "PIXEL_MAPPING") != 0:
        raise ConfigError(UNIT, "D_DATAIN_FORMAT", g("D_DATAIN_FORMAT"),
                          "PIXEL_MAPPING must be PITCH_LINEAR (RESERVED_LINEAR has no layout)")
    w = g("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = g("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    c = g("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    if c != fmt.channels:
        raise ConfigError(UNIT, "D_DATAIN_SIZE_1", c - 1,
                          f"DATAIN_CHANNEL+1={c} but {fmt.name} has {fmt.channels} channels")
    check_elements(UNIT, f"a {w}x{h} image of {fmt.name}", w * h * c)
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
        if x_off >= atom:  # plane 1 starts in the atom of its first chroma pair
            raise ConfigError(UNIT, "D_PIXEL_OFFSET", g("D_PIXEL_OFFSET"),
                              f"PIXEL_X_OFFSET={x_off} must be below the {atom}-byte atom "
                              f"for semi-planar {fmt.name}")
        skip = (x_off * fmt.plane1_bytes) // atom * atom
        if x_off * fmt.plane1_bytes - skip + w * fmt.plane1_bytes > uv_line:
            raise ConfigError(UNIT, "D_LINE_UV_STRIDE", uv_line,
                              f"a chroma line of {w} pixels x {fmt.plane1_bytes} B does not fit")
        b1 = np.arange(fmt.plane1_bytes, dtype=np.int64)[None, None, :]
        raw1 = dram.gather(base1, hi * uv_line + wi * fmt.plane1_bytes - skip + b1, UNIT)
        raw = np.concatenate([raw, raw1], axis=2)
    return raw[:, :, list(fmt.channel_bytes)], fmt


def convert(px: np.ndarray, signed: bool, mean: np.ndarray, scale: int,
            truncate: int) -> np.ndarray:
    """Input converter on raw bytes ``px[..., C]``: int8 result as int64.

    ``mean`` (one int16 per channel) is subtracted, the difference multiplied
    by the int16 ``scale``, shifted right by ``truncate`` with round half away
    from zero, saturated to 17 bits and then to 8.
    """
    x = px.view(np.int8) if signed else px
    y = (x.astype(np.int64) - np.asarray(mean, np.int64)) * scale
    return saturate(saturate(shift_round(y, min(truncate, 40)), 17), 8)


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
        x = convert(px, bool(g("D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE")), mean,
                    int(sign_extend(g("D_CVT_SCALE", "CVT_SCALE"), 16)),
                    g("D_CVT_CFG", "CVT_TRUNCATE"))
    else:  # the byte goes to the CBUF as it is
        x = px.view(np.int8).astype(np.int64)
    left, right = g("D_ZERO_PADDING", "PAD_LEFT"), g("D_ZERO_PADDING", "PAD_RIGHT")
    pad = int(sign_extend(g("D_ZERO_PADDING_VALUE", "PAD_VALUE") & 0xFF, 8))
    x = np.pad(x, ((0, 0), (left, right), (0, 0)), constant_values=pad)
    return x.reshape(x.shape[0], -1), fmt


def image_bytes(fmt: PixelFormat, h: int, w: int) -> int:
    """Bytes the CDMA reads for an ``h x w`` image (both planes)."""
    return h * w * (fmt.plane0_bytes + fmt.plane1_bytes)
