"""fw_pdp register programming against a fake backend, with hand-computed field values."""

from __future__ import annotations

import pytest

from accel.loadable.descriptors_aux import PdpOpDesc
from accel.loadable.surfaces import PdpSurfaceDesc
from accel.runtime import fw_pdp
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter
from tests.accel.runtime.fake_backend import FakeBackend
from tests.accel.runtime.task_builder import cube

SRC_ADDR, DST_ADDR = 0x8000_1000, 0x1_2345_6000  # the destination above 4 GiB


def _op(**kw) -> PdpOpDesc:
    base = dict(split_num=1, pool_mode=0, pool_width=2, pool_height=1, stride_x=2,
                stride_y=1, pad_left=1, pad_right=1, pad_top=0, pad_bottom=1, precision=0,
                padding_value=[-3, -6, -9, 0, 0, 0, 0])
    base.update(kw)
    return PdpOpDesc(**base)


def _surf(fly: bool = False) -> PdpSurfaceDesc:
    # input 16 channels x 5 rows x 9 columns, output 16 x 5 x 5
    src = cube(0, 16, 5, 9, mem_type=2 if fly else 0)
    return PdpSurfaceDesc(src_data=src, dst_data=cube(1, 16, 5, 5))


def _program(op: PdpOpDesc, surf: PdpSurfaceDesc) -> dict[str, int]:
    w = RegWriter(FakeBackend(), keep_log=True)
    addr = {"src_data": SRC_ADDR, "dst_data": DST_ADDR}
    fw_pdp.program(w, 7, op, surf, lambda c, what: addr[what])
    return {sym: v for sym, _, v in w.log}


def test_recip_is_floor_65536_over_k():
    # NVIDIA's firmware table (NVDLA_FACTS, PDP) for kernel sizes 1..8
    assert [fw_pdp.recip(k) for k in range(1, 9)] == [
        0x10000, 0x8000, 0x5555, 0x4000, 0x3333, 0x2AAA, 0x2492, 0x2000]


def test_average_pool_registers_hand_computed():
    r = _program(_op(), _surf())
    # 3 wide (pool_width 2), 2 high (pool_height 1), stride 2 x 1:
    # W[3:0] H[11:8] SW[19:16] SH[23:20]
    assert r["NVDLA_PDP.D_POOLING_KERNEL_CFG_0"] == 2 | 1 << 8 | 1 << 16 | 0 << 20
    assert r["NVDLA_PDP.D_RECIP_KERNEL_WIDTH_0"] == 21845    # floor(65536 / 3)
    assert r["NVDLA_PDP.D_RECIP_KERNEL_HEIGHT_0"] == 32768   # floor(65536 / 2)
    # left 1 [2:0], top 0 [6:4], right 1 [10:8], bottom 1 [14:12]
    assert r["NVDLA_PDP.D_POOLING_PADDING_CFG_0"] == 0x1101
    # 19-bit two's complement of -3, -6, -9; zeros stay zero
    assert r["NVDLA_PDP.D_POOLING_PADDING_VALUE_1_CFG_0"] == (1 << 19) - 3
    assert r["NVDLA_PDP.D_POOLING_PADDING_VALUE_2_CFG_0"] == (1 << 19) - 6
    assert r["NVDLA_PDP.D_POOLING_PADDING_VALUE_3_CFG_0"] == (1 << 19) - 9
    assert r["NVDLA_PDP.D_POOLING_PADDING_VALUE_7_CFG_0"] == 0
    # AVERAGE = 0, OFF_FLYING = 1 at bit 4, SPLIT_NUM 0
    assert r["NVDLA_PDP.D_OPERATION_MODE_CFG_0"] == 0x10
    assert (r["NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0"], r["NVDLA_PDP.D_DATA_CUBE_IN_HEIGHT_0"],
            r["NVDLA_PDP.D_DATA_CUBE_IN_CHANNEL_0"]) == (8, 4, 15)
    assert (r["NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0"], r["NVDLA_PDP.D_DATA_CUBE_OUT_HEIGHT_0"],
            r["NVDLA_PDP.D_DATA_CUBE_OUT_CHANNEL_0"]) == (4, 4, 15)
    # packed 8-byte atoms: line = 9 * 8, surface = 72 * 5; output 5 * 8 and 40 * 5
    assert r["NVDLA_PDP.D_SRC_LINE_STRIDE_0"] == 72 == r["NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0"]
    assert r["NVDLA_PDP.D_SRC_SURFACE_STRIDE_0"] == 360
    assert (r["NVDLA_PDP.D_DST_LINE_STRIDE_0"], r["NVDLA_PDP.D_DST_SURFACE_STRIDE_0"]) == (40, 200)
    assert r["NVDLA_PDP.D_DST_BASE_ADDR_LOW_0"] == 0x2345_6000
    assert r["NVDLA_PDP.D_DST_BASE_ADDR_HIGH_0"] == 1
    # the RAM-type enums of PDP are CV = 0, MC = 1: MC memory programs 1
    assert r["NVDLA_PDP.D_DST_RAM_CFG_0"] == 1 == r["NVDLA_PDP_RDMA.D_SRC_RAM_CFG_0"]
    assert r["NVDLA_PDP.D_DATA_FORMAT_0"] == 0 == r["NVDLA_PDP_RDMA.D_DATA_FORMAT_0"]
    # RDMA: width 3 [3:0], stride 2 - 1 at [7:4]; left pad only
    assert r["NVDLA_PDP_RDMA.D_POOLING_KERNEL_CFG_0"] == 0x12
    assert r["NVDLA_PDP_RDMA.D_POOLING_PADDING_CFG_0"] == 1
    assert r["NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0"] == SRC_ADDR
    assert r["NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_HIGH_0"] == 0
    assert (r["NVDLA_PDP_RDMA.D_DATA_CUBE_IN_WIDTH_0"],
            r["NVDLA_PDP_RDMA.D_DATA_CUBE_IN_CHANNEL_0"]) == (8, 15)


