"""The SDP's Y (EW) stage and its LUT through the firmware: register values on a fake
backend, hand-built tasks on the nv_large cmodel.

Expected outputs are written here from the NVDLA arithmetic (NVDLA_FACTS section
3, lut-programming.rst), element by element in plain Python - not taken from
the cmodel, nor from ``accel.golden.int8_ref``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from accel.config import get_preset
from accel.layout import CubeLayout, pack_feature, unpack_feature
from accel.loadable.descriptors import (
    ACTIVATION_LUT,
    OP_SDP,
    SDP_OP_ADD,
    SDP_OP_MUL,
    SDP_OP_PER_LAYER,
    SDP_OP_PER_POINT,
    CvtParam,
    SdpCvt,
    SdpOp,
    SdpOpDesc,
)
from accel.loadable.descriptors_aux import LutParam
from accel.loadable.surfaces import SdpSurfaceDesc
from accel.runtime import fw_sdp
from accel.runtime.firmware import Firmware, FirmwareError
from accel.runtime.regwriter import RegWriter
from tests.accel.runtime.fake_backend import FakeBackend
from tests.accel.runtime.task_builder import DATA0, TaskOp, cube, hand_lo_lut, write_task

CFG = get_preset("nv_large")
ATOM = CFG.atom_size
C, H, W = 40, 2, 4          # 320 elements, two surfaces (the second one partial)
OFF = CvtParam(scale=1, truncate=0, enable=0, offset=0)


@pytest.fixture
def backend():
    from accel.backends import get_backend
    return get_backend("cmod", CFG)


def _layout(c=C, h=H, w=W):
    return CubeLayout(c, h, w, ATOM, w * ATOM, w * h * ATOM)


def _pack(x):
    return pack_feature(x, _layout(*x.shape)).tobytes()


def _read(be, addrs, region):
    lay = _layout()
    return unpack_feature(be.read_mem(addrs[DATA0 + region], lay.size), lay).astype(np.int64)


def _rha(v: float) -> int:
    """Round half away from zero."""
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def _sat(v: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def _stage(**kw) -> SdpOp:
    kw.setdefault("cvt", SdpCvt(alu_cvt=OFF, mul_cvt=OFF))
    return SdpOp(**kw)


def _op(x1=None, y=None, lut_index=-1, out=(1, 0, 0)) -> SdpOpDesc:
    scale, shift, offset = out
    return SdpOpDesc(src_precision=0, dst_precision=0, lut_index=lut_index,
                     out_cvt=CvtParam(scale=scale, truncate=shift, enable=1, offset=offset),
                     conv_mode=0, batch_num=1, x1_op=x1 or _stage(), x2_op=_stage(),
                     y_op=y or _stage())


def _surf(y_data=None, dst=1):
    empty = cube(0, C, H, W, atom=ATOM)
    return SdpSurfaceDesc(src_data=cube(0, C, H, W, atom=ATOM), x1_data=empty, x2_data=empty,
                          y_data=y_data or empty, dst_data=cube(dst, C, H, W, atom=ATOM))


def _hand_lookup(x: int, step: int = 10) -> int:
    """:func:`hand_lo_lut` at ``x``: interpolation between entries 4 apart, slopes outside."""
    if x <= 0:
        return _rha(x * 3 / 2)
    i, r = x >> 2, x & 3
    if i >= 256:
        return step * 256 + _rha((x - 1024) * 5 / 4)
    return _rha((step * i * (4 - r) + step * (i + 1) * r) / 4)


def _all_int8(seed: int) -> np.ndarray:
    """Every int8 value once, then random ones, as a [C, H, W] cube."""
    rng = np.random.default_rng(seed)
    v = np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, C * H * W - 256)])
    return rng.permutation(v).reshape(C, H, W)


# ------------------------------------------------------------ on the cmodel

def test_lut_interpolates_between_entries_and_extrapolates_outside(backend):
    """X1 multiplies by 13 (inputs -1664..1651: under, hits with every fraction, over),
    the LUT interpolates, the converter divides by 32."""
    x = _all_int8(1)
    op = _op(x1=_stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_LAYER, mul_operand=13),
             y=_stage(enable=1, act=ACTIVATION_LUT), lut_index=0, out=(1, 5, 0))
    addrs = write_task(backend, [TaskOp(OP_SDP, op, _surf())], [_pack(x), 4096], [hand_lo_lut()])
    Firmware(CFG, backend).run(addrs)
    want = np.vectorize(lambda q: _sat(_rha(_hand_lookup(13 * int(q)) / 32), 8))(x)
    np.testing.assert_array_equal(_read(backend, addrs, 1), want)
    (rec,) = [s for s in backend.stats if s.unit == "SDP"]
    assert rec.note == ""       # nv_large has the Y stage: nothing modelled extra


def test_y_multiplier_reads_its_operand_from_memory_through_its_converter(backend):
    """Y MUL per element (int8 operand o from ERDMA): o' = sat32(round((o - 3) * 5 / 2)),
    then round(x * o' / 2**2); the converter divides by 2**7."""
    x, o = _all_int8(2), _all_int8(3)
    y = _stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_POINT, truncate=2, precision=0,
               cvt=SdpCvt(alu_cvt=OFF, mul_cvt=CvtParam(scale=5, truncate=1, enable=1,
                                                        offset=3)))
    op = _op(y=y, out=(1, 7, 0))
    surf = _surf(y_data=cube(2, C, H, W, atom=ATOM))
    addrs = write_task(backend, [TaskOp(OP_SDP, op, surf)], [_pack(x), 4096, _pack(o)])
    fw = Firmware(CFG, backend, log_regs=True)
    fw.run(addrs)

    def one(q, p):
        p2 = _sat(_rha((int(p) - 3) * 5 / 2), 32)
        return _sat(_rha(_sat(_rha(int(q) * p2 / 4), 32) / 128), 8)
    np.testing.assert_array_equal(_read(backend, addrs, 1), np.vectorize(one)(x, o))
    log = {s for s, _, _ in fw.regs.log}
    assert "NVDLA_SDP_RDMA.D_EW_BASE_ADDR_LOW_0" in log


