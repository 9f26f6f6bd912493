"""Register values for the RTL units' tests: fields set by name, and a top that decodes a
unit's configuration from constant registers through the engine's own decode."""

from __future__ import annotations

from amaranth.hdl import Const, Elaboratable, Module

from accel.regs import field_set, lookup


def reg(symbol: str, **fields) -> tuple[str, int]:
    """``(symbol, value)``: the register's reset value with ``fields`` set (each value
    masked to its field's width)."""
    r = lookup(symbol)
    value = r.reset
    for name, v in fields.items():
        value = field_set(value, r, name, v & r.field(name).mask >> r.field(name).lsb)
    return r.symbol, value


class RegisterTop(Elaboratable):
    """``dut`` with its ``cfg`` assigned by ``decode(field)`` (a register decode such as
    :func:`accel.rtl.cdp.config_from_registers`'s) from the constant values ``regs``
    (symbol -> value; the reset value for the others)."""

    def __init__(self, dut, regs: dict[str, int], decode) -> None:
        self.dut, self.regs, self.decode = dut, regs, decode

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dut = self.dut

        def field(unit: str, reg_name: str, name: str | None = None):
            r = lookup(f"{unit}.{reg_name}")
            value = Const(self.regs.get(r.symbol, r.reset), 32)
            if name is None:
                return value
            f = r.field(name)
            return value[f.lsb:f.msb + 1]

        m.d.comb += self.decode(field)(self.dut.cfg)
        return m
