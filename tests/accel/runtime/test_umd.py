"""Runtime + firmware against a fake backend: addresses, event order, errors."""

from __future__ import annotations

import pytest

from accel.config import get_preset
from accel.loadable.io import read_loadable
from accel.loadable.model import (
    AddressListEntry,
    Loadable,
    MemoryFlags,
    MemoryListEntry,
    TensorDescListEntry,
)
from accel.runtime.umd import DRAM_BASE, MIN_ALIGN, Runtime
from tests.accel.runtime.fake_backend import FakeBackend
from tests.conftest import shared_path

CFG = get_preset("nv_small")


def _official(name):
    return read_loadable(shared_path("nvdla", "loadables", "flatbufs", "kmd",
                                     *name.split("/")).read_bytes())


def _with_input() -> Loadable:
    return Loadable(
        memory_list=[MemoryListEntry(0, 512, MemoryFlags.ALLOC | MemoryFlags.INPUT,
                                     bind_id=0, tensor_desc_id=0)],
        address_list=[AddressListEntry(0, 0, 0, 512)],
        tensor_desc_list=[TensorDescListEntry("data", 0, 0, 512, c=8, h=8, w=8)])


def test_bind_wrong_size_names_tensor_and_sizes():
    rt = Runtime(CFG, FakeBackend())
    rt.load(_with_input())
    with pytest.raises(ValueError, match=r"input 'data' needs 512 bytes, got 100"):
        rt.bind_input("data", b"\x00" * 100)
    with pytest.raises(KeyError, match=r"input 'nope' not in loadable \(inputs: 0:data\)"):
        rt.bind_input("nope", b"")
    rt.bind_input(0, bytes(range(256)) * 2)
    assert rt.backend.read_mem(DRAM_BASE, 4).tolist() == [0, 1, 2, 3]


def test_set_memories_filled_and_addresses_absolute():
    ld = _official("SDP/SDP_X1_L0_0_small_fbuf")
    be = FakeBackend()
    rt = Runtime(CFG, be)
    rt.load(ld)
    addrs = rt.task_addresses(0)
    # one page-aligned region per memory, in memory-list order
    assert addrs == [DRAM_BASE + MIN_ALIGN * i for i in range(len(ld.memory_list))]
    src = ld.blob("m4_SDPSrc_i4").data
    assert be.read_mem(addrs[4], len(src)).tobytes() == src


def test_fused_conv_sdp_enables_sdp_first():
    rt = Runtime(CFG, be := FakeBackend(), log_regs=True)
    rt.load(_official("CONV/CONV_D_L0_0_small_fbuf"))
    rt.submit()
    ev = rt.firmware.events
    assert ev.index("enable 1 SDP") < ev.index("enable 0 CONV")
    assert ev[-2:] == ["complete 0 CONV", "complete 1 SDP"] or set(ev[-2:]) == {
        "complete 0 CONV", "complete 1 SDP"}
    # the pipeline source (CDMA) is started after everything downstream of it
    assert be.enables.index("NVDLA_SDP") < be.enables.index("NVDLA_CACC")
    assert be.enables[-1] == "NVDLA_CDMA"
    log = {sym: v for sym, _, v in rt.firmware.regs.log}
    addrs = rt.task_addresses(0)
    assert log["NVDLA_CDMA.D_DAIN_ADDR_LOW_0_0"] == addrs[5]   # m5_CONVSrc
    assert log["NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0"] == addrs[4]   # m4_CONVWgt
    assert log["NVDLA_SDP.D_DST_BASE_ADDR_LOW_0"] == addrs[6]  # output memory
    assert log["NVDLA_CDMA.D_WEIGHT_BYTES_0"] == 36864


def test_official_pdp_and_cdp_program_their_engines():
    for name, unit in (("PDP/PDP_L0_0_small_fbuf", "NVDLA_PDP"),
                       ("CDP/CDP_L0_0_small_fbuf", "NVDLA_CDP")):
        rt = Runtime(CFG, be := FakeBackend(), log_regs=True)
        rt.load(_official(name))
        rt.submit()
        assert be.enables == [f"{unit}_RDMA", unit]
        assert rt.firmware.events == [f"program 0 {unit[6:]} group 0", f"enable 0 {unit[6:]}",
                                      f"complete 0 {unit[6:]}"]


def test_submit_before_load():
    with pytest.raises(RuntimeError, match="call load"):
        Runtime(CFG, FakeBackend()).submit()