def test_y_adds_a_full_32_bit_register_operand(backend):
    """X1 * 1000, Y ALU + 70000 (beyond int16), converter / 2**10 with int8 saturation."""
    x = _all_int8(4)
    op = _op(x1=_stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_LAYER, mul_operand=1000),
             y=_stage(enable=1, type=SDP_OP_ADD, alu_type=2, mode=SDP_OP_PER_LAYER,
                      alu_operand=70000), out=(1, 10, 0))
    addrs = write_task(backend, [TaskOp(OP_SDP, op, _surf())], [_pack(x), 4096])
    Firmware(CFG, backend).run(addrs)
    want = np.vectorize(lambda q: _sat(_rha((1000 * int(q) + 70000) / 1024), 8))(x)
    np.testing.assert_array_equal(_read(backend, addrs, 1), want)


def test_sdp_ops_with_different_luts_take_turns(backend):
    x = _all_int8(5)
    lut_op = _stage(enable=1, act=ACTIVATION_LUT)
    x1 = _stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_LAYER, mul_operand=4)
    ops = [TaskOp(OP_SDP, _op(x1=x1, y=lut_op, lut_index=0, out=(1, 5, 0)), _surf(dst=1),
                  consumers={OP_SDP: (1, 0)}),
           TaskOp(OP_SDP, _op(x1=x1, y=lut_op, lut_index=1, out=(1, 5, 0)), _surf(dst=2))]
    addrs = write_task(backend, ops, [_pack(x), 4096, 4096], [hand_lo_lut(10), hand_lo_lut(-7)])
    fw = Firmware(CFG, backend)
    fw.run(addrs)
    ev = fw.events
    assert "wait 1 SDP lut 1" in ev
    assert ev.index("complete 0 SDP") < ev.index("program 1 SDP group 1")
    for region, step in ((1, 10), (2, -7)):
        want = np.vectorize(lambda q, s=step: _sat(_rha(_hand_lookup(4 * int(q), s) / 32), 8))(x)
        np.testing.assert_array_equal(_read(backend, addrs, region), want)


