"""The NVDLA register map: units, registers, fields, and symbolic lookup.

The table itself is :mod:`accel.regs.nvdla_regs`, generated from NVDLA's RDL
spec by ``scripts/gen_regs.py``; this module wraps it in small frozen types.

Symbols use the spelling of NVDLA's traces and C headers, ``UNIT.REGISTER``
with a trailing ``_0`` (the header suffix of register instance 0), e.g.
``NVDLA_SDP.D_CVT_SHIFT_0``.  The suffix is optional here.

>>> reg = lookup("NVDLA_SDP.D_CVT_SHIFT_0")
>>> hex(reg.address), reg.fields[0].name, reg.fields[0].msb
('0x90c8', 'CVT_SHIFT', 5)
>>> field_get(0x1101, lookup("NVDLA_SDP.D_DP_BS_ALU_CFG"), "BS_ALU_SHIFT_VALUE")
17
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from types import MappingProxyType

from accel.errors import AccelInputError
from accel.regs.nvdla_regs import UNIT_TABLE

__all__ = ["Field", "Register", "Unit", "UNITS", "UnknownRegisterError", "lookup",
           "address", "by_address", "field_get", "field_set", "reset_value"]


class UnknownRegisterError(AccelInputError, KeyError):
    """A register or field symbol that is not in the map (message suggests close names)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Field:
    """A bit field ``[msb:lsb]`` of a register."""

    name: str
    lsb: int
    msb: int
    reset: int
    access: str  # software access from the RDL: "rw", "r", "w"
    enums: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def width(self) -> int:
        return self.msb - self.lsb + 1

    @property
    def mask(self) -> int:
        """Mask of the field in register position."""
        return ((1 << self.width) - 1) << self.lsb


@dataclass(frozen=True)
class Register:
    """One 32-bit register of a unit; ``address`` is the CSB byte address."""

    unit: str
    name: str
    offset: int
    address: int
    fields: tuple[Field, ...]

    @property
    def symbol(self) -> str:
        return f"{self.unit}.{self.name}_0"

    @property
    def reset(self) -> int:
        """Reset value of the whole register (fields combined)."""
        value = 0
        for f in self.fields:
            value |= (f.reset << f.lsb) & f.mask
        return value

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        names = [f.name for f in self.fields]
        near = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; fields: {', '.join(names)}"
        raise UnknownRegisterError(f"register {self.symbol} has no field {name!r}{hint}")


@dataclass(frozen=True)
class Unit:
    """A hardware unit (``NVDLA_SDP``) at CSB byte address ``base``."""

    name: str
    base: int
    registers: MappingProxyType  # name -> Register, in offset order


def _build() -> dict[str, Unit]:
    units = {}
    for uname, (base, regs) in UNIT_TABLE.items():
        table = {}
        for rname, offset, fields in regs:
            flds = tuple(Field(n, lsb, msb, reset, acc, MappingProxyType(dict(en)))
                         for n, lsb, msb, reset, acc, en in fields)
            table[rname] = Register(uname, rname, offset, base + offset, flds)
        units[uname] = Unit(uname, base, MappingProxyType(table))
    return units


UNITS: MappingProxyType = MappingProxyType(_build())
_BY_ADDRESS = {r.address: r for u in UNITS.values() for r in u.registers.values()}


def _all_symbols() -> list[str]:
    return [r.symbol for u in UNITS.values() for r in u.registers.values()]


def lookup(symbol: str) -> Register:
    """The register named ``UNIT.NAME`` (trailing ``_0`` optional).

    Raises
    ------
    UnknownRegisterError
        Naming ``symbol`` and suggesting close matches.
    """
    unit_name, dot, reg_name = symbol.strip().partition(".")
    unit = UNITS.get(unit_name) if dot else None
    if unit is not None:
        reg = unit.registers.get(reg_name)
        if reg is None and reg_name.endswith("_0"):
            reg = unit.registers.get(reg_name[:-2])
        if reg is not None:
            return reg
    near = difflib.get_close_matches(symbol, _all_symbols(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    if unit is None and dot:
        hint += f" (units: {', '.join(UNITS)})" if not near else ""
    raise UnknownRegisterError(f"unknown register {symbol!r}{hint}")


def address(symbol: str) -> int:
    """CSB byte address of the register ``symbol``."""
    return lookup(symbol).address


def by_address(addr: int) -> Register | None:
    """The register at CSB byte address ``addr``, or ``None``."""
    return _BY_ADDRESS.get(addr)


def _resolve_field(reg: Register | str, fld: Field | str) -> Field:
    if isinstance(reg, str):
        reg = lookup(reg)
    return fld if isinstance(fld, Field) else reg.field(fld)


def field_get(value: int, reg: Register | str, fld: Field | str) -> int:
    """Extract field ``fld`` of register ``reg`` from the register ``value``."""
    f = _resolve_field(reg, fld)
    return (value >> f.lsb) & ((1 << f.width) - 1)


def field_set(value: int, reg: Register | str, fld: Field | str, field_value: int | str) -> int:
    """Return ``value`` with field ``fld`` replaced by ``field_value`` (int or enum name)."""
    f = _resolve_field(reg, fld)
    if isinstance(field_value, str):
        if field_value not in f.enums:
            raise ValueError(f"field {f.name} has no enum {field_value!r}; "
                             f"allowed: {', '.join(f.enums) or 'none (numeric field)'}")
        field_value = f.enums[field_value]
    if not 0 <= field_value < (1 << f.width):
        raise ValueError(f"value {field_value!r} does not fit field {f.name}[{f.msb}:{f.lsb}]")
    return (value & ~f.mask) | (field_value << f.lsb)


def reset_value(symbol: str) -> int:
    """Reset value of register ``symbol``."""
    return lookup(symbol).reset