def test_max_pool_with_split_width_fields():
    op = _op(pool_mode=1, split_num=3, partial_in_width_first=4, partial_in_width_mid=3,
             partial_in_width_last=2, partial_width_first=2, partial_width_mid=2,
             partial_width_last=1)
    r = _program(op, _surf())
    # MAX = 1, OFF_FLYING bit 4, SPLIT_NUM = 2 at [15:8]
    assert r["NVDLA_PDP.D_OPERATION_MODE_CFG_0"] == 1 | 1 << 4 | 2 << 8
    assert r["NVDLA_PDP_RDMA.D_OPERATION_MODE_CFG_0"] == 2
    # FIRST [9:0], LAST [19:10], MID [29:20], each width - 1
    assert r["NVDLA_PDP.D_PARTIAL_WIDTH_IN_0"] == 3 | 1 << 10 | 2 << 20
    assert r["NVDLA_PDP_RDMA.D_PARTIAL_WIDTH_IN_0"] == 3 | 1 << 10 | 2 << 20
    assert r["NVDLA_PDP.D_PARTIAL_WIDTH_OUT_0"] == 1 | 0 << 10 | 1 << 20


def test_zero_partial_widths_stay_zero():
    op = _op(partial_in_width_first=0, partial_width_first=0, partial_width_mid=0,
             partial_width_last=0)
    r = _program(op, _surf())
    assert r["NVDLA_PDP.D_PARTIAL_WIDTH_OUT_0"] == 0


def test_on_the_fly_source_programs_no_rdma():
    r = _program(_op(pool_mode=2), _surf(fly=True))
    assert not [s for s in r if s.startswith("NVDLA_PDP_RDMA.")]
    assert "NVDLA_PDP.D_SRC_LINE_STRIDE_0" not in r
    assert r["NVDLA_PDP.D_OPERATION_MODE_CFG_0"] == 2  # MIN, ON_FLYING = 0
    assert not fw_pdp.rdma_needed(_surf(fly=True)) and fw_pdp.rdma_needed(_surf())


def test_enable_order_and_producer():
    be = FakeBackend()
    w = RegWriter(be, keep_log=True)
    fw_pdp.set_producer(w, 1, 0)
    fw_pdp.enable(w, _surf())
    assert [s for s, _, _ in w.log] == ["NVDLA_PDP.S_POINTER_0", "NVDLA_PDP_RDMA.S_POINTER_0",
                                        "NVDLA_PDP_RDMA.D_OP_ENABLE_0", "NVDLA_PDP.D_OP_ENABLE_0"]
    assert [v for _, _, v in w.log[:2]] == [1, 0]
    w.log.clear()
    fw_pdp.enable(w, _surf(fly=True))
    assert [s for s, _, _ in w.log] == ["NVDLA_PDP.D_OP_ENABLE_0"]


@pytest.mark.parametrize("change, message", [
    (dict(stride_x=0), r"pdp op 7: stride_x 0 outside 1\.\.16"),
    (dict(stride_y=17), r"pdp op 7: stride_y 17 outside 1\.\.16"),
    (dict(pool_mode=3), r"pool_mode 3 not in AVG=0, MAX=1, MIN=2"),
    (dict(pool_width=8), r"pool_width 8 \(size - 1\) outside 0\.\.7"),
    (dict(split_num=0), r"split_num 0 outside 1\.\.256"),
    (dict(precision=2), r"FP16 pooling is not supported"),
    (dict(padding_value=[1 << 18, 0, 0, 0, 0, 0, 0]), r"padding_value\[0\] 262144 outside"),
])
def test_bad_descriptors_are_refused(change, message):
    with pytest.raises(FirmwareError, match=message):
        _program(_op(**change), _surf())


def test_split_width_needs_memory_source_and_memory_destination():
    with pytest.raises(FirmwareError, match=r"split_num 2 with an on-the-fly \(SDP\) source"):
        _program(_op(split_num=2), _surf(fly=True))
    surf = _surf()
    surf.dst_data = cube(1, 16, 5, 5, mem_type=2)
    with pytest.raises(FirmwareError, match=r"dst_data type 2 \(MEM_HW\)"):
        _program(_op(), surf)