def test_an_op_whose_table_the_lut_holds_does_not_load_it_again(backend):
    """Ops with tables 0, 0, 1: the second finds table 0 in the LUT (loaded by the first:
    the depthwise blocks of one layer with a SiLU), the third loads table 1 after the
    second completes; every run loads its first table, whatever the one before left."""
    x = _all_int8(6)
    lut_op = _stage(enable=1, act=ACTIVATION_LUT)
    x1 = _stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_LAYER, mul_operand=4)
    tables = [0, 0, 1]
    ops = [TaskOp(OP_SDP, _op(x1=x1, y=lut_op, lut_index=t, out=(1, 5, 0)), _surf(dst=i + 1),
                  consumers={OP_SDP: (i + 1, 0)} if i + 1 < len(tables) else {})
           for i, t in enumerate(tables)]
    addrs = write_task(backend, ops, [_pack(x), 4096, 4096, 4096],
                       [hand_lo_lut(10), hand_lo_lut(-7)])
    fw = Firmware(CFG, backend, log_regs=True)
    per_load = 65 + 257                 # both tables' entries through the access port
    for run in (1, 2):
        fw.run(addrs)
        data = sum(sym.startswith("NVDLA_SDP.S_LUT_ACCESS_DATA") for sym, _, _ in fw.regs.log)
        assert data == 2 * per_load * run, (run, data)      # tables 0 and 1, once each
        assert "lut 1 SDP 0 loaded" in fw.events
        for region, step in ((1, 10), (2, 10), (3, -7)):
            want = np.vectorize(lambda q, s=step: _sat(_rha(_hand_lookup(4 * int(q), s) / 32),
                                                       8))(x)
            np.testing.assert_array_equal(_read(backend, addrs, region), want)


# ------------------------------------------------------ registers, refusals

def _program(op: SdpOpDesc, lut: LutParam | None) -> RegWriter:
    w = RegWriter(FakeBackend(), keep_log=True)
    addr = {"src_data": 0x8000_0000, "dst_data": 0x8010_0000, "y_data": 0x8020_0000}
    fw_sdp.program(w, 3, op, _surf(), lambda c, what: addr[what], lut)
    return w


def test_lut_op_registers_hand_computed():
    w = _program(_op(y=_stage(enable=1, act=ACTIVATION_LUT), lut_index=0), hand_lo_lut())
    syms = [s for s, _, _ in w.log]
    r = {s: v for s, _, v in w.log}
    # EW_BYPASS NO [0], ALU_BYPASS YES [1], ALU_ALGO MAX [3:2], MUL_BYPASS YES [4],
    # PRELU NO [5], LUT_BYPASS NO [6]
    assert r["NVDLA_SDP.D_DP_EW_CFG_0"] == 1 << 1 | 1 << 4
    assert r["NVDLA_SDP.D_DP_EW_TRUNCATE_VALUE_0"] == 0
    assert "NVDLA_SDP.D_DP_EW_ALU_CFG_0" not in r and "NVDLA_SDP.D_DP_EW_MUL_CFG_0" not in r
    # the ERDMA stays off (no memory operand): DISABLE YES [0]
    assert r["NVDLA_SDP_RDMA.D_ERDMA_CFG_0"] & 1 == 1
    # both tables through the SDP's port, between the RDMA and the SDP D_ registers
    data = [i for i, s in enumerate(syms) if s == "NVDLA_SDP.S_LUT_ACCESS_DATA_0"]
    assert len(data) == 65 + 257
    assert syms.index("NVDLA_SDP_RDMA.D_ERDMA_CFG_0") < data[0]
    assert data[-1] < syms.index("NVDLA_SDP.D_DATA_CUBE_WIDTH_0")
    # LINEAR [0], all three priorities LO [4], [5], [6]; LO index select 2 at [23:16]
    assert r["NVDLA_SDP.S_LUT_CFG_0"] == 1 | 1 << 4 | 1 << 5 | 1 << 6
    assert r["NVDLA_SDP.S_LUT_INFO_0"] == 2 << 16
    # the SDP's start/end registers are 32 bits (no HIGH halves)
    assert r["NVDLA_SDP.S_LUT_LE_START_0"] == 0x7FFF_FFFF
    assert (r["NVDLA_SDP.S_LUT_LO_START_0"], r["NVDLA_SDP.S_LUT_LO_END_0"]) == (0, 1024)
    assert r["NVDLA_SDP.S_LUT_LO_SLOPE_SCALE_0"] == 3 | 5 << 16
    assert r["NVDLA_SDP.S_LUT_LO_SLOPE_SHIFT_0"] == 1 | 2 << 5


