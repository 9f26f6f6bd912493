"""CDMA image input in 10/12/16-bit, packed 10-bit and fp16 pixel formats.

Expected channel values come from the format *name* and storage rules
written here (independent of :mod:`accel.pixel_formats`'s table):

* components are listed most significant first on a little-endian pixel
  word; planes are separated by ``___`` (Y in plane 0, the chroma pair in
  plane 1);
* a 10- or 12-bit component of a non-packed format sits in a 16-bit
  container, read as stored;
* a packed format (one with a 2-bit component) fills one 32-bit word, and
  each component reaches the converter left-aligned to 16 bits;
* channels reach the MACs as R, G, B, A (X read like A) or Y, U, V, A.

The converter reference is a plain loop: ``sat8(round_half_away((x - mean)
* scale / 2**truncate))`` on the element read unsigned, or as 16-bit two's
complement with ``PIXEL_SIGN_OVERRIDE``.  Formats with 16-bit elements exist
only on presets with int16 feature data (nv_full); int8-only presets raise.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from accel.cmod import ConfigError, UnsupportedError
from accel.regs import lookup
from tests.accel.cmod.test_cdma_image import _rshift_round, _run, _sat

RDL_CODES = dict(lookup("NVDLA_CDMA.D_DATAIN_FORMAT_0").field("PIXEL_FORMAT").enums)
INT16_IN = 1 << 8  # CDMA D_MISC_CFG: IN_PRECISION=INT16, PROC_PRECISION=INT8
NEW_INT_FORMATS = [n for n in RDL_CODES
                   if not re.search(r"\D8(\D|$)", n[2:] + "_") and not n.endswith("_F")]


def _layout(name: str) -> list[tuple[str, int, int, int, bool]]:
    """``(component, plane, lsb, width, packed)`` of each named component."""
    body = re.sub(r"_(N444|F|I)$", "", name[2:])
    out = []
    for plane, part in enumerate(body.split("___")):
        comps = [(c, int(b)) for c, b in re.findall(r"([A-Z])(\d+)", part)]
        packed = any(b == 2 for _, b in comps)
        widths = [b if packed or b == 8 else 16 for _, b in comps]
        pos = sum(widths)
        for (comp, _), width in zip(comps, widths, strict=True):
            pos -= width
            out.append((comp, plane, pos, width, packed))
    return out


def _plane_bytes(name: str) -> list[int]:
    lay = _layout(name)
    return [sum(w for _, p, _, w, _ in lay if p == plane) // 8 for plane in (0, 1)]


def _channels(name: str, pix: list[bytes]) -> list[int]:
    """Unsigned channel values of one pixel (``pix[plane]`` its bytes), R G B A / Y U V A order."""
    order = "RGBAX" if any(c in "RGB" for c, *_ in _layout(name)) else "YUVA"
    vals = []
    for comp, plane, lsb, width, packed in _layout(name):
        word = int.from_bytes(pix[plane], "little")
        v = (word >> lsb) & ((1 << width) - 1)
        vals.append((order.index(comp) if comp != "X" else 3, v << (16 - width) if packed else v))
    return [v for _, v in sorted(vals)]


def _cvt(v: int, signed: bool, mean: int, scale: int, trunc: int) -> int:
    if signed and v >= 1 << 15:
        v -= 1 << 16
    return _sat(_sat(_rshift_round((v - mean) * scale, trunc), 17), 8)


def _image(name, rng, w, h, x_off, line, uv_line, uv_skip=0):
    """Random planes; returns (plane0, plane1 or None, pixel bytes [h][w][plane])."""
    b0, b1 = _plane_bytes(name)
    full0 = rng.integers(0, 256, size=(h, line), dtype=np.uint8)
    full1 = rng.integers(0, 256, size=(h, uv_skip + uv_line), dtype=np.uint8)
    pix = [[[bytes(full0[y, (x + x_off) * b0:(x + x_off + 1) * b0]),
             bytes(full1[y, (x + x_off) * b1:(x + x_off + 1) * b1])] for x in range(w)]
           for y in range(h)]
    plane1 = full1[:, uv_skip:uv_skip + uv_line].tobytes() if b1 else None
    return full0.tobytes(), plane1, pix


def test_every_rdl_format_has_a_layout_and_the_new_ones_are_listed():
    from accel.pixel_formats import PIXEL_FORMATS
    assert {code: f.name for code, f in PIXEL_FORMATS.items()} == {c: n for n, c in
                                                                   RDL_CODES.items()}
    assert len(NEW_INT_FORMATS) == 20 and "T_R16_I" in NEW_INT_FORMATS
    for name in NEW_INT_FORMATS + ["T_R16_F", "T_A16Y16U16V16_F"]:
        fmt = PIXEL_FORMATS[RDL_CODES[name]]
        assert (fmt.plane0_bytes, fmt.plane1_bytes) == tuple(_plane_bytes(name)), name


@pytest.mark.parametrize("sign", [0, 1])
@pytest.mark.parametrize("name", NEW_INT_FORMATS)
def test_new_format_channels_through_the_converter_on_nv_full(name, sign):
    rng = np.random.default_rng(RDL_CODES[name] * 2 + sign)
    w, h, x_off = 4, 2, 1
    b0, b1 = _plane_bytes(name)
    line, uv_line = -(-(x_off + w) * b0 // 32) * 32, 32
    plane0, plane1, pix = _image(name, rng, w, h, x_off, line, uv_line)
    c = len(_layout(name))
    mean = [int(v) for v in rng.integers(-3000, 32768, size=4)]
    scale, trunc = int(rng.choice([1, -1, 2, 3])), int(rng.choice([8, 9]))
    wt = np.eye(c, dtype=np.int64).reshape(c, c, 1, 1)  # kernel i picks channel i
    out, dla = _run("nv_full", "", plane0, wt, w=w, h=h, line=line, x_off=x_off,
                    plane1=plane1, uv_line=uv_line, sign=sign, cvt=(0, scale, trunc),
                    mean=mean, out_hw=(h, w), code=RDL_CODES[name], misc=INT16_IN)
    for y in range(h):
        for x in range(w):
            chans = _channels(name, pix[y][x])
            want = [_cvt(v, bool(sign), mean[i], scale, trunc) for i, v in enumerate(chans)]
            assert out[:, y, x].tolist() == want, (name, y, x)
    conv = next(s for s in dla.stats if s.unit == "CONV")
    assert conv.shape["in"] == (c, h, w)


def test_packed_10bit_by_hand():
    # T_A2B10G10R10 word: A=0b10, B=0x200, G=0x001, R=0x3FF -> R 0xFFC0, G 0x0040, B/A 0x8000
    word = (0b10 << 30) | (0x200 << 20) | (0x001 << 10) | 0x3FF
    plane0 = word.to_bytes(4, "little").ljust(32, b"\0")
    wt = np.eye(4, dtype=np.int64).reshape(4, 4, 1, 1)
    kw = dict(w=1, h=1, line=32, cvt=(0, 1, 6), out_hw=(1, 1), code=20, misc=INT16_IN)
    out, _ = _run("nv_full", "", plane0, wt, **kw)
    assert out[:, 0, 0].tolist() == [127, 1, 127, 127]  # 1023, 1, 512, 512 saturate
    out, _ = _run("nv_full", "", plane0, wt, sign=1, **kw)
    assert out[:, 0, 0].tolist() == [-1, 1, -128, -128]  # -64/64, 64/64, -32768/64


def test_r16_i_is_unsigned_without_the_sign_override():
    # element 0xFF80 with offset -32768, truncate 10: unsigned (65408 + 32768) / 1024 = 95.875
    # -> 96; with the override it is -128: (-128 + 32768) / 1024 = 31.875 -> 32
    plane0 = bytes([0x80, 0xFF]).ljust(32, b"\0")
    wt = np.ones((1, 1, 1, 1), dtype=np.int64)
    kw = dict(w=1, h=1, line=32, cvt=(-32768, 1, 10), out_hw=(1, 1), code=4, misc=INT16_IN)
    assert _run("nv_full", "", plane0, wt, **kw)[0][0, 0, 0] == 96
    assert _run("nv_full", "", plane0, wt, sign=1, **kw)[0][0, 0, 0] == 32


@pytest.mark.parametrize(("x_off", "skip"), [(12, 0), (25, 64)])
def test_semi_planar_16bit_chroma_plane_starts_at_its_64_byte_block(x_off, skip):
    # nv_full, Y16___U16V16: 4 B chroma pairs counted in blocks of 32 16-bit elements (64 B);
    # plane 1 starts at the block holding the first pair: byte 48 -> block 0, byte 100 -> 64
    name, w, h, line, uv_line = "T_Y16___U16V16_N444", 3, 2, 64, 64
    rng = np.random.default_rng(x_off)
    plane0, plane1, pix = _image(name, rng, w, h, x_off, line, uv_line, uv_skip=skip)
    wt = np.eye(3, dtype=np.int64).reshape(3, 3, 1, 1)
    out, _ = _run("nv_full", "", plane0, wt, w=w, h=h, line=line, x_off=x_off, plane1=plane1,
                  uv_line=uv_line, cvt=(0, 1, 9), out_hw=(h, w), code=RDL_CODES[name],
                  misc=INT16_IN)
    for y in range(h):
        for x in range(w):
            want = [_cvt(v, False, 0, 1, 9) for v in _channels(name, pix[y][x])]
            assert out[:, y, x].tolist() == want


def _err(preset, name, misc, cvt=(0, 1, 8), c=None):
    c = c or len(_layout(name))
    wt = np.eye(c, dtype=np.int64).reshape(c, c, 1, 1)
    return _run(preset, "", bytes(64), wt, w=1, h=1, line=32, plane1=bytes(64), uv_line=32,
                cvt=cvt, out_hw=(1, 1), code=RDL_CODES[name], misc=misc)


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("name", ["T_R10", "T_A2R10G10B10", "T_Y12___V12U12_N444"])
def test_int8_presets_reject_16bit_formats(preset, name):
    with pytest.raises(UnsupportedError, match=rf"PIXEL_FORMAT={name}: INT16 pixels need INT16 "
                                               rf"feature data, which {preset} does not have"):
        _err(preset, name, INT16_IN)


def test_fp16_formats_are_unsupported_or_invalid():
    with pytest.raises(UnsupportedError, match=r"PIXEL_FORMAT=T_R16_F: FP16 pixels need FP16 "
                                               r"feature data, which nv_small does not have"):
        _err("nv_small", "T_R16_F", 2 << 8)
    with pytest.raises(UnsupportedError, match=r"D_MISC_CFG PROC_PRECISION=FP16 \(image "
                                               r"T_A16B16G16R16_F\): FP16 convolution is not "
                                               r"modelled"):
        _err("nv_full", "T_A16B16G16R16_F", (2 << 8) | (2 << 12))
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x200: FP16 pixels "
                                          r"\(T_A16Y16U16V16_F\) cannot be converted to "
                                          r"PROC_PRECISION=INT8"):
        _err("nv_full", "T_A16Y16U16V16_F", 2 << 8)


def test_precision_errors_name_the_register():
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x0: IN_PRECISION=INT8 but T_R16 "
                                          r"pixels are read as INT16"):
        _err("nv_full", "T_R16", 0)
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x100: IN_PRECISION=INT16 but "
                                          r"T_A8B8G8R8 pixels are read as INT8"):
        _err("nv_full", "T_A8B8G8R8", INT16_IN)
    with pytest.raises(UnsupportedError, match=r"CDMA.D_MISC_CFG PROC_PRECISION=INT16 \(image "
                                               r"T_R16\): INT16 convolution is not modelled"):
        _err("nv_full", "T_R16", INT16_IN | (1 << 12))
    with pytest.raises(ConfigError, match=r"CDMA.D_CVT_CFG = 0x0: T_R12 pixels \(INT16\) reach "
                                          r"PROC_PRECISION=INT8 only through the input converter"):
        _err("nv_full", "T_R12", INT16_IN, cvt=None)
    with pytest.raises(ConfigError, match=r"IN_PRECISION=3 is not INT8 \(0\), INT16 \(1\)"):
        _err("nv_full", "T_R16", 3 << 8)
    with pytest.raises(ConfigError, match=r"CDMA.D_DATAIN_FORMAT = 0x2401: PIXEL_FORMAT=36 is not "
                                          r"a pixel format \(0..35\)"):
        wt = np.ones((1, 1, 1, 1), dtype=np.int64)
        _run("nv_full", "", bytes(64), wt, w=1, h=1, line=32, out_hw=(1, 1), code=36)
