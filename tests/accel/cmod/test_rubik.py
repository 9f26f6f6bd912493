"""RUBIK on nv_full: contract, split, merge against plain loops; interrupts; errors.

Expected memory images are built byte by byte with plain loops from the
documented layouts (NVDLA_FACTS section 2 for feature cubes with 32-byte
atoms; pitch-linear planes ``c * planar + h * line + w * bytes``), never from
the model.  Register facts (NVDLA_RBK.rdl, cmod/firmware): sizes are value+1,
addresses and strides are byte values with the low 5 bits ignored, RUBIK_MODE
0/1/2 = CONTRACT/SPLIT/MERGE, IN_PRECISION 0/1/2 = INT8/INT16/FP16, and the
GLB RUBIK_DONE_STATUS0/1 bits are bits 8/9 of S_INTR_STATUS.
"""

from __future__ import annotations

import dataclasses
import re

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from accel.cmod import ConfigError, Dla, DramAccessError, UnsupportedError
from accel.config import get_preset
from accel.regs import UNITS

SRC, DST = 0x1000_0000, 0x2000_0000
RBK0, RBK1 = 1 << 8, 1 << 9
CONTRACT, SPLIT, MERGE = 0, 1, 2


def _dla(preset="nv_full", size=1 << 16):
    dla = Dla(preset if not isinstance(preset, str) else get_preset(preset))
    dla.dram.map(SRC, size)
    dla.dram.map(DST, size)
    return dla


def _program(dla, mode, w, h, c_in, c_out, *, prec=0, in_line=0, in_surf=0, in_planar=0,
             out_line=0, out_surf=0, out_planar=0, sx=1, sy=1, cs0=0, cs1=0, enable=True):
    wr = dla.write_reg
    wr("NVDLA_RBK.D_MISC_CFG_0", mode | prec << 8)
    wr("NVDLA_RBK.D_DAIN_RAM_TYPE_0", 1)
    wr("NVDLA_RBK.D_DAOUT_RAM_TYPE_0", 1)
    wr("NVDLA_RBK.D_DATAIN_SIZE_0_0", (w - 1) | (h - 1) << 16)
    wr("NVDLA_RBK.D_DATAIN_SIZE_1_0", c_in - 1)
    wr("NVDLA_RBK.D_DATAOUT_SIZE_1_0", c_out - 1)
    wr("NVDLA_RBK.D_DAIN_ADDR_LOW_0", SRC)
    wr("NVDLA_RBK.D_DAIN_ADDR_HIGH_0", 0)
    wr("NVDLA_RBK.D_DAOUT_ADDR_LOW_0", DST)
    wr("NVDLA_RBK.D_DAOUT_ADDR_HIGH_0", 0)
    for name, v in (("DAIN_LINE_STRIDE", in_line), ("DAIN_SURF_STRIDE", in_surf),
                    ("DAIN_PLANAR_STRIDE", in_planar), ("DAOUT_LINE_STRIDE", out_line),
                    ("DAOUT_SURF_STRIDE", out_surf), ("DAOUT_PLANAR_STRIDE", out_planar),
                    ("CONTRACT_STRIDE_0", cs0), ("CONTRACT_STRIDE_1", cs1)):
        wr(f"NVDLA_RBK.D_{name}_0", v)
    wr("NVDLA_RBK.D_DECONV_STRIDE_0", (sx - 1) | (sy - 1) << 16)
    if enable:
        wr("NVDLA_RBK.D_OP_ENABLE_0", 1)


def _mem(dla, base, size=1 << 16):
    return dla.dram.read(base, size)


