"""CDMA pixel formats: the memory layout of every ``D_DATAIN_FORMAT.PIXEL_FORMAT`` value.

Facts from the NVDLA cmod (``NV_NVDLA_cdma.cpp``: ``cdma_bytes_per_pixel``,
``cdma_bytes_per_pixel_planar0/1``, ``packed_format`` and the per-format
unpacking of ``ImageConvDataResponseSequencerCommon``) and the RTL pixel-format
parser (``NV_NVDLA_CDMA_IMG_ctrl.v``):

* **Names** list the components most significant first on a little-endian
  pixel word, so ``T_A8B8G8R8`` stores R in byte 0 and ``T_A16Y16U16V16``
  stores V in 16-bit word 0.  Channels reach the CBUF as R, G, B, A (Y, U,
  V, A) whatever the memory order; X is read like A.
* **8-bit** formats hold one byte per component.
* **16-bit containers**: ``T_R10``/``T_R12``/``T_R16``/``T_R16_I``, the
  ``*16*`` formats and the ``Y10/Y12/Y16`` semi-planar formats hold one
  little-endian 16-bit word per component, used as stored (10- and 12-bit
  values are not shifted).
* **Packed 10-bit** (``T_A2B10G10R10`` ...): one 32-bit word per pixel; each
  10-bit component is left-aligned to 16 bits (``<< 6``) and the 2-bit alpha
  to ``<< 14`` before the input converter.
* **Semi-planar** 4:4:4: Y in plane 0, the chroma pair in plane 1 (one element
  each for U and V); ``U8V8`` names V as the lower element.
* **Precision**: 8-bit formats are read with ``IN_PRECISION = INT8``, 16-bit
  containers and packed formats with ``INT16``, the ``_F`` formats with
  ``FP16``.  The int8-only RTL (``#ifndef NVDLA_FEATURE_DATA_TYPE_INT8``)
  compiles every non-8-bit format out of the parser.
* **Sign**: integer elements are unsigned unless ``PIXEL_SIGN_OVERRIDE`` is
  set, for every format (RTL ``pixel_uint = !sign_override``; the cmod's
  ``process_one_element_*`` override the per-format type), so even
  ``T_R16_I`` is read unsigned without the override.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``D_MISC_CFG.IN_PRECISION`` / ``PROC_PRECISION`` values.
INT8, INT16, FP16 = 0, 1, 2
PRECISION_NAMES = {INT8: "INT8", INT16: "INT16", FP16: "FP16"}


@dataclass(frozen=True)
class PixelFormat:
    """Bytes per pixel in each plane and where each channel (R, G, B, A order) is stored.

    ``channel_elements[i]`` indexes the pixel's elements of ``element_bytes``
    bytes, plane 0 first then plane 1.  Packed formats instead give
    ``packed_fields[i] = (lsb, width)`` inside the 32-bit pixel word.
    ``precision`` is the ``IN_PRECISION`` the format is read with.
    """

    name: str
    plane0_bytes: int
    plane1_bytes: int
    element_bytes: int
    channel_elements: tuple[int, ...] = ()
    packed_fields: tuple[tuple[int, int], ...] = ()
    precision: int = INT8

    @property
    def channels(self) -> int:
        return len(self.packed_fields or self.channel_elements)

    @property
    def bits(self) -> int:
        """Width of a channel value before the converter (8 or 16)."""
        return 8 if self.precision == INT8 else 16


def _b8(name: str, plane0: int, order: tuple[int, ...], plane1: int = 0) -> PixelFormat:
    return PixelFormat(name, plane0, plane1, 1, order)


def _w16(name: str, plane0: int, order: tuple[int, ...], plane1: int = 0,
         precision: int = INT16) -> PixelFormat:
    return PixelFormat(name, plane0, plane1, 2, order, precision=precision)


def _p10(name: str, fields: tuple[tuple[int, int], ...]) -> PixelFormat:
    return PixelFormat(name, 4, 0, 4, packed_fields=fields, precision=INT16)


_RGBA = (0, 1, 2, 3)  # element i -> channel i
_ARGB = (2, 1, 0, 3)  # *R*G*B: B G R A in memory
_BGRA = (1, 2, 3, 0)  # B*G*R*A: A R G B in memory
_RGBA_REV = (3, 2, 1, 0)  # R*G*B*A: A B G R in memory
_UV = (0, 2, 1)  # Y, then "U*V*": V is the lower plane-1 element
_VU = (0, 1, 2)
# packed (lsb, width) of R, G, B, A in the 32-bit word
_A2B10G10R10 = ((0, 10), (10, 10), (20, 10), (30, 2))
_A2R10G10B10 = ((20, 10), (10, 10), (0, 10), (30, 2))
_B10G10R10A2 = ((2, 10), (12, 10), (22, 10), (0, 2))
_R10G10B10A2 = ((22, 10), (12, 10), (2, 10), (0, 2))

#: ``D_DATAIN_FORMAT.PIXEL_FORMAT`` value -> layout (all 36 values of the RDL enum).
PIXEL_FORMATS: dict[int, PixelFormat] = {
    0: _b8("T_R8", 1, (0,)),
    1: _w16("T_R10", 2, (0,)),
    2: _w16("T_R12", 2, (0,)),
    3: _w16("T_R16", 2, (0,)),
    4: _w16("T_R16_I", 2, (0,)),
    5: _w16("T_R16_F", 2, (0,), precision=FP16),
    6: _w16("T_A16B16G16R16", 8, _RGBA),
    7: _w16("T_X16B16G16R16", 8, _RGBA),
    8: _w16("T_A16B16G16R16_F", 8, _RGBA, precision=FP16),
    9: _w16("T_A16Y16U16V16", 8, _ARGB),
    10: _w16("T_V16U16Y16A16", 8, _BGRA),
    11: _w16("T_A16Y16U16V16_F", 8, _ARGB, precision=FP16),
    12: _b8("T_A8B8G8R8", 4, _RGBA),
    13: _b8("T_A8R8G8B8", 4, _ARGB),
    14: _b8("T_B8G8R8A8", 4, _BGRA),
    15: _b8("T_R8G8B8A8", 4, _RGBA_REV),
    16: _b8("T_X8B8G8R8", 4, _RGBA),
    17: _b8("T_X8R8G8B8", 4, _ARGB),
    18: _b8("T_B8G8R8X8", 4, _BGRA),
    19: _b8("T_R8G8B8X8", 4, _RGBA_REV),
    20: _p10("T_A2B10G10R10", _A2B10G10R10),
    21: _p10("T_A2R10G10B10", _A2R10G10B10),
    22: _p10("T_B10G10R10A2", _B10G10R10A2),
    23: _p10("T_R10G10B10A2", _R10G10B10A2),
    24: _p10("T_A2Y10U10V10", _A2R10G10B10),
    25: _p10("T_V10U10Y10A2", _B10G10R10A2),
    26: _b8("T_A8Y8U8V8", 4, _ARGB),
    27: _b8("T_V8U8Y8A8", 4, _BGRA),
    28: _b8("T_Y8___U8V8_N444", 1, _UV, plane1=2),
    29: _b8("T_Y8___V8U8_N444", 1, _VU, plane1=2),
    30: _w16("T_Y10___U10V10_N444", 2, _UV, plane1=4),
    31: _w16("T_Y10___V10U10_N444", 2, _VU, plane1=4),
    32: _w16("T_Y12___U12V12_N444", 2, _UV, plane1=4),
    33: _w16("T_Y12___V12U12_N444", 2, _VU, plane1=4),
    34: _w16("T_Y16___U16V16_N444", 2, _UV, plane1=4),
    35: _w16("T_Y16___V16U16_N444", 2, _VU, plane1=4),
}


def unpack(raw: np.ndarray, fmt: PixelFormat) -> np.ndarray:
    """Unsigned channel values ``int64[..., C]`` of the pixel bytes ``raw[..., plane0 + plane1]``.

    Values are 0..255 for 8-bit formats and 0..65535 otherwise (packed
    components left-aligned to 16 bits).
    """
    raw = np.asarray(raw, dtype=np.int64)
    if fmt.packed_fields:
        word = raw[..., 0] | raw[..., 1] << 8 | raw[..., 2] << 16 | raw[..., 3] << 24
        return np.stack([((word >> lsb) & ((1 << width) - 1)) << (16 - width)
                         for lsb, width in fmt.packed_fields], axis=-1)
    if fmt.element_bytes == 2:
        raw = raw[..., 0::2] | raw[..., 1::2] << 8  # little-endian 16-bit elements
    return raw[..., list(fmt.channel_elements)]