def test_y_memory_operand_registers_hand_computed():
    y = _stage(enable=1, type=SDP_OP_MUL, mode=SDP_OP_PER_POINT, truncate=9,
               cvt=SdpCvt(alu_cvt=OFF, mul_cvt=CvtParam(scale=-2, truncate=4, enable=1,
                                                        offset=-70000)))
    op = _op(y=y)
    w = RegWriter(FakeBackend(), keep_log=True)
    addr = {"src_data": 0x8000_0000, "dst_data": 0x8010_0000, "y_data": 0x1_8020_0040}
    fw_sdp.program(w, 3, op, _surf(y_data=cube(2, C, H, W, atom=ATOM)),
                   lambda c, what: addr[what], None)
    r = {s: v for s, _, v in w.log}
    # EW on [0]=0, ALU bypassed [1], MUL on [4]=0, LUT bypassed [6]
    assert r["NVDLA_SDP.D_DP_EW_CFG_0"] == 1 << 1 | 1 << 6
    # MUL source MEM [0], converter on (CVT_BYPASS NO) [1]
    assert r["NVDLA_SDP.D_DP_EW_MUL_CFG_0"] == 1
    assert r["NVDLA_SDP.D_DP_EW_MUL_CVT_OFFSET_VALUE_0"] == (-70000) & 0xFFFF_FFFF
    assert r["NVDLA_SDP.D_DP_EW_MUL_CVT_SCALE_VALUE_0"] == 0xFFFE
    assert r["NVDLA_SDP.D_DP_EW_MUL_CVT_TRUNCATE_VALUE_0"] == 4
    assert r["NVDLA_SDP.D_DP_EW_TRUNCATE_VALUE_0"] == 9
    # ERDMA: enabled [0]=0, DATA_USE MUL (0) [2:1], ONE_BYTE [3]=0, PER_ELEMENT [4]=1,
    # RAM_TYPE MC [5]=1
    assert r["NVDLA_SDP_RDMA.D_ERDMA_CFG_0"] == 1 << 4 | 1 << 5
    assert (r["NVDLA_SDP_RDMA.D_EW_BASE_ADDR_LOW_0"],
            r["NVDLA_SDP_RDMA.D_EW_BASE_ADDR_HIGH_0"]) == (0x8020_0040, 1)
    assert r["NVDLA_SDP_RDMA.D_EW_LINE_STRIDE_0"] == W * ATOM


@pytest.mark.parametrize("op, lut, message", [
    (_op(y=_stage(enable=1, act=ACTIVATION_LUT), lut_index=-1), None,
     "sdp op 3: the Y stage's act is LUT but lut_index is -1"),
    (_op(y=_stage(enable=0, act=ACTIVATION_LUT), lut_index=0), hand_lo_lut(),
     "sdp op 3: the Y stage is disabled but its act is LUT"),
    (_op(y=_stage(enable=1, act=ACTIVATION_LUT), lut_index=0), None,
     "sdp op 3: lut_index 0 but no LUT parameters"),
])
def test_inconsistent_lut_descriptors_are_refused(op, lut, message):
    with pytest.raises(FirmwareError, match=message):
        _program(op, lut)


def test_sdp_lut_index_outside_the_lut_list():
    op = _op(y=_stage(enable=1, act=ACTIVATION_LUT), lut_index=2)
    be = FakeBackend()
    addrs = write_task(be, [TaskOp(OP_SDP, op, _surf())], [4096, 4096], [hand_lo_lut()])
    with pytest.raises(FirmwareError, match=r"sdp op 0: lut_index 2 outside the task's 1 LUTs"):
        Firmware(CFG, be).run(addrs)
