"""fw_cdp / fw_lut register programming against a fake backend, hand-computed values."""

from __future__ import annotations

import pytest

from accel.loadable.descriptors import CvtParam
from accel.loadable.descriptors_aux import CdpOpDesc, FloatData, LutParam
from accel.loadable.surfaces import CdpSurfaceDesc
from accel.runtime import fw_cdp
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter
from tests.accel.runtime.fake_backend import FakeBackend
from tests.accel.runtime.task_builder import cube


def _lut(method: int = 1) -> LutParam:
    return LutParam(
        linear_exp_table=[100 + i for i in range(65)],
        linear_only_table=[-i for i in range(257)],
        linear_exp_offset=-2, linear_only_offset=5,
        linear_exp_start=-16, linear_exp_end=1 << 33, linear_only_start=3, linear_only_end=700,
        linear_exp_underflow_slope=FloatData(scale=-2, shifter=-3),
        linear_exp_overflow_slope=FloatData(scale=7, shifter=4),
        linear_only_underflow_slope=FloatData(scale=1, shifter=0),
        linear_only_overflow_slope=FloatData(scale=300, shifter=15),
        hybrid_priority=1, underflow_priority=0, overflow_priority=1, method=method)


def _op(**kw) -> CdpOpDesc:
    base = dict(in_precision=0, out_precision=0, lut_index=0,
                in_cvt=CvtParam(scale=3, truncate=2, enable=1, offset=-3),
                out_cvt=CvtParam(scale=-5, truncate=40, enable=1, offset=-70000),
                local_size=5, bypass_sqsum=0, bypass_out_mul=1)
    base.update(kw)
    return CdpOpDesc(**base)


def _surf() -> CdpSurfaceDesc:
    return CdpSurfaceDesc(src_data=cube(0, 16, 4, 6), dst_data=cube(1, 16, 4, 6))


def _program(op: CdpOpDesc, lut: LutParam | None) -> RegWriter:
    w = RegWriter(FakeBackend(), keep_log=True)
    addr = {"src_data": 0x8000_0000, "dst_data": 0x8010_0000}
    fw_cdp.program(w, 2, op, _surf(), lambda c, what: addr[what], lut)
    return w


def test_lut_loaded_through_the_access_port():
    w = _program(_op(), _lut())
    syms = [s for s, _, _ in w.log]
    vals = [v for _, _, v in w.log]
    cfg = [i for i, s in enumerate(syms) if s == "NVDLA_CDP.S_LUT_ACCESS_CFG_0"]
    assert len(cfg) == 2
    # LE (table 0) then LO (table 1) at address 0, access type WRITE (bit 17)
    assert vals[cfg[0]] == 1 << 17 and vals[cfg[1]] == 1 << 17 | 1 << 16
    le = vals[cfg[0] + 1:cfg[1]]
    lo = vals[cfg[1] + 1:cfg[1] + 258]
    data = "NVDLA_CDP.S_LUT_ACCESS_DATA_0"
    assert syms[cfg[0] + 1:cfg[1]] == [data] * 65
    assert syms[cfg[1] + 1:cfg[1] + 258] == [data] * 257
    assert syms[cfg[1] + 258] != data
    assert le == [100 + i for i in range(65)]
    assert lo == [(-i) & 0xFFFF for i in range(257)]
    # the LUT is written after the RDMA registers and before the CDP D_ registers
    assert syms.index("NVDLA_CDP_RDMA.D_DATA_FORMAT_0") < cfg[0]
    assert syms.index("NVDLA_CDP.D_DST_BASE_ADDR_LOW_0") > cfg[1] + 257
    r = dict((s, v) for s, _, v in w.log)
    # LINEAR (1) [0], UFLOW LE (0) [4], OFLOW LO [5], HYBRID LO [6]
    assert r["NVDLA_CDP.S_LUT_CFG_0"] == 1 | 1 << 5 | 1 << 6
    # linear LE: index select from linear_exp_offset (-2 -> 0xFE) at [15:8]; LO select 5 at [23:16]
    assert r["NVDLA_CDP.S_LUT_INFO_0"] == 0xFE << 8 | 5 << 16
    # start -16: low word 0xFFFFFFF0, high 6 bits all ones; end 2**33: high = 2
    assert r["NVDLA_CDP.S_LUT_LE_START_LOW_0"] == 0xFFFF_FFF0
    assert r["NVDLA_CDP.S_LUT_LE_START_HIGH_0"] == 0x3F
    assert (r["NVDLA_CDP.S_LUT_LE_END_LOW_0"], r["NVDLA_CDP.S_LUT_LE_END_HIGH_0"]) == (0, 2)
    assert (r["NVDLA_CDP.S_LUT_LO_START_LOW_0"], r["NVDLA_CDP.S_LUT_LO_END_LOW_0"]) == (3, 700)
    # slopes: uflow scale [15:0], oflow scale [31:16]; shifts 5 bits at [4:0] and [9:5]
    assert r["NVDLA_CDP.S_LUT_LE_SLOPE_SCALE_0"] == 0xFFFE | 7 << 16
    assert r["NVDLA_CDP.S_LUT_LE_SLOPE_SHIFT_0"] == (-3 & 0x1F) | 4 << 5
    assert r["NVDLA_CDP.S_LUT_LO_SLOPE_SCALE_0"] == 1 | 300 << 16
    assert r["NVDLA_CDP.S_LUT_LO_SLOPE_SHIFT_0"] == 0 | 15 << 5


