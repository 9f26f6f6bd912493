"""Firmware: load a ``dla_lut_param`` into a unit's LUT (sw kmd/firmware common.c ``update_lut``).

The LUT lives behind the unit's ``S_LUT_*`` registers (CDP; SDP has the same
layout without the ``_HIGH`` halves of start/end).  Loading is:

1. ``S_LUT_ACCESS_CFG`` = table LE, access WRITE, address 0, then the 65
   LE ("raw") entries through ``S_LUT_ACCESS_DATA`` (the port's address
   advances after each write);
2. the same for the 257 LO ("density") entries;
3. ``S_LUT_CFG`` (LE function, priorities), ``S_LUT_INFO`` (an exponential
   LE table takes the *index offset* from ``linear_exp_offset``, a linear one
   the *index select*; LO always takes its index select), start and end of
   both tables (low 32 bits, then the high bits where the unit has them),
   and the int slopes (scale, shift) of both tables.

The LUT parameters of a task are an array of ``dla_lut_param`` at the
address-list entry ``lut_data_index``; an op's ``lut_index`` picks one.
"""

from __future__ import annotations

from accel.loadable.descriptors import PRECISION_FP16
from accel.loadable.descriptors_aux import LutParam
from accel.regs import UNITS
from accel.runtime.fw_conv import FirmwareError
from accel.runtime.regwriter import RegWriter

_FUNCTION = ("EXPONENT", "LINEAR")  # dla_lut_param.method
_PRIORITY = ("LE", "LO")


def read_lut(read_mem, addresses: list[int], lut_data_index: int, num_luts: int,
             lut_index: int, what: str) -> LutParam:
    """The ``lut_index``-th ``dla_lut_param`` of a task.

    ``read_mem(addr, size)`` reads DRAM (the backend's ``read_mem``).
    """
    if not 0 <= lut_index < num_luts:
        raise FirmwareError(f"{what}: lut_index {lut_index} outside the task's {num_luts} "
                            f"LUTs")
    if not 0 <= lut_data_index < len(addresses):
        raise FirmwareError(f"{what}: lut_data_index {lut_data_index} outside the task's "
                            f"{len(addresses)} addresses")
    base = addresses[lut_data_index] + lut_index * LutParam.SIZE
    return LutParam.unpack(read_mem(base, LutParam.SIZE).tobytes())


def _check(lut: LutParam, precision: int, what: str) -> None:
    if precision == PRECISION_FP16:
        raise FirmwareError(f"{what}: FP16 LUT slopes are not supported (INT8, INT16 only)")
    for name in ("method", "hybrid_priority", "underflow_priority", "overflow_priority"):
        v = getattr(lut, name)
        if v not in (0, 1):
            raise FirmwareError(f"{what}: lut {name} {v} not in 0, 1")


def _pair(w: RegWriter, unit: str, reg: str, value: int) -> None:
    """A 64-bit start/end: ``<reg>_LOW`` and ``<reg>_HIGH`` (6 bits) or a single register."""
    value &= (1 << 64) - 1
    if f"{reg}_LOW" in UNITS[unit].registers:
        w.write(unit, f"{reg}_LOW", value & 0xFFFFFFFF)
        high = f"{reg}_HIGH"
        w.write(unit, high, value >> 32 & UNITS[unit].registers[high].fields[0].mask)
    else:
        w.write(unit, reg, value & 0xFFFFFFFF)


def load(w: RegWriter, unit: str, lut: LutParam, precision: int, what: str) -> None:
    """Write both tables and the LUT configuration of ``unit`` (e.g. ``"NVDLA_CDP"``)."""
    _check(lut, precision, what)
    for table, entries in (("LE", lut.linear_exp_table), ("LO", lut.linear_only_table)):
        w.write(unit, "S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=table,
                LUT_ACCESS_TYPE="WRITE")
        for v in entries:
            w.write(unit, "S_LUT_ACCESS_DATA", LUT_DATA=v & 0xFFFF)
    w.write(unit, "S_LUT_CFG", LUT_LE_FUNCTION=_FUNCTION[lut.method],
            LUT_HYBRID_PRIORITY=_PRIORITY[lut.hybrid_priority],
            LUT_UFLOW_PRIORITY=_PRIORITY[lut.underflow_priority],
            LUT_OFLOW_PRIORITY=_PRIORITY[lut.overflow_priority])
    le = lut.linear_exp_offset & 0xFF
    lo = lut.linear_only_offset & 0xFF
    if _FUNCTION[lut.method] == "EXPONENT":
        w.write(unit, "S_LUT_INFO", LUT_LE_INDEX_OFFSET=le, LUT_LO_INDEX_SELECT=lo)
    else:
        w.write(unit, "S_LUT_INFO", LUT_LE_INDEX_SELECT=le, LUT_LO_INDEX_SELECT=lo)
    _pair(w, unit, "S_LUT_LE_START", lut.linear_exp_start)
    _pair(w, unit, "S_LUT_LE_END", lut.linear_exp_end)
    _pair(w, unit, "S_LUT_LO_START", lut.linear_only_start)
    _pair(w, unit, "S_LUT_LO_END", lut.linear_only_end)
    for tab, under, over in (("LE", lut.linear_exp_underflow_slope,
                              lut.linear_exp_overflow_slope),
                             ("LO", lut.linear_only_underflow_slope,
                              lut.linear_only_overflow_slope)):
        w.write(unit, f"S_LUT_{tab}_SLOPE_SCALE",
                **{f"LUT_{tab}_SLOPE_UFLOW_SCALE": under.scale & 0xFFFF,
                   f"LUT_{tab}_SLOPE_OFLOW_SCALE": over.scale & 0xFFFF})
        w.write(unit, f"S_LUT_{tab}_SLOPE_SHIFT",
                **{f"LUT_{tab}_SLOPE_UFLOW_SHIFT": under.shifter & 0x1F,
                   f"LUT_{tab}_SLOPE_OFLOW_SHIFT": over.shifter & 0x1F})
