"""Hand-built PDP / CDP / SDP->PDP tasks through the firmware on the cmodel.

Expected outputs come from plain numpy pooling / table lookups written here,
not from the cmodel.
"""

from __future__ import annotations

import numpy as np
import pytest

from accel.config import get_preset
from accel.layout import CubeLayout, pack_feature, unpack_feature
from accel.loadable.descriptors import (
    ACTIVATION_RELU,
    EVENT_OP_COMPLETED,
    EVENT_OP_ENABLED,
    OP_BDMA,
    OP_CDP,
    OP_PDP,
    OP_SDP,
    CvtParam,
    SdpCvt,
    SdpOp,
    SdpOpDesc,
)
from accel.loadable.descriptors_aux import (
    BdmaOpDesc,
    CdpOpDesc,
    FloatData,
    LutParam,
    PdpOpDesc,
)
from accel.loadable.surfaces import CdpSurfaceDesc, PdpSurfaceDesc, SdpSurfaceDesc, surface_types
from accel.runtime.firmware import Firmware, FirmwareError
from tests.accel.runtime.fake_backend import FakeBackend
from tests.accel.runtime.task_builder import DATA0, TaskOp, cube, write_task

CFG = get_preset("nv_small")
ATOM = CFG.atom_size


@pytest.fixture
def backend():
    try:
        from accel.backends import get_backend
        return get_backend("cmod", CFG)
    except ImportError as exc:
        pytest.skip(f"cmod backend unavailable: {exc}")


def _layout(c, h, w):
    return CubeLayout(c, h, w, ATOM, w * ATOM, w * h * ATOM)


def _pack(x):
    return pack_feature(x, _layout(*x.shape)).tobytes()


def _read(be, addrs, region, c, h, w):
    lay = _layout(c, h, w)
    return unpack_feature(be.read_mem(addrs[DATA0 + region], lay.size), lay).astype(np.int64)


def _windows(x, k, s, pads, fill):
    """``[C, OH, OW, KH, KW]`` windows of ``x`` padded (top, left, bottom, right) with ``fill``."""
    t, left, b, r = pads
    xp = np.pad(x, ((0, 0), (t, b), (left, r)), constant_values=fill)
    kh, kw = k
    oh, ow = (xp.shape[1] - kh) // s[0] + 1, (xp.shape[2] - kw) // s[1] + 1
    rows = np.arange(oh)[:, None] * s[0] + np.arange(kh)[None, :]
    cols = np.arange(ow)[:, None] * s[1] + np.arange(kw)[None, :]
    return xp[:, rows[:, None, :, None], cols[None, :, None, :]]


def _round16(v):
    """round(v / 2**16), halves away from zero."""
    return np.sign(v) * ((np.abs(v) + (1 << 15)) >> 16)


def _pdp(mode, k, s, pads, **kw):
    base = dict(split_num=1, pool_mode=mode, pool_width=k[1] - 1, pool_height=k[0] - 1,
                stride_x=s[1], stride_y=s[0], pad_left=pads[1], pad_right=pads[3],
                pad_top=pads[0], pad_bottom=pads[2], precision=0)
    base.update(kw)
    return PdpOpDesc(**base)


def test_two_pdp_ops_ping_pong_max_then_average_with_padding(backend):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (12, 9, 10))
    # op 0: 3x3 max, stride 1, pad 1 -> 12x9x10; op 1: 3x3 average, stride 2, pad 1 with
    # padded cells worth -5 each (PAD_VALUE_nX = n * -5) -> 12x5x5
    p = -5
    op0 = TaskOp(OP_PDP, _pdp(1, (3, 3), (1, 1), (1, 1, 1, 1)),
                 PdpSurfaceDesc(src_data=cube(0, 12, 9, 10), dst_data=cube(1, 12, 9, 10)),
                 consumers={OP_PDP: (1, EVENT_OP_COMPLETED)})
    op1 = TaskOp(OP_PDP, _pdp(0, (3, 3), (2, 2), (1, 1, 1, 1),
                              padding_value=[n * p for n in range(1, 8)]),
                 PdpSurfaceDesc(src_data=cube(1, 12, 9, 10), dst_data=cube(2, 12, 5, 5)),
                 deps=1)
    addrs = write_task(backend, [op0, op1], [_pack(x), 4096, 4096])
    fw = Firmware(CFG, backend)
    fw.run(addrs)
    assert "program 0 PDP group 0" in fw.events and "program 1 PDP group 1" in fw.events
    m = _windows(x, (3, 3), (1, 1), (1, 1, 1, 1), -1000).max(axis=(3, 4))
    np.testing.assert_array_equal(_read(backend, addrs, 1, 12, 9, 10), m)
    total = _windows(m, (3, 3), (2, 2), (1, 1, 1, 1), p).sum(axis=(3, 4))
    avg = np.clip(_round16(_round16(total * 0x5555) * 0x5555), -128, 127)
    np.testing.assert_array_equal(_read(backend, addrs, 2, 12, 5, 5), avg)
    # a second task on the same device continues from the hardware's consumer pointers
    fw2 = Firmware(CFG, backend)
    fw2.run(addrs)
    assert "program 0 PDP group 0" in fw2.events