def test_exponential_lut_takes_index_offset():
    r = {s: v for s, _, v in _program(_op(), _lut(method=0)).log}
    assert r["NVDLA_CDP.S_LUT_CFG_0"] == 0 | 1 << 5 | 1 << 6
    # exponential LE: index offset (-2 -> 0xFE) at [7:0]
    assert r["NVDLA_CDP.S_LUT_INFO_0"] == 0xFE | 5 << 16


def test_lrn_registers_hand_computed():
    r = {s: v for s, _, v in _program(_op(), _lut()).log}
    assert r["NVDLA_CDP.D_LRN_CFG_0"] == 1                 # local size 5 -> LEN5
    assert r["NVDLA_CDP.D_DATIN_OFFSET_0"] == 0xFFFD       # -3 in 16 bits
    assert r["NVDLA_CDP.D_DATIN_SCALE_0"] == 3
    assert r["NVDLA_CDP.D_DATIN_SHIFTER_0"] == 2
    assert r["NVDLA_CDP.D_DATOUT_OFFSET_0"] == (1 << 32) - 70000
    assert r["NVDLA_CDP.D_DATOUT_SCALE_0"] == 0x10000 - 5
    assert r["NVDLA_CDP.D_DATOUT_SHIFTER_0"] == 40
    assert r["NVDLA_CDP.D_FUNC_BYPASS_0"] == 0b10          # MUL bypassed, square sum kept
    # CDP enums: CV = 0, MC = 1
    assert r["NVDLA_CDP.D_DST_DMA_CFG_0"] == 1 == r["NVDLA_CDP_RDMA.D_SRC_DMA_CFG_0"]
    assert (r["NVDLA_CDP_RDMA.D_DATA_CUBE_WIDTH_0"], r["NVDLA_CDP_RDMA.D_DATA_CUBE_HEIGHT_0"],
            r["NVDLA_CDP_RDMA.D_DATA_CUBE_CHANNEL_0"]) == (5, 3, 15)
    assert r["NVDLA_CDP_RDMA.D_SRC_LINE_STRIDE_0"] == 48
    assert r["NVDLA_CDP.D_DST_SURFACE_STRIDE_0"] == 192


def test_no_lut_and_disabled_converters():
    op = _op(lut_index=-1, in_cvt=CvtParam(scale=0, truncate=9, enable=0, offset=4),
             local_size=9, bypass_out_mul=0)
    w = _program(op, None)
    r = {s: v for s, _, v in w.log}
    assert not [s for s in r if "S_LUT" in s]
    assert r["NVDLA_CDP.D_LRN_CFG_0"] == 3
    # a disabled converter is the identity
    assert (r["NVDLA_CDP.D_DATIN_OFFSET_0"], r["NVDLA_CDP.D_DATIN_SCALE_0"],
            r["NVDLA_CDP.D_DATIN_SHIFTER_0"]) == (0, 1, 0)
    assert r["NVDLA_CDP.D_FUNC_BYPASS_0"] == 0


@pytest.mark.parametrize("change, message", [
    (dict(local_size=4), r"cdp op 2: local_size 4 not in 3, 5, 7, 9"),
    (dict(out_precision=1), r"in_precision 0 != out_precision 1"),
    (dict(in_precision=2, out_precision=2), r"FP16 LRN is not supported"),
])
def test_bad_descriptors_are_refused(change, message):
    with pytest.raises(FirmwareError, match=message):
        _program(_op(**change), _lut())


def test_lut_index_without_parameters():
    with pytest.raises(FirmwareError, match=r"lut_index 0 but no LUT parameters"):
        _program(_op(), None)


@pytest.mark.parametrize("mine, other, other_enabled, wait", [
    (-1, 3, True, False),     # no LUT needed
    (2, None, False, False),  # other group free
    (2, 2, True, False),      # same table
    (2, 3, False, True),      # a different table is programmed for the other op
    (2, -1, False, False),    # other op uses no LUT and has not started
    (2, -1, True, True),      # ... but the LUT is locked while it runs
])
def test_lut_conflict_rule(mine, other, other_enabled, wait):
    assert fw_cdp.lut_conflict(mine, other, other_enabled) is wait