def test_split_10_channel_3x2_cube_into_planes():
    dla = _dla()
    w, h, c = 3, 2, 10
    line, planar, out_line = 96, 256, 64
    src = bytearray([0xEE]) * 512  # padding lanes 10..31 hold 0xEE: must not reach a plane
    for ch in range(c):
        for y in range(h):
            for x in range(w):
                src[y * line + x * 32 + ch] = ch * 16 + y * 4 + x + 1
    dla.dram.write(SRC, bytes(src))
    dla.dram.write(DST, b"\x55" * 4096)
    _program(dla, SPLIT, w, h, c, c, in_line=line, in_surf=line * h, out_line=out_line,
             out_planar=planar)
    want = bytearray(b"\x55" * 4096)
    for ch in range(c):
        for y in range(h):
            base = ch * planar + y * out_line
            want[base:base + 32] = bytes(32)  # each plane line is one whole 32-byte atom
            for x in range(w):
                want[base + x] = ch * 16 + y * 4 + x + 1
    assert _mem(dla, DST, 4096).tobytes() == bytes(want)
    # plane 7, row 1 by hand: 7*16+4+{0,1,2}+1 = 117, 118, 119
    assert _mem(dla, DST + 7 * planar + out_line, 4).tolist() == [117, 118, 119, 0]
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == RBK0
    rec = dla.stats[-1]
    assert (rec.unit, rec.details["mode"], rec.shape["out"]) == ("RUBIK", "SPLIT", (10, 2, 3))
    # reads 1 surface x 2 lines x 3 atoms, writes 10 planes x 2 lines x 32 B; 64 B/cycle
    assert rec.details["bytes"] == {"read": 192, "write": 640}
    assert rec.cycles == -(-(192 + 640) // 64)


def _feature_cube_bytes(vals, line, surf, esize, size):
    """Plain loops: vals[c][h][w] (ints) in the 32-byte-atom feature layout."""
    per_atom = 32 // esize
    buf = bytearray(size)
    for ch, plane in enumerate(vals):
        for y, row in enumerate(plane):
            for x, v in enumerate(row):
                off = (ch // per_atom) * surf + y * line + x * 32 + (ch % per_atom) * esize
                buf[off:off + esize] = int(v).to_bytes(esize, "little", signed=True)
    return buf


def test_split_then_merge_round_trips_int16_over_two_surfaces():
    rng = np.random.default_rng(3)
    w, h, c = 70, 2, 20  # 16 int16 channels per atom: 2 surfaces; 70 px: two 64-px chunks
    vals = rng.integers(-32768, 32768, (c, h, w)).tolist()
    line, surf = w * 32, w * 32 * h
    dla = _dla(size=1 << 17)
    dla.dram.write(SRC, bytes(_feature_cube_bytes(vals, line, surf, 2, 2 * surf)))
    planar, pline = 512, 160  # a plane line: 140 data bytes, written as 160
    _program(dla, SPLIT, w, h, c, c, prec=1, in_line=line, in_surf=surf, out_line=pline,
             out_planar=planar)
    planes = _mem(dla, DST, c * planar)
    for ch in range(c):
        for y in range(h):
            got = planes[ch * planar + y * pline:][:160].tobytes()
            want = b"".join(v.to_bytes(2, "little", signed=True) for v in vals[ch][y])
            assert got == want + bytes(20), (ch, y)
    # merge the planes back into a cube at SRC (cleared first)
    dla.dram.write(SRC, bytes(2 * surf))
    dla.write_reg("NVDLA_RBK.S_POINTER_0", 1)  # program group 1
    wr = dla.write_reg
    _program(dla, MERGE, w, h, c, c, prec=1, in_line=pline, in_planar=planar, out_line=line,
             out_surf=surf, enable=False)
    wr("NVDLA_RBK.D_DAIN_ADDR_LOW_0", DST)
    wr("NVDLA_RBK.D_DAOUT_ADDR_LOW_0", SRC)
    wr("NVDLA_RBK.D_OP_ENABLE_0", 1)
    assert _mem(dla, SRC, 2 * surf).tobytes() == bytes(
        _feature_cube_bytes(vals, line, surf, 2, 2 * surf))
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == RBK0 | RBK1
    assert [r.details["mode"] for r in dla.stats] == ["SPLIT", "MERGE"]


def test_merge_writes_zero_padding_lanes_and_reads_only_the_planes_asked_for():
    dla = _dla()
    w, h, c = 2, 3, 5
    planar, pline = 128, 32
    src = bytearray(1024)
    for ch in range(8):  # planes 5..7 exist in memory but DATAIN_CHANNEL says 5
        for y in range(h):
            for x in range(w):
                src[ch * planar + y * pline + x] = 100 + ch * 10 + y * 2 + x
    dla.dram.write(SRC, bytes(src))
    dla.dram.write(DST, b"\x77" * 1024)
    _program(dla, MERGE, w, h, c, c, in_line=pline, in_planar=planar, out_line=64, out_surf=192)
    want = bytearray(b"\x77" * 1024)
    for y in range(h):
        for x in range(w):
            atom = y * 64 + x * 32
            want[atom:atom + 32] = bytes(32)
            for ch in range(c):
                want[atom + ch] = 100 + ch * 10 + y * 2 + x
    assert _mem(dla, DST, 1024).tobytes() == bytes(want)


def test_contract_of_a_stride_2x2_deconvolution_equals_the_deconvolution():
    # ConvTranspose 2x2, stride 2, 2 input channels, 3 output channels, on 2x3 (HxW)
    rng = np.random.default_rng(11)
    cin, k_out, h, w = 2, 3, 2, 3
    x = rng.integers(-3, 4, (cin, h, w)).tolist()
    k = rng.integers(-3, 4, (cin, k_out, 2, 2)).tolist()
    deconv = [[[0] * (2 * w) for _ in range(2 * h)] for _ in range(k_out)]
    for ci in range(cin):  # the definition: each input pixel scatters a 2x2 kernel
        for o in range(k_out):
            for y in range(h):
                for xx in range(w):
                    for i in range(2):
                        for j in range(2):
                            deconv[o][2 * y + i][2 * xx + j] += x[ci][y][xx] * k[ci][o][i][j]
    # phase I as the hardware runs it: one stride-1 1x1 conv per kernel tap (iy, ix),
    # outputs concatenated along C: sub-cube iy * 2 + ix holds k_out channels
    line, surf = w * 32, w * 32 * h
    sub = surf  # one surface per sub-cube (k_out <= 32)
    ext = bytearray(4 * sub)
    for iy in range(2):
        for ix in range(2):
            for o in range(k_out):
                for y in range(h):
                    for xx in range(w):
                        v = sum(x[ci][y][xx] * k[ci][o][iy][ix] for ci in range(cin))
                        ext[(iy * 2 + ix) * sub + y * line + xx * 32 + o] = v & 0xFF
    dla = _dla()
    dla.dram.write(SRC, bytes(ext))
    out_line = 2 * w * 32
    _program(dla, CONTRACT, w, h, 4 * k_out, k_out, in_line=line, in_surf=surf, sx=2, sy=2,
             cs0=sub, cs1=2 * out_line, out_line=out_line, out_surf=2 * h * out_line)
    out = _mem(dla, DST, 2 * h * out_line).view(np.int8)
    for o in range(k_out):
        for yy in range(2 * h):
            for xx in range(2 * w):
                assert out[yy * out_line + xx * 32 + o] == deconv[o][yy][xx], (o, yy, xx)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == RBK0
    rec = dla.stats[-1]
    assert rec.shape["out"] == (3, 4, 6) and rec.details["bytes"]["write"] == 4 * 6 * 32


@pytest.mark.parametrize("sx,sy,c_out,w,h", [(3, 2, 40, 2, 2), (10, 1, 4, 2, 1)])
def test_contract_moves_whole_atoms_by_the_documented_addresses(sx, sy, c_out, w, h):
    surfs = -(-c_out // 32)
    in_line, in_surf = w * 32 + 32, (w * 32 + 32) * h  # unpacked lines: gaps stay unread
    cs0 = surfs * in_surf + 64  # sub-cube stride, not the packed value
    out_line = sx * w * 32
    cs1 = sy * out_line + 96  # gap between row groups
    out_surf = h * cs1
    n_in = sx * sy * cs0
    rng = np.random.default_rng(sx)
    src = rng.integers(0, 256, n_in).astype(np.uint8)
    dla = _dla()
    dla.dram.write(SRC, src)
    dla.dram.write(DST, b"\x5a" * (surfs * out_surf))
    _program(dla, CONTRACT, w, h, sx * sy * c_out, c_out, in_line=in_line, in_surf=in_surf,
             sx=sx, sy=sy, cs0=cs0, cs1=cs1, out_line=out_line, out_surf=out_surf)
    want = bytearray(b"\x5a" * (surfs * out_surf))
    for iy in range(sy):
        for ix in range(sx):
            for s in range(surfs):
                for y in range(h):
                    for xx in range(w):
                        a = (iy * sx + ix) * cs0 + s * in_surf + y * in_line + xx * 32
                        b = s * out_surf + y * cs1 + iy * out_line + (xx * sx + ix) * 32
                        want[b:b + 32] = src[a:a + 32].tobytes()  # padding lanes too
    assert _mem(dla, DST, len(want)).tobytes() == bytes(want)


def test_groups_run_in_consumer_order_and_flip():
    dla = _dla()
    dla.write_reg("NVDLA_RBK.S_POINTER_0", 1)  # program group 1 first: it must wait
    _program(dla, SPLIT, 1, 1, 1, 1, out_line=32, out_planar=32)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == 0 and not dla.stats
    dla.write_reg("NVDLA_RBK.S_POINTER_0", 0)
    _program(dla, MERGE, 1, 1, 1, 1, out_line=32, out_surf=32, in_line=32, in_planar=32)
    assert [(r.details["mode"], r.details["group"]) for r in dla.stats] == \
        [("MERGE", 0), ("SPLIT", 1)]
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == RBK0 | RBK1
    assert dla.read_reg("NVDLA_RBK.S_POINTER_0") >> 16 & 1 == 0  # flipped twice
    for group in (0, 1):
        dla.write_reg("NVDLA_RBK.S_POINTER_0", group)
        assert dla.read_reg("NVDLA_RBK.D_OP_ENABLE_0") == 0


def test_masked_interrupt_is_not_raised():
    dla = _dla()
    dla.write_reg("NVDLA_GLB.S_INTR_MASK_0", RBK0)
    _program(dla, SPLIT, 1, 1, 1, 1, out_line=32, out_planar=32)
    assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == 0 and len(dla.stats) == 1


def test_errors():
    with pytest.raises(UnsupportedError, match="RUBIK is programmed but nv_small has no Rubik"):
        _program(_dla("nv_small"), SPLIT, 1, 1, 1, 1)
    with pytest.raises(ConfigError, match=r"RUBIK.D_MISC_CFG = 0x3: RUBIK_MODE 3 not in 0 "):
        _program(_dla(), 3, 1, 1, 1, 1)
    with pytest.raises(ConfigError, match=r"RUBIK.D_MISC_CFG = 0x301: IN_PRECISION 3 not in"):
        _program(_dla(), SPLIT, 1, 1, 1, 1, prec=3)
    with pytest.raises(ConfigError, match=r"RUBIK.D_DATAOUT_SIZE_1 = 0x20: split of 10 channels "
                                          r"\(1 surfaces\) into 33 planes \(2 surfaces\)"):
        _program(_dla(), SPLIT, 1, 1, 10, 33)
    with pytest.raises(ConfigError, match=r"RUBIK.D_DECONV_STRIDE = 0x2: contract output "
                                          r"12288x1 \(WxH\) exceeds 8192"):
        _program(_dla(), CONTRACT, 4096, 1, 3, 1, sx=3)
    with pytest.raises(DramAccessError, match="RUBIK: read of"):
        _program(_dla(), SPLIT, 1, 2, 1, 1, in_line=1 << 20, in_surf=32)  # line 1 is 1 MiB on
    no_reshape = dataclasses.replace(get_preset("nv_full"), rubik_reshape=False)
    with pytest.raises(UnsupportedError, match="RUBIK MERGE needs rubik_reshape"):
        _program(_dla(no_reshape), MERGE, 1, 1, 1, 1)
    _program(_dla(no_reshape), CONTRACT, 1, 1, 1, 1)  # contract still there
    no_cv = dataclasses.replace(get_preset("nv_full"), secondary_memif=False)
    dla = _dla(no_cv)
    _program(dla, SPLIT, 1, 1, 1, 1, enable=False)
    dla.write_reg("NVDLA_RBK.D_DAOUT_RAM_TYPE_0", 0)
    with pytest.raises(ConfigError, match=r"RUBIK.D_DAOUT_RAM_TYPE = 0x0: DATAOUT_RAM_TYPE is "
                                          r"CVSRAM but nv_full has no secondary memory"):
        dla.write_reg("NVDLA_RBK.D_OP_ENABLE_0", 1)


_WRITABLE = [r.name for r in UNITS["NVDLA_RBK"].registers.values()
             if r.name.startswith("D_") and r.name != "D_OP_ENABLE"
             and any("w" in f.access for f in r.fields)]
_SMALL = re.compile(r"SIZE|STRIDE|ADDR_LOW")


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(values=st.fixed_dictionaries({
    n: st.one_of(st.integers(0, 15), st.integers(0, 0x3FFF), st.integers(0, 2**32 - 1))
    if _SMALL.search(n) else st.integers(0, 2**32 - 1) for n in _WRITABLE}),
    small_mode=st.booleans())
def test_random_registers_give_output_or_clear_error(values, small_mode):
    dla = Dla(get_preset("nv_full"))
    dla.dram.map(0, 1 << 16)
    before = dla.dram.read(0, 1 << 16)
    for name, v in values.items():
        if small_mode and name == "D_MISC_CFG":
            v &= 0x103  # valid precisions and modes most of the time
        if small_mode and name.endswith("ADDR_HIGH"):
            v = 0
        dla.write_reg(f"NVDLA_RBK.{name}_0", v)
    try:
        dla.write_reg("NVDLA_RBK.D_OP_ENABLE_0", 1)
    except ConfigError as exc:
        assert str(exc).startswith("RUBIK."), str(exc)
    except (UnsupportedError, DramAccessError) as exc:  # ModelLimitError is an Unsupported
        assert "RUBIK" in str(exc), str(exc)
        assert (dla.dram.read(0, 1 << 16) == before).all()  # failed before writing
    else:
        assert dla.read_reg("NVDLA_GLB.S_INTR_STATUS_0") == RBK0
        assert dla.stats[-1].cycles > 0