def test_pdp_split_width_equals_one_pass(backend):
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (8, 6, 20))
    # 3 wide, stride 2, left pad 1: 10 output columns in slices of 4 + 4 + 2, reading input
    # columns 0..7, 7..15 (overlap k - s = 1) and 15..19
    op = _pdp(1, (3, 3), (2, 2), (1, 1, 0, 0), split_num=3, partial_in_width_first=8,
              partial_in_width_mid=8, partial_in_width_last=4, partial_width_first=4,
              partial_width_mid=4, partial_width_last=2)
    surf = PdpSurfaceDesc(src_data=cube(0, 8, 6, 20), dst_data=cube(1, 8, 3, 10))
    addrs = write_task(backend, [TaskOp(OP_PDP, op, surf)], [_pack(x), 4096])
    Firmware(CFG, backend).run(addrs)
    want = _windows(x, (3, 3), (2, 2), (1, 1, 0, 0), -1000).max(axis=(3, 4))
    np.testing.assert_array_equal(_read(backend, addrs, 1, 8, 3, 10), want)
    assert [s.details["splits"] for s in backend.stats if s.unit == "PDP"] == [3]


def _relu_sdp() -> SdpOpDesc:
    off = CvtParam(scale=1, truncate=0, enable=0, offset=0)
    idle = SdpOp(cvt=SdpCvt(alu_cvt=off, mul_cvt=off))
    x1 = SdpOp(enable=1, type=0, mode=0, act=ACTIVATION_RELU, cvt=SdpCvt(alu_cvt=off, mul_cvt=off))
    return SdpOpDesc(src_precision=0, dst_precision=0, lut_index=-1,
                     out_cvt=CvtParam(scale=1, truncate=0, enable=1, offset=0), conv_mode=0,
                     batch_num=1, x1_op=x1, x2_op=idle, y_op=idle)


def test_sdp_relu_fused_into_pdp_on_the_fly(backend):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (16, 6, 8))
    hw = cube(0, 16, 6, 8, mem_type=2)
    empty = cube(0, 16, 6, 8)
    sdp = TaskOp(OP_SDP, _relu_sdp(),
                 SdpSurfaceDesc(src_data=cube(0, 16, 6, 8), x1_data=empty, x2_data=empty,
                                y_data=empty, dst_data=hw), deps=1)
    pdp = TaskOp(OP_PDP, _pdp(1, (2, 2), (2, 2), (0, 0, 0, 0)),
                 PdpSurfaceDesc(src_data=hw, dst_data=cube(1, 16, 3, 4)),
                 fused_parent=(0, EVENT_OP_ENABLED))
    addrs = write_task(backend, [sdp, pdp], [_pack(x), 4096])
    fw = Firmware(CFG, backend, log_regs=True)
    fw.run(addrs)
    assert fw.events.index("enable 1 PDP") < fw.events.index("enable 0 SDP")
    log = {s: v for s, _, v in fw.regs.log}
    assert log["NVDLA_SDP.D_FEATURE_MODE_CFG_0"] >> 1 & 1 == 1      # OUTPUT_DST = PDP
    assert "NVDLA_PDP_RDMA.D_OP_ENABLE_0" not in log
    want = _windows(np.maximum(x, 0), (2, 2), (2, 2), (0, 0, 0, 0), 0).max(axis=(3, 4))
    np.testing.assert_array_equal(_read(backend, addrs, 1, 16, 3, 4), want)


