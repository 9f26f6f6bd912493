"""CDMA image input through the whole conv pipeline vs plain references written here.

Images are programmed register by register on a :class:`Dla`; expected values
come from hand computation or from plain loops that follow the rules in the
test (the pixel-format names list components most significant byte first on
a little-endian word, so ``T_A8B8G8R8`` stores R in byte 0; channels reach the
MACs as R, G, B, A or Y, U, V, A), sharing no code with the model.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from accel.cmod import ConfigError, Dla, UnsupportedError
from accel.cmod.cdma_image import PIXEL_FORMATS
from accel.config import get_preset

IMG, UV, WT, OUT = 0x1000_0000, 0x1800_0000, 0x2000_0000, 0x3000_0000
FORMAT_CODES = {"T_R8": 0, "T_R16": 3, "T_A8B8G8R8": 12, "T_A8R8G8B8": 13, "T_B8G8R8A8": 14,
                "T_R8G8B8A8": 15, "T_X8B8G8R8": 16, "T_X8R8G8B8": 17, "T_B8G8R8X8": 18,
                "T_R8G8B8X8": 19, "T_A8Y8U8V8": 26, "T_V8U8Y8A8": 27,
                "T_Y8___U8V8_N444": 28, "T_Y8___V8U8_N444": 29}


def _rshift_round(v: int, n: int) -> int:
    if n == 0:
        return v
    mag = (abs(v) + (1 << (n - 1))) >> n
    return mag if v >= 0 else -mag


def _sat(v: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def _pack_weights(wt, ak, ac):
    """Direct-conv weight bytes (NVDLA_FACTS section 2) of ``wt[K, C, R, S]``."""
    k, c, r, s = wt.shape
    out = bytearray()
    for g0 in range(0, k, ak):
        for c0 in range(0, c, ac):
            for ri in range(r):
                for si in range(s):
                    for ki in range(g0, min(k, g0 + ak)):
                        for ci in range(c0, min(c, c0 + ac)):
                            out.append(int(wt[ki, ci, ri, si]) & 0xFF)
    return bytes(out)


def _pre_extend(wt):
    """Image weights ``[K, C, R, S]`` -> ``[K, S*C, R, 1]``, channel s*C + c."""
    k, c, r, s = wt.shape
    ext = np.zeros((k, s * c, r, 1), dtype=np.int64)
    for si in range(s):
        for ci in range(c):
            ext[:, si * c + ci, :, 0] = wt[:, ci, :, si]
    return ext


def _read_out(dla, k, oh, ow):
    a = dla.cfg.atom_size
    line, surf = ow * a, ow * oh * a
    raw = dla.dram.read(OUT, -(-k // a) * surf).view(np.int8)
    out = np.zeros((k, oh, ow), dtype=np.int64)
    for ki in range(k):
        for y in range(oh):
            for x in range(ow):
                out[ki, y, x] = raw[(ki // a) * surf + y * line + x * a + ki % a]
    return out


def _program_cbuf(dla, weight_bytes, *, w, h, channels):
    """CBUF registers of an image conv (CDMA and CSC): a padded line of ``w`` pixels is
    ``w * channels`` int8 bytes in whole CBUF entries (NVIDIA's img_* traces: 51 x 4 bytes
    in 26 entries of 8 bytes on nv_small); the weights padded to 128 bytes; data banks
    for ``h`` lines, weight banks for all weights."""
    cfg = dla.cfg
    entries = -(-w * channels // cfg.cbuf_entry_bytes)
    bank_bytes = cfg.cbuf_bank_depth * cfg.cbuf_entry_bytes
    data_banks = -(-entries * h // cfg.cbuf_bank_depth)
    weight_banks = -(-weight_bytes // bank_bytes)
    for unit in ("CDMA", "CSC"):
        dla.write_reg(f"NVDLA_{unit}.D_ENTRY_PER_SLICE_0", entries - 1)
        dla.write_reg(f"NVDLA_{unit}.D_BANK_0", (data_banks - 1) | ((weight_banks - 1) << 16))
        dla.write_reg(f"NVDLA_{unit}.D_WEIGHT_BYTES_0", -(-weight_bytes // 128) * 128)


def _run(preset, fmt, plane0, wt, *, w, h, plane1=None, line=None, uv_line=None, x_off=0,
         sign=0, cvt=None, mean=None, pads=(0, 0, 0), pad_values=(0, 0), stride=(1, 1),
         out_hw=None, channels=None, code=None, misc=0):
    """Program an image conv: ``wt[K, C, R, S]`` (plain layout), SDP identity.

    ``code`` overrides the PIXEL_FORMAT value of ``fmt``; ``misc`` is CDMA D_MISC_CFG.
    """
    dla = Dla(get_preset(preset))
    a = dla.cfg.atom_size
    k, c, r, s = wt.shape
    wr = dla.write_reg
    dla.dram.map(IMG, len(plane0))
    dla.dram.write(IMG, np.frombuffer(bytes(plane0), np.uint8))
    if plane1 is not None:
        dla.dram.map(UV, len(plane1))
        dla.dram.write(UV, np.frombuffer(bytes(plane1), np.uint8))
    wbytes = _pack_weights(_pre_extend(wt), dla.cfg.atomic_k, dla.cfg.atomic_c)
    dla.dram.map(WT, len(wbytes))
    dla.dram.write(WT, np.frombuffer(wbytes, np.uint8))
    left, right, top = pads
    oh, ow = out_hw
    osurf = oh * ow * a
    dla.dram.map(OUT, -(-k // a) * osurf)
    wr("NVDLA_CDMA.D_MISC_CFG_0", misc)
    code = FORMAT_CODES[fmt] if code is None else code
    wr("NVDLA_CDMA.D_DATAIN_FORMAT_0", 1 | (code << 8) | (sign << 20))
    wr("NVDLA_CDMA.D_DATAIN_SIZE_0_0", (w - 1) | ((h - 1) << 16))
    wr("NVDLA_CDMA.D_DATAIN_SIZE_1_0", (channels or c) - 1)
    wr("NVDLA_CDMA.D_PIXEL_OFFSET_0", x_off)
    wr("NVDLA_CDMA.D_DAIN_ADDR_LOW_0_0", IMG)
    wr("NVDLA_CDMA.D_LINE_STRIDE_0", line)
    wr("NVDLA_CDMA.D_DAIN_ADDR_LOW_1_0", UV)
    wr("NVDLA_CDMA.D_LINE_UV_STRIDE_0", uv_line or 0)
    if cvt is not None:
        offset, scale, trunc = cvt
        wr("NVDLA_CDMA.D_CVT_CFG_0", 1 | (trunc << 4))
        wr("NVDLA_CDMA.D_CVT_OFFSET_0", offset & 0xFFFF)
        wr("NVDLA_CDMA.D_CVT_SCALE_0", scale & 0xFFFF)
    if mean is not None:
        m = [v & 0xFFFF for v in mean]
        wr("NVDLA_CDMA.D_MEAN_FORMAT_0", 1)
        wr("NVDLA_CDMA.D_MEAN_GLOBAL_0_0", m[0] | (m[1] << 16))
        wr("NVDLA_CDMA.D_MEAN_GLOBAL_1_0", m[2] | (m[3] << 16))
    wr("NVDLA_CDMA.D_ZERO_PADDING_0", left | (right << 8))
    wr("NVDLA_CDMA.D_ZERO_PADDING_VALUE_0", pad_values[0] & 0xFFFF)
    wr("NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0", WT)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_0_0", r * s * c - 1)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_1_0", k - 1)
    _program_cbuf(dla, k * r * s * c, w=left + w + right, h=h, channels=channels or c)
    wr("NVDLA_CSC.D_MISC_CFG_0", 0)
    wr("NVDLA_CSC.D_DATAIN_FORMAT_0", 1)
    wr("NVDLA_CSC.D_DATAIN_SIZE_EXT_0_0", (w - 1) | ((h - 1) << 16))
    wr("NVDLA_CSC.D_DATAIN_SIZE_EXT_1_0", (channels or c) - 1)
    wr("NVDLA_CSC.D_WEIGHT_SIZE_EXT_0_0", (r - 1) << 16)  # pre-extended: width 1
    wr("NVDLA_CSC.D_WEIGHT_SIZE_EXT_1_0", (s * c - 1) | ((k - 1) << 16))
    wr("NVDLA_CSC.D_DATAOUT_SIZE_0_0", (ow - 1) | ((oh - 1) << 16))
    wr("NVDLA_CSC.D_CONV_STRIDE_EXT_0", (stride[0] - 1) | ((stride[1] - 1) << 16))
    wr("NVDLA_CSC.D_ZERO_PADDING_0", top << 16)
    wr("NVDLA_CSC.D_ZERO_PADDING_VALUE_0", pad_values[1] & 0xFFFF)
    wr("NVDLA_CACC.D_CLIP_CFG_0", 0)
    wr("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", ow - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_HEIGHT_0", oh - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_CHANNEL_0", k - 1)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", ow * a)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", osurf)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 1)
    wr("NVDLA_SDP.D_DP_BS_CFG_0", 1)
    wr("NVDLA_SDP.D_DP_BN_CFG_0", 1)
    wr("NVDLA_SDP.D_DP_EW_CFG_0", 1)
    wr("NVDLA_SDP.D_CVT_SCALE_0", 1)
    for u in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
        wr(f"NVDLA_{u}.D_OP_ENABLE_0", 1)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0")  # the conv completed
    return _read_out(dla, k, oh, ow), dla


def _expected_channels(name: str, plane0: bytes, plane1: bytes) -> list[int]:
    """Channel values from the format name: components MSB first, byte 0 = last named."""
    parts = name[2:].split("___")
    named = []  # (component, plane, byte)
    for plane, part in enumerate(parts):
        comps = re.findall(r"([A-Z])8", part)
        named += [(comp, plane, len(comps) - 1 - i) for i, comp in enumerate(comps)]
    order = "RGBAX" if any(comp in "RGB" for comp, _, _ in named) else "YUVA"
    named.sort(key=lambda t: order.index(t[0]) if t[0] != "X" else 3)
    return [(plane0, plane1)[p][b] for _, p, b in named]


@pytest.mark.parametrize("name", [n for n in FORMAT_CODES if n != "T_R16"])
def test_channel_order_of_every_8bit_format(name):
    planar = "___" in name
    plane0 = bytes([0x11]) if planar else bytes([0x11, 0x22, 0x33, 0x44][:1 if name == "T_R8"
                                                                       else 4])
    plane1 = bytes([0x22, 0x33]) if planar else b""
    chans = _expected_channels(name, plane0, plane1)
    c = len(chans)
    wt = np.eye(c, dtype=np.int64).reshape(c, c, 1, 1)  # kernel i picks channel i
    out, _ = _run("nv_small", name, plane0.ljust(8, b"\0"), wt, w=1, h=1, line=8,
                  plane1=plane1.ljust(8, b"\0") if planar else None, uv_line=8, out_hw=(1, 1))
    assert out[:, 0, 0].tolist() == chans
    assert PIXEL_FORMATS[FORMAT_CODES[name]].name == name


def test_every_8bit_format_of_the_rdl_is_modelled():
    expected = {"T_R8", "T_A8B8G8R8", "T_A8R8G8B8", "T_B8G8R8A8", "T_R8G8B8A8", "T_X8B8G8R8",
                "T_X8R8G8B8", "T_B8G8R8X8", "T_R8G8B8X8", "T_A8Y8U8V8", "T_V8U8Y8A8",
                "T_Y8___U8V8_N444", "T_Y8___V8U8_N444"}
    assert {f.name for f in PIXEL_FORMATS.values() if f.bits == 8} == expected


def test_converter_rounding_and_saturation_by_hand():
    # T_R8, offset 10 (mean disabled), scale 3, truncate 2: (x - 10) * 3 / 4, half away
    pixels = [11, 9, 12, 8, 255, 0, 10, 14]
    # 0.75->1, -0.75->-1, 1.5->2, -1.5->-2, 183.75->184->127, -7.5->-8, 0, 3
    want = [1, -1, 2, -2, 127, -8, 0, 3]
    wt = np.ones((1, 1, 1, 1), dtype=np.int64)
    out, _ = _run("nv_small", "T_R8", bytes(pixels), wt, w=8, h=1, line=8, cvt=(10, 3, 2),
                  out_hw=(1, 8))
    assert out[0, 0].tolist() == want
    # signed pixels: 0xFF = -1 -> (-11 * 3) / 4 = -8.25 -> -8; 0x80 = -128 -> -103.5 -> -104
    out, _ = _run("nv_small", "T_R8", bytes([0xFF, 0x80] + [10] * 6), wt, w=8, h=1, line=8,
                  sign=1, cvt=(10, 3, 2), out_hw=(1, 8))
    assert out[0, 0, :2].tolist() == [-8, -104]
    # scale -1, offset -32768 (int16): (x + 32768) * -1 saturates to -128 for every x
    out, _ = _run("nv_small", "T_R8", bytes(8), wt, w=8, h=1, line=8, cvt=(-32768, -1, 0),
                  out_hw=(1, 8))
    assert out[0, 0].tolist() == [-128] * 8


def test_cvt_disabled_passes_bytes_and_ignores_mean():
    wt = np.ones((1, 1, 1, 1), dtype=np.int64)
    out, _ = _run("nv_small", "T_R8", bytes([200, 5, 127, 128] + [0] * 4), wt, w=4, h=1, line=8,
                  mean=(100, 0, 0, 0), out_hw=(1, 4))
    assert out[0, 0].tolist() == [-56, 5, 127, -128]


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_mean_cvt_1x1_conv_on_4x3_a8b8g8r8(preset):
    rng = np.random.default_rng(3)
    w, h = 4, 3
    img = rng.integers(0, 256, size=(h, w, 4))  # bytes in memory order: R G B A
    mean, scale, trunc = (120, -7, 300, 64), 3, 3
    wt = rng.integers(-20, 21, size=(2, 4, 1, 1))
    line = -(-w * 4 // 32) * 32
    mem = bytearray(line * h)
    for y in range(h):
        for x in range(w):
            mem[y * line + 4 * x:y * line + 4 * x + 4] = bytes(int(v) for v in img[y, x])
    out, dla = _run(preset, "T_A8B8G8R8", mem, wt, w=w, h=h, line=line, cvt=(0, scale, trunc),
                    mean=mean, out_hw=(h, w))
    want = np.zeros_like(out)
    for k in range(2):
        for y in range(h):
            for x in range(w):
                acc = 0
                for c in range(4):
                    v = _sat(_sat(_rshift_round((int(img[y, x, c]) - mean[c]) * scale, trunc),
                                  17), 8)
                    acc += v * int(wt[k, c, 0, 0])
                want[k, y, x] = _sat(acc, 8)
    assert np.array_equal(out, want)
    conv = next(s for s in dla.stats if s.unit == "CONV")
    assert conv.shape["in"] == (4, h, w) and conv.shape["kernel"] == (2, 4, 1, 1)


def test_x_offset_padding_stride_and_pre_extended_3x2_kernel():
    # A8R8G8B8 (memory B G R A), 5x4 image 2 pixels into each line, pads L1 R1 T1,
    # 2x3 kernel, x stride 2; CDMA pads columns with -3, CSC pads rows with 5
    rng = np.random.default_rng(7)
    w, h, x_off, line = 5, 4, 2, 32
    rgba = rng.integers(0, 256, size=(h, w, 4))
    mem = bytearray(line * h)
    for y in range(h):
        for x in range(w):
            r_, g_, b_, a_ = (int(v) for v in rgba[y, x])
            mem[y * line + 4 * (x + x_off):y * line + 4 * (x + x_off) + 4] = bytes([b_, g_, r_, a_])
    offset, scale, trunc = 128, 1, 1
    wt = rng.integers(-3, 4, size=(3, 4, 2, 3))
    ow, oh = 3, 4  # (1 + 5 + 1 - 3) // 2 + 1 = 3 ; (1 + 4 - 2) + 1 = 4
    out, _ = _run("nv_small", "T_A8R8G8B8", mem, wt, w=w, h=h, line=line, x_off=x_off,
                  cvt=(offset, scale, trunc), pads=(1, 1, 1), pad_values=(-3, 5),
                  stride=(2, 1), out_hw=(oh, ow))
    conv = np.array([[[_sat(_rshift_round((int(rgba[y, x, c]) - offset) * scale, trunc), 8)
                       for x in range(w)] for y in range(h)] for c in range(4)])
    want = np.zeros_like(out)
    for k in range(3):
        for oy in range(oh):
            for ox in range(ow):
                acc = 0
                for c in range(4):
                    for r in range(2):
                        for s in range(3):
                            y, x = oy + r - 1, ox * 2 + s - 1
                            if not 0 <= y < h:
                                v = 5
                            elif not 0 <= x < w:
                                v = -3
                            else:
                                v = conv[c, y, x]
                            acc += int(v) * int(wt[k, c, r, s])
                want[k, oy, ox] = _sat(acc, 8)
    assert np.array_equal(out, want)


def test_semi_planar_yuv_uv_stride_and_x_offset():
    # Y8___V8U8_N444 on nv_small (8-byte atom), 3x2 image 5 pixels into the line: the chroma
    # plane starts at the atom holding pixel 5's pair (full-plane byte 10 -> atom at byte 8)
    w, h, x_off, line, uv_line = 3, 2, 5, 16, 24
    rng = np.random.default_rng(11)
    y_full = rng.integers(0, 256, size=(h, line))
    uv_full = rng.integers(0, 256, size=(h, 32))  # [U, V] pairs: "V8U8" puts U in byte 0
    plane0 = bytes(int(v) for v in y_full.ravel())
    plane1 = bytearray(uv_line * h)
    for y in range(h):
        plane1[y * uv_line:y * uv_line + uv_line] = bytes(int(v) for v in uv_full[y, 8:8 + uv_line])
    wt = np.eye(3, dtype=np.int64).reshape(3, 3, 1, 1)
    out, _ = _run("nv_small", "T_Y8___V8U8_N444", plane0, wt, w=w, h=h, line=line, x_off=x_off,
                  plane1=bytes(plane1), uv_line=uv_line, cvt=(0, 1, 1), out_hw=(h, w))
    for y in range(h):
        for x in range(w):
            p = x + x_off
            yuv = (y_full[y, p], uv_full[y, 2 * p], uv_full[y, 2 * p + 1])
            assert out[:, y, x].tolist() == [_rshift_round(int(v), 1) for v in yuv]


def _errors(**kw):
    wt = kw.pop("wt", np.ones((1, 1, 1, 1), dtype=np.int64))
    base = dict(w=4, h=1, line=8, out_hw=(1, 4))
    base.update(kw)
    return _run("nv_small", base.pop("fmt", "T_R8"), bytes(64), wt, **base)


def test_errors_name_unit_register_and_value():
    with pytest.raises(ConfigError, match=r"CDMA.D_DATAIN_SIZE_1 = 0x2: DATAIN_CHANNEL\+1=3 "
                                          r"but T_R8 has 1 channels"):
        _errors(channels=3)
    with pytest.raises(UnsupportedError, match=r"PIXEL_FORMAT=T_R16: INT16 pixels need INT16 "
                                               r"feature data, which nv_small does not have"):
        _errors(fmt="T_R16")
    with pytest.raises(ConfigError, match=r"CDMA.D_LINE_STRIDE = 0x8: a line of 6\+4 pixels"):
        _errors(x_off=6)
    with pytest.raises(ConfigError, match=r"CDMA.D_PIXEL_OFFSET = 0x8: PIXEL_X_OFFSET=8 must be "
                                          r"below the 8-byte atom"):
        _errors(fmt="T_Y8___U8V8_N444", wt=np.ones((1, 3, 1, 1), dtype=np.int64), x_off=8,
                line=16, uv_line=32, plane1=bytes(64))
    with pytest.raises(ConfigError, match=r"CSC.D_DATAOUT_SIZE_0 = 0x4: output pixel 4 reads "
                                          r"elements up to 5 of a padded image line of 4"):
        _errors(out_hw=(1, 5))
