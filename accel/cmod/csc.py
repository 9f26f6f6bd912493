"""CSC: convolution sequence controller - the data/weight geometry of a direct conv.

Turns the input cube into im2col patches: zero padding with the programmed pad
value, convolution strides and dilation, exactly the atoms the CSC would feed
to the MAC array, but as one array so CMAC can do one GEMM.

Image input (``D_DATAIN_FORMAT = PIXEL``) uses *channel pre-extended* kernels
(NVDLA_FACTS section 2): the programmed kernel is ``R x 1`` with
``WEIGHT_CHANNEL_EXT + 1 = S * C`` channels, channel ``s * C + c`` weighting
channel ``c`` of the ``s``-th pixel.  Output pixel ``x`` reads those ``S * C``
consecutive elements of a padded image line from element ``x * stride_x * C``
(cmod ``SendImageDataToMacSequencerConvCommon``); rows above/below the image
read the pad value.  :func:`image_cube` lays these windows out as an ordinary
``[S*C, H, out_w]`` cube so the direct path (im2col, one GEMM) does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accel.arith import sign_extend
from accel.cmod.csb import GroupView
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements

UNIT = "CSC"


@dataclass(frozen=True)
class ConvGeometry:
    """Kernel ``r x s``, output ``out_h x out_w x k``, strides, dilation, padding."""

    r: int
    s: int
    c: int
    k: int
    out_h: int
    out_w: int
    stride_y: int
    stride_x: int
    dil_y: int
    dil_x: int
    pad_top: int
    pad_left: int
    pad_value: int
    image: bool = False


def geometry(g: GroupView) -> ConvGeometry:
    """Read the CSC registers of a direct int8 convolution (feature or image input)."""
    if g("D_MISC_CFG", "CONV_MODE") != 0:
        raise UnsupportedError("CSC Winograd convolution is not modelled")
    # int8 lanes pad with the low byte of the 16-bit PAD_VALUE field
    pad_value = int(sign_extend(g("D_ZERO_PADDING_VALUE", "PAD_VALUE"), 8))
    return ConvGeometry(
        r=g("D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1,
        s=g("D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1,
        c=g("D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1,
        k=g("D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL") + 1,
        out_h=g("D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1,
        out_w=g("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1,
        stride_y=g("D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1,
        stride_x=g("D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1,
        dil_y=g("D_DILATION_EXT", "Y_DILATION_EXT") + 1,
        dil_x=g("D_DILATION_EXT", "X_DILATION_EXT") + 1,
        pad_top=g("D_ZERO_PADDING", "PAD_TOP"),
        pad_left=g("D_ZERO_PADDING", "PAD_LEFT"),
        pad_value=pad_value,
        image=bool(g("D_DATAIN_FORMAT", "DATAIN_FORMAT")),
    )


def image_cube(lines: np.ndarray, channels: int, geo: ConvGeometry,
               g: GroupView) -> tuple[np.ndarray, ConvGeometry]:
    """Pre-extended image windows as a cube ``[S*C, H, out_w]`` and the geometry to run it.

    ``lines`` are the CDMA's padded image lines ``[H, L * C]``; ``channels`` is
    C.  The returned geometry is a ``R x 1`` kernel at x stride 1 without left
    padding, so :func:`im2col` applies only the vertical stride and padding.
    """
    if geo.s != 1:
        raise ConfigError(UNIT, "D_WEIGHT_SIZE_EXT_0", g("D_WEIGHT_SIZE_EXT_0"),
                          f"image input needs a pre-extended kernel of width 1, not {geo.s}")
    if geo.dil_x != 1 or geo.dil_y != 1:
        raise ConfigError(UNIT, "D_DILATION_EXT", g("D_DILATION_EXT"),
                          "image input does not support dilation")
    if g("D_POST_Y_EXTENSION", "Y_EXTENSION"):
        raise UnsupportedError("CSC image post-Y-extension (x2/x4 weights) is not modelled")
    c_ext = g("D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1
    if c_ext != channels:
        raise ConfigError(UNIT, "D_DATAIN_SIZE_EXT_1", c_ext - 1,
                          f"CSC image channels {c_ext} != CDMA pixel channels {channels}")
    h_ext = g("D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1
    if h_ext != lines.shape[0]:
        raise ConfigError(UNIT, "D_DATAIN_SIZE_EXT_0", g("D_DATAIN_SIZE_EXT_0"),
                          f"CSC image height {h_ext} != CDMA image height {lines.shape[0]}")
    check_elements(UNIT, f"image windows of {geo.c} by {lines.shape[0]}x{geo.out_w}",
                   geo.c * lines.shape[0] * geo.out_w)
    start = np.arange(geo.out_w, dtype=np.int64) * (geo.stride_x * channels)
    if int(start[-1]) + geo.c > lines.shape[1]:
        raise ConfigError(UNIT, "D_DATAOUT_SIZE_0", g("D_DATAOUT_SIZE_0"),
                          f"output pixel {geo.out_w - 1} reads elements up to "
                          f"{int(start[-1]) + geo.c} of a padded image line of {lines.shape[1]} "
                          f"({lines.shape[1] // channels} pixels x {channels} channels)")
    windows = lines[:, start[:, None] + np.arange(geo.c, dtype=np.int64)[None, :]]
    return (np.ascontiguousarray(windows.transpose(2, 0, 1)),
            replace(geo, s=1, stride_x=1, dil_x=1, pad_left=0))


def im2col(x: np.ndarray, geo: ConvGeometry, dtype: type | None = None) -> np.ndarray:
    """Patches ``[C*R*S, out_h*out_w]`` (C major, then R, then S) of the cube ``x[C, H, W]``.

    Positions outside the input read ``geo.pad_value``.  The loop runs over the
    R*S kernel taps only; each tap is one strided slice of the padded cube.
    ``dtype``: of the patches when they are copied (the GEMM's float32: converted
    as they are gathered rather than in a pass of their own); a 1x1 convolution
    without padding returns its pixels as they are, in ``x``'s dtype.
    """
    c, h, w = x.shape
    check_elements("CSC", f"im2col of {c}x{geo.r}x{geo.s} taps by {geo.out_h}x{geo.out_w} "
                          "outputs", c * geo.r * geo.s * geo.out_h * geo.out_w)
    need_h = (geo.out_h - 1) * geo.stride_y + (geo.r - 1) * geo.dil_y + 1
    need_w = (geo.out_w - 1) * geo.stride_x + (geo.s - 1) * geo.dil_x + 1
    y0, x0 = geo.pad_top, geo.pad_left
    if y0 == x0 == 0 and need_h <= h and need_w <= w:
        padded = x           # every window lies inside the input: no padded copy
        if geo.r == geo.s == 1:   # 1x1: the patches are the (subsampled) pixels themselves
            return x[:, :need_h:geo.stride_y, :need_w:geo.stride_x].reshape(
                c, geo.out_h * geo.out_w)
    else:
        padded = np.full((c, need_h, need_w), geo.pad_value, dtype=x.dtype)
        # the input occupies rows [pad_top, pad_top + h) of the padded frame, clipped to it
        hh, ww = max(0, min(h, need_h - y0)), max(0, min(w, need_w - x0))
        padded[:, y0:y0 + hh, x0:x0 + ww] = x[:, :hh, :ww]
    cols = np.empty((c, geo.r, geo.s, geo.out_h, geo.out_w), dtype=dtype or x.dtype)
    ye = (geo.out_h - 1) * geo.stride_y + 1
    xe = (geo.out_w - 1) * geo.stride_x + 1
    for r in range(geo.r):
        for s in range(geo.s):
            ys, xs = r * geo.dil_y, s * geo.dil_x
            cols[:, r, s] = padded[:, ys:ys + ye:geo.stride_y, xs:xs + xe:geo.stride_x]
    return cols.reshape(c * geo.r * geo.s, geo.out_h * geo.out_w)


def im2col_rows(x: np.ndarray, geo: ConvGeometry, offset: bool = False) -> np.ndarray:
    """Patches ``[out_h*out_w, R*S*C]`` of the cube ``x[C, H, W]``: one row per output
    pixel, its taps R major, then S, then C (:func:`im2col` transposed, with the taps in
    that order).  Positions outside the input read ``geo.pad_value``.  ``offset``: int8
    values as offset binary (uint8 ``v + 128``), converted in the padded frame, before
    the taps multiply them."""
    return im2col_pixels(x.transpose(1, 2, 0), geo, offset)


def im2col_pixels(x: np.ndarray, geo: ConvGeometry, offset: bool = False) -> np.ndarray:
    """:func:`im2col_rows` of the cube given channels last, ``x[H, W, C]`` (as pixels read
    from memory hold it, a pixel's channels side by side)."""
    h, w, c = x.shape
    pad_value = geo.pad_value
    if offset:
        x, pad_value = x.view(np.uint8) ^ np.uint8(0x80), (pad_value + 128) & 0xFF
    check_elements("CSC", f"im2col of {c}x{geo.r}x{geo.s} taps by {geo.out_h}x{geo.out_w} "
                          "outputs", c * geo.r * geo.s * geo.out_h * geo.out_w)
    need_h = (geo.out_h - 1) * geo.stride_y + (geo.r - 1) * geo.dil_y + 1
    need_w = (geo.out_w - 1) * geo.stride_x + (geo.s - 1) * geo.dil_x + 1
    y0, x0 = geo.pad_top, geo.pad_left
    # the padded frame with the channels innermost: each tap is then a block of C bytes
    frame = np.full((need_h, need_w, c), pad_value, dtype=x.dtype)
    hh, ww = max(0, min(h, need_h - y0)), max(0, min(w, need_w - x0))
    frame[y0:y0 + hh, x0:x0 + ww] = x[:hh, :ww]
    ye = (geo.out_h - 1) * geo.stride_y + 1
    xe = (geo.out_w - 1) * geo.stride_x + 1
    if geo.r == geo.s == 1:
        return np.ascontiguousarray(frame[:ye:geo.stride_y, :xe:geo.stride_x]).reshape(
            geo.out_h * geo.out_w, c)
    cols = np.empty((geo.out_h, geo.out_w, geo.r, geo.s, c), dtype=x.dtype)
    for r in range(geo.r):
        for s in range(geo.s):
            ys, xs = r * geo.dil_y, s * geo.dil_x
            cols[:, :, r, s] = frame[ys:ys + ye:geo.stride_y, xs:xs + xe:geo.stride_x]
    return cols.reshape(geo.out_h * geo.out_w, geo.r * geo.s * c)
