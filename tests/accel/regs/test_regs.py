"""Register map: lookup by trace spelling, addresses from the RDL, field helpers."""

from __future__ import annotations

import pytest

from accel.regs import (
    UNITS,
    UnknownRegisterError,
    address,
    by_address,
    field_get,
    field_set,
    lookup,
)


def test_unit_bases_match_the_rdl_addrmaps():
    # addrmap blocks of the RDL files: GLB @0x1000, CDMA @0x3000, SDP @0x9000, CDP @0xd000
    assert UNITS["NVDLA_GLB"].base == 0x1000
    assert UNITS["NVDLA_CDMA"].base == 0x3000
    assert UNITS["NVDLA_SDP"].base == 0x9000
    assert UNITS["NVDLA_CDP"].base == 0xD000


def test_lookup_accepts_trace_spelling_with_and_without_suffix():
    reg = lookup("NVDLA_SDP.D_CVT_SHIFT_0")
    assert reg is lookup("NVDLA_SDP.D_CVT_SHIFT")
    assert reg.address == 0x9000 + 0xC8  # "}D_CVT_SHIFT @0xc8;"
    assert reg.symbol == "NVDLA_SDP.D_CVT_SHIFT_0"
    # a register whose own name ends in _0 (CDMA D_DAIN_ADDR_LOW_0) gets a second suffix
    assert address("NVDLA_CDMA.D_DAIN_ADDR_LOW_0_0") == 0x3000 + 0x34
    assert by_address(0x3034).name == "D_DAIN_ADDR_LOW_0"


def test_unaddressed_cfgrom_registers_follow_each_other():
    # NVDLA_CFGROM.rdl gives no @offset: SystemRDL packs them 4 bytes apart
    regs = list(UNITS["NVDLA_CFGROM"].registers.values())
    assert [r.offset for r in regs[:3]] == [0, 4, 8]
    assert regs[0].name == "CFGROM_HW_VERSION" and regs[0].reset == 0x00010001


def test_fields_reset_and_enums():
    bs = lookup("NVDLA_SDP.D_DP_BS_CFG_0")
    assert [(f.name, f.lsb, f.msb) for f in bs.fields][:3] == [
        ("BS_BYPASS", 0, 0), ("BS_ALU_BYPASS", 1, 1), ("BS_ALU_ALGO", 2, 3)]
    assert bs.field("BS_ALU_ALGO").enums["SUM"] == 2
    assert bs.reset == 0b1110011  # every bypass bit and PRELU reset to YES
    flying = lookup("NVDLA_SDP.D_FEATURE_MODE_CFG").field("FLYING_MODE")
    assert dict(flying.enums) == {"OFF": 0, "ON": 1}


def test_field_get_set_roundtrip():
    reg = lookup("NVDLA_SDP.D_DP_BS_ALU_CFG")
    assert field_get(0x1101, reg, "BS_ALU_SHIFT_VALUE") == 0x11
    assert field_get(0x1101, reg, "BS_ALU_SRC") == 1
    v = field_set(0, reg, "BS_ALU_SHIFT_VALUE", 63)
    assert v == 63 << 8
    assert field_set(v, "NVDLA_SDP.D_DP_BS_ALU_CFG", "BS_ALU_SRC", "MEM") == v | 1
    with pytest.raises(ValueError, match="does not fit field BS_ALU_SHIFT_VALUE"):
        field_set(0, reg, "BS_ALU_SHIFT_VALUE", 64)
    with pytest.raises(ValueError, match="no enum 'DRAM'.*REG, MEM"):
        field_set(0, reg, "BS_ALU_SRC", "DRAM")


def test_unknown_register_names_symbol_and_suggests():
    with pytest.raises(UnknownRegisterError, match=r"'NVDLA_SDP.D_CVT_SHIFTT_0'.*D_CVT_SHIFT_0"):
        lookup("NVDLA_SDP.D_CVT_SHIFTT_0")
    with pytest.raises(KeyError):  # usable wherever a KeyError is expected
        lookup("NVDLA_NOPE.D_OP_ENABLE_0")
    with pytest.raises(UnknownRegisterError, match="no field 'CVT_SHIFTS'.*CVT_SHIFT"):
        lookup("NVDLA_SDP.D_CVT_SHIFT").field("CVT_SHIFTS")