def _lo_lut(table: list[int]) -> LutParam:
    """Linear LE of zeros and LO ``table``, index select 0, start 0, LO on every tie."""
    one = FloatData(scale=1, shifter=0)
    return LutParam(linear_exp_table=[0] * 65, linear_only_table=table,
                    linear_exp_underflow_slope=one, linear_exp_overflow_slope=one,
                    linear_only_underflow_slope=one, linear_only_overflow_slope=one,
                    hybrid_priority=1, underflow_priority=1, overflow_priority=1, method=1)


def test_cdp_ops_with_different_luts_take_turns(backend):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 128, (16, 4, 5))
    # square sum and multiplier bypassed, unit converters: out = LO[x] for 0 <= x < 256
    unit = CvtParam(scale=1, truncate=0, enable=1, offset=0)

    def op(lut):
        return CdpOpDesc(in_precision=0, out_precision=0, lut_index=lut, in_cvt=unit,
                         out_cvt=unit, local_size=3, bypass_sqsum=1, bypass_out_mul=1)

    luts = [_lo_lut([i // 2 for i in range(257)]), _lo_lut([100 - i for i in range(257)])]
    ops = [TaskOp(OP_CDP, op(0), CdpSurfaceDesc(src_data=cube(0, 16, 4, 5),
                                                dst_data=cube(1, 16, 4, 5)),
                  consumers={OP_CDP: (1, 0)}),
           TaskOp(OP_CDP, op(1), CdpSurfaceDesc(src_data=cube(0, 16, 4, 5),
                                                dst_data=cube(2, 16, 4, 5)))]
    addrs = write_task(backend, ops, [_pack(x), 4096, 4096], luts)
    fw = Firmware(CFG, backend)
    fw.run(addrs)
    ev = fw.events
    # op 1 needs a different table: it waits until op 0 has completed
    assert "wait 1 CDP lut 1" in ev
    assert ev.index("complete 0 CDP") < ev.index("program 1 CDP group 1")
    np.testing.assert_array_equal(_read(backend, addrs, 1, 16, 4, 5), x // 2)
    np.testing.assert_array_equal(_read(backend, addrs, 2, 16, 4, 5), 100 - x)


def test_cdp_lut_index_outside_the_lut_list():
    unit = CvtParam(scale=1, truncate=0, enable=1, offset=0)
    op = CdpOpDesc(in_precision=0, out_precision=0, lut_index=1, in_cvt=unit, out_cvt=unit,
                   local_size=3)
    surf = CdpSurfaceDesc(src_data=cube(0, 8, 1, 1), dst_data=cube(1, 8, 1, 1))
    be = FakeBackend()
    addrs = write_task(be, [TaskOp(OP_CDP, op, surf)], [64, 64], [_lo_lut([0] * 257)])
    with pytest.raises(FirmwareError, match=r"cdp op 0: lut_index 1 outside the task's 1 LUTs"):
        Firmware(CFG, be).run(addrs)


def test_fused_parent_of_wrong_type_is_refused():
    surf = PdpSurfaceDesc(src_data=cube(0, 8, 2, 2), dst_data=cube(1, 8, 2, 2))
    ops = [TaskOp(OP_PDP, _pdp(1, (1, 1), (1, 1), (0, 0, 0, 0)), surf),
           TaskOp(OP_PDP, _pdp(1, (1, 1), (1, 1), (0, 0, 0, 0)), surf,
                  fused_parent=(0, EVENT_OP_ENABLED))]
    ops[0].consumers = {OP_PDP: (1, 0)}
    be = FakeBackend()
    addrs = write_task(be, ops, [256, 256])
    with pytest.raises(FirmwareError, match=r"op 1 \(PDP\): fused_parent 0 is PDP, expected SDP"):
        Firmware(CFG, be).run(addrs)


def test_bdma_is_not_supported_and_named():
    bdma_surf = surface_types()[OP_BDMA]()
    be = FakeBackend()
    addrs = write_task(be, [TaskOp(OP_BDMA, BdmaOpDesc(num_transfers=0), bdma_surf)], [64])
    with pytest.raises(FirmwareError, match=r"op 0: engine type 0 \(BDMA\) is not supported"):
        Firmware(CFG, be).run(addrs)
