"""Dla end to end: a conv + SDP programmed register by register vs a plain-loop reference.

The reference packs memory and computes the convolution with nested Python
loops straight from the format rules (NVDLA_FACTS sections 2-3), sharing no
code with the model.
"""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod import ConfigError, Dla, Dram, DramAccessError, UnsupportedError
from accel.config import get_preset

IN, WT, OUT, BIAS = 0x1000_0000, 0x2000_0000, 0x3000_0000, 0x4000_0000


def _rshift_round(v: int, n: int) -> int:
    if n == 0:
        return v
    mag = (abs(v) + (1 << (n - 1))) >> n
    return mag if v >= 0 else -mag


def _sat(v: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def _pack_feature(x, a, line, surf):
    c, h, w = x.shape
    buf = bytearray(-(-c // a) * surf)
    for ci in range(c):
        for hi in range(h):
            for wi in range(w):
                buf[(ci // a) * surf + hi * line + wi * a + ci % a] = int(x[ci, hi, wi]) & 0xFF
    return bytes(buf)


def _pack_weights(wt, ak, ac):
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


def _reference(x, wt, bias, p):
    c, h, w = x.shape
    k, _, r, s = wt.shape
    out = np.zeros((k, p["oh"], p["ow"]), dtype=np.int64)
    for ki in range(k):
        for oy in range(p["oh"]):
            for ox in range(p["ow"]):
                acc = 0
                for ci in range(c):
                    for ri in range(r):
                        for si in range(s):
                            y = oy * p["sy"] + ri * p["dy"] - p["pt"]
                            xx = ox * p["sx"] + si * p["dx"] - p["pl"]
                            v = x[ci, y, xx] if 0 <= y < h and 0 <= xx < w else p["pad"]
                            acc += int(v) * int(wt[ki, ci, ri, si])
                v = _sat(_rshift_round(acc, p["clip"]), 32)
                v = v + (int(bias[ki]) << p["bshift"])            # BS ALU sum, per kernel
                v = _sat(_rshift_round(v, p["btrunc"]), 32)       # truncate with MUL bypassed
                v = max(v, 0)                                     # ReLU
                v = _sat(_rshift_round((v - p["off"]) * p["scale"], p["cshift"]), 17)
                out[ki, oy, ox] = _sat(v, 8)
    return out


# CBUF entries of one 7-pixel row of 11 channels: on nv_small two 8-byte atoms, each a
# whole entry per pixel (14); on nv_medium_512 / nv_large one atom, half of a 32 / 64-byte
# entry, two pixels per entry (ceil(7 / 2) = 4)
ENTRIES = {"nv_small": 14, "nv_medium_512": 4, "nv_large": 4}


def _program(dla: Dla, p, c, h, w, k, line, surf, oline, osurf):
    a = dla.cfg.atom_size
    wr = dla.write_reg
    # CBUF: one data bank and one weight bank (D_BANK reset value 0) hold 6 rows and
    # 13 x 66 = 858 weight bytes, padded to 896 (7 x 128)
    for unit in ("CDMA", "CSC"):
        wr(f"NVDLA_{unit}.D_ENTRY_PER_SLICE_0", ENTRIES[dla.cfg.name] - 1)
        wr(f"NVDLA_{unit}.D_WEIGHT_BYTES_0", 896)
    wr("NVDLA_CDMA.D_DATAIN_SIZE_0_0", (w - 1) | ((h - 1) << 16))
    wr("NVDLA_CDMA.D_DATAIN_SIZE_1_0", c - 1)
    wr("NVDLA_CDMA.D_DAIN_ADDR_LOW_0_0", IN)
    wr("NVDLA_CDMA.D_LINE_STRIDE_0", line)
    wr("NVDLA_CDMA.D_SURF_STRIDE_0", surf)
    wr("NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0", WT)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_0_0", p["r"] * p["s"] * c - 1)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_1_0", k - 1)
    wr("NVDLA_CDMA.D_MISC_CFG_0", 0)
    wr("NVDLA_CSC.D_MISC_CFG_0", 0)
    wr("NVDLA_CSC.D_WEIGHT_SIZE_EXT_0_0", (p["s"] - 1) | ((p["r"] - 1) << 16))
    wr("NVDLA_CSC.D_WEIGHT_SIZE_EXT_1_0", (c - 1) | ((k - 1) << 16))
    wr("NVDLA_CSC.D_DATAOUT_SIZE_0_0", (p["ow"] - 1) | ((p["oh"] - 1) << 16))
    wr("NVDLA_CSC.D_CONV_STRIDE_EXT_0", (p["sx"] - 1) | ((p["sy"] - 1) << 16))
    wr("NVDLA_CSC.D_DILATION_EXT_0", (p["dx"] - 1) | ((p["dy"] - 1) << 16))
    wr("NVDLA_CSC.D_ZERO_PADDING_0", p["pl"] | (p["pt"] << 16))
    wr("NVDLA_CSC.D_ZERO_PADDING_VALUE_0", p["pad"] & 0xFFFF)
    wr("NVDLA_CACC.D_CLIP_CFG_0", p["clip"])
    wr("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", p["ow"] - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_HEIGHT_0", p["oh"] - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_CHANNEL_0", k - 1)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", oline)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", osurf)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 1)  # on the fly from CACC
    # BS: ALU SUM from memory (per kernel, two-byte), MUL bypassed, ReLU on
    wr("NVDLA_SDP.D_DP_BS_CFG_0", 0b0011000)  # ALU SUM, MUL bypass, no PReLU, ReLU
    wr("NVDLA_SDP.D_DP_BS_ALU_CFG_0", 1 | (p["bshift"] << 8))
    wr("NVDLA_SDP.D_DP_BS_MUL_CFG_0", p["btrunc"] << 8)
    wr("NVDLA_SDP_RDMA.D_BRDMA_CFG_0", (1 << 1) | (1 << 3) | (1 << 5))  # ALU, 2 B, kernel
    wr("NVDLA_SDP_RDMA.D_BS_BASE_ADDR_LOW_0", BIAS)
    wr("NVDLA_SDP.D_CVT_OFFSET_0", p["off"] & 0xFFFFFFFF)
    wr("NVDLA_SDP.D_CVT_SCALE_0", p["scale"] & 0xFFFF)
    wr("NVDLA_SDP.D_CVT_SHIFT_0", p["cshift"])
    assert a  # strides above are multiples of the atom


def _converted(x, cvt):
    """CDMA's input converter on feature input (NVDLA_FACTS, "CDMA input converter"; NVIDIA's
    cmod converts feature elements as signed int8 with CVT_OFFSET as the mean)."""
    if cvt is None:
        return x
    off, scale, trunc = cvt
    out = np.zeros_like(x)
    for i, v in np.ndenumerate(x):
        out[i] = _sat(_sat(_rshift_round((int(v) - off) * scale, trunc), 17), 8)
    return out


# (offset, scale, truncate): saturates at both ends of int8 and rounds halves both ways
CVT = (-37, -300, 7)


@pytest.mark.parametrize("cvt", [None, CVT], ids=["no_cvt", "cvt"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "plain"])
@pytest.mark.parametrize("preset", ["nv_small", "nv_medium_512", "nv_large"])
def test_conv_bias_relu_matches_plain_reference(preset, fast, cvt):
    cfg = get_preset(preset)
    a = cfg.atom_size
    rng = np.random.default_rng(7)
    c, h, w, k = 11, 6, 7, 13
    p = dict(r=3, s=2, sy=2, sx=1, dy=1, dx=2, pt=1, pl=2, pad=-3, clip=3, bshift=2, btrunc=1,
             off=-4, scale=-3, cshift=2)
    p["oh"] = (h + p["pt"] + 1 - ((p["r"] - 1) * p["dy"] + 1)) // p["sy"] + 1
    p["ow"] = (w + p["pl"] + 1 - ((p["s"] - 1) * p["dx"] + 1)) // p["sx"] + 1
    x = rng.integers(-128, 128, (c, h, w))
    wt = rng.integers(-128, 128, (k, c, p["r"], p["s"]))
    bias = rng.integers(-3000, 3000, k)
    line = w * a + a  # unpacked strides: gaps after each line and surface
    surf = h * line + 2 * a
    oline, osurf = p["ow"] * a, p["ow"] * p["oh"] * a + a
    cpad_k = -(-k // a) * a

    dram = Dram()
    feat = _pack_feature(x, a, line, surf)
    dram.map(IN, len(feat))
    dram.write(IN, feat)
    wbytes = _pack_weights(wt, cfg.atomic_k, cfg.atomic_c)
    dram.map(WT, len(wbytes))
    dram.write(WT, wbytes)
    dram.map(BIAS, cpad_k * 2)
    dram.write(BIAS, np.asarray(bias, "<i2").tobytes())
    dram.map(OUT, -(-k // a) * osurf)

    dla = Dla(cfg, dram, fast=fast)
    _program(dla, p, c, h, w, k, line, surf, oline, osurf)
    if cvt is not None:         # the padding value stays as programmed (the CSC's)
        dla.write_reg("NVDLA_CDMA.D_CVT_CFG_0", 1 | (cvt[2] << 4))
        dla.write_reg("NVDLA_CDMA.D_CVT_OFFSET_0", cvt[0] & 0xFFFF)
        dla.write_reg("NVDLA_CDMA.D_CVT_SCALE_0", cvt[1] & 0xFFFF)
    for unit in ("SDP_RDMA", "SDP", "CACC", "CMAC_A", "CMAC_B", "CSC"):
        dla.write_reg(f"NVDLA_{unit}.D_OP_ENABLE_0", 1)
        assert not dla.stats, f"ran before CDMA was enabled (after {unit})"
    dla.write_reg("NVDLA_CDMA.D_OP_ENABLE_0", 1)
    assert [s.unit for s in dla.stats] == ["CONV"]
    assert dla.stats[0].sdp.details["flying"]

    expect = _reference(_converted(x, cvt), wt, bias, p)
    raw = dram.read(OUT, -(-k // a) * osurf).view(np.int8)
    for ki in range(k):
        for oy in range(p["oh"]):
            for ox in range(p["ow"]):
                got = raw[(ki // a) * osurf + oy * oline + ox * a + ki % a]
                assert got == expect[ki, oy, ox], (ki, oy, ox)
    # padded lanes: zero conv output + zero bias (memory beyond K is zero) -> CVT of 0
    pad_val = _sat(_sat(_rshift_round((0 - p["off"]) * p["scale"], p["cshift"]), 17), 8)
    if cpad_k > k:
        assert raw[(k // a) * osurf + k % a] == pad_val
    # completion: interrupts raised, enables cleared, consumer pointers flipped
    status = dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0")
    assert status & 1 and status & (1 << 20) and status & (1 << 16) and status & (1 << 18)
    assert dla.read_reg("NVDLA_CDMA.D_OP_ENABLE_0") == 0
    assert dla.read_reg("NVDLA_SDP.S_POINTER_0") == 1 << 16
    dla.write_reg("NVDLA_GLB.S_INTR_STATUS_0", 1)  # write-1-to-clear
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == status & ~1


def test_register_groups_and_read_only_bits():
    dla = Dla(get_preset("nv_small"))
    dla.write_reg("NVDLA_SDP.D_CVT_SHIFT_0", 5)
    dla.write_reg("NVDLA_SDP.S_POINTER_0", 1)  # producer -> group 1
    assert dla.read_reg("NVDLA_SDP.D_CVT_SHIFT_0") == 0
    dla.write_reg("NVDLA_SDP.D_CVT_SHIFT_0", 0xFF)  # only bits [5:0] exist
    assert dla.read_reg("NVDLA_SDP.D_CVT_SHIFT_0") == 0x3F
    dla.write_reg("NVDLA_SDP.S_POINTER_0", 0x10000)  # CONSUMER is read-only
    assert dla.read_reg("NVDLA_SDP.S_POINTER_0") == 0
    assert dla.read_reg("NVDLA_SDP.D_CVT_SHIFT_0") == 5
    assert dla.read_reg("NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0") == 1
    assert dla.csb_read(0x1000) == dla.read_reg("NVDLA_GLB.S_NVDLA_HW_VERSION_0")


def test_masked_interrupt_is_not_raised_and_sdp_from_memory_runs_on_enable():
    cfg = get_preset("nv_small")
    dram = Dram()
    dram.map(IN, 64)
    dram.write(IN, bytes([0x80, 0x7F, 5, 0xFB] + [0] * 4))
    dram.map(OUT, 8)
    dla = Dla(cfg, dram)
    wr = dla.write_reg
    wr("NVDLA_GLB.S_INTR_MASK_0", 1)  # mask SDP group 0
    for u in ("SDP", "SDP_RDMA"):
        wr(f"NVDLA_{u}.D_DATA_CUBE_CHANNEL_0", 3)
    wr("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0)  # int8 in (reset is int16)
    wr("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", IN)
    wr("NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0", 8)
    wr("NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_CVT_SCALE_0", 3)
    wr("NVDLA_SDP.D_CVT_SHIFT_0", 1)
    wr("NVDLA_SDP.D_OP_ENABLE_0", 1)
    assert not dla.stats  # waits for SDP_RDMA
    wr("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    # -128*3/2=-192 -> -128 ; 127*3/2=190.5 -> 127 ; 5*3/2=7.5 -> 8 ; -5*3/2 -> -8
    assert dram.read(OUT, 4).view(np.int8).tolist() == [-128, 127, 8, -8]
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == 0
    assert dla.read_reg("NVDLA_SDP.D_PERF_OUT_SATURATION_0") == 0  # 17-bit sat only


def test_errors_name_unit_register_and_value():
    cfg = get_preset("nv_small")
    dla = Dla(cfg)
    dla.write_reg("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0)
    dla.write_reg("NVDLA_SDP.D_DP_EW_CFG_0", 0)  # EW not bypassed on a config without EW
    dla.write_reg("NVDLA_SDP.D_OP_ENABLE_0", 1)
    with pytest.raises(UnsupportedError, match="nv_small has no SDP_EW"):
        dla.write_reg("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    dla = Dla(cfg)
    dla.write_reg("NVDLA_SDP.D_DP_EW_CFG_0", 1)
    dla.write_reg("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0)
    dla.write_reg("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", 0x5000)
    dla.write_reg("NVDLA_SDP.D_OP_ENABLE_0", 1)
    with pytest.raises(DramAccessError, match=r"SDP_RDMA: read .*0x5000"):
        dla.write_reg("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    dla = Dla(cfg)
    dla.dram.map(0, 4096)
    dla.write_reg("NVDLA_CACC.D_CLIP_CFG_0", 17)
    dla.write_reg("NVDLA_CDMA.D_MISC_CFG_0", 0)
    for unit in ("CDMA", "CSC"):  # one kernel of one byte, padded to 128
        dla.write_reg(f"NVDLA_{unit}.D_WEIGHT_BYTES_0", 128)
    dla.write_reg("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 1)
    dla.write_reg("NVDLA_SDP.D_DP_EW_CFG_0", 1)
    for u in ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC"):
        dla.write_reg(f"NVDLA_{u}.D_OP_ENABLE_0", 1)
    with pytest.raises(ConfigError, match=r"CACC.D_CLIP_CFG = 0x11: CLIP_TRUNCATE must be 0..16"):
        dla.write_reg("NVDLA_CDMA.D_OP_ENABLE_0", 1)
    with pytest.raises(UnsupportedError, match="RUBIK is programmed but nv_small has no Rubik"):
        dla.write_reg("NVDLA_RBK.D_OP_ENABLE_0", 1)


def test_model_y_stage_runs_ew_on_nv_small_with_a_note():
    # EW: ALU SUM with register operand 5, MUL bypassed, LUT bypassed (EW_CFG: bypass bit 0
    # clear, ALU_BYPASS bit 1 clear, ALU_ALGO bits 2-3 = 2 (sum), MUL_BYPASS bit 4, LUT_BYPASS
    # bit 6).  Operand converters are identity (scale 1), so out = in + 5.
    dla = Dla(get_preset("nv_small"), model_y_stage=True)
    dla.dram.map(0x1000, 0x100)
    dla.dram.write(0x1000, np.array([1, -7, 120, 0, 0, 0, 0, 0], np.int8).view(np.uint8))
    wr = dla.write_reg
    wr("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", 0x1000)
    wr("NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0", 8)
    wr("NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", 0x1080)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", 8)
    wr("NVDLA_SDP.D_DP_EW_CFG_0", (2 << 2) | (1 << 4) | (1 << 6))
    wr("NVDLA_SDP.D_DP_EW_ALU_SRC_VALUE_0", 5)
    wr("NVDLA_SDP.D_DP_EW_ALU_CVT_SCALE_VALUE_0", 1)
    wr("NVDLA_SDP.D_DP_EW_MUL_CVT_SCALE_VALUE_0", 1)
    wr("NVDLA_SDP.D_CVT_SCALE_0", 1)
    wr("NVDLA_SDP.D_OP_ENABLE_0", 1)
    wr("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    assert dla.dram.read(0x1080, 3).view(np.int8).tolist() == [6, -2, 125]
    assert dla.notes == ["Y stage modelled: nv_small goldens include SDP_EW"]
    assert not dla.cfg.sdp_ew
