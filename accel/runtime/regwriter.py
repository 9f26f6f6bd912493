"""Register programming by symbolic name, with a log of every CSB write.

Firmware code writes ``w.write("NVDLA_SDP", "D_DP_BS_CFG", BS_BYPASS="NO",
BS_ALU_ALGO="SUM")``: fields by name, values as numbers or RDL enum names, so
no shift or mask is written by hand.  With ``keep_log`` every write is
appended to ``log`` as ``(symbol, address, value)``; ``trace`` prints it on
stderr (``--trace-regs``).
"""

from __future__ import annotations

import sys

from accel.regs import field_set, lookup
from accel.runtime.backend import Backend


class RegWriter:
    """Writes registers of a :class:`Backend` by symbol and keeps a log."""

    def __init__(self, backend: Backend, trace: bool = False, keep_log: bool = False) -> None:
        self.backend = backend
        self.trace = trace
        self.keep_log = keep_log
        self.log: list[tuple[str, int, int]] = []

    def write(self, unit: str, reg: str, value: int | None = None, **fields: int | str) -> int:
        """Write ``value`` (default 0) with ``fields`` set into it; return what was written."""
        r = lookup(f"{unit}.{reg}")
        v = 0 if value is None else value & 0xFFFFFFFF
        for name, fv in fields.items():
            if isinstance(fv, int) and fv < 0:
                raise ValueError(f"{r.symbol}.{name}={fv} is negative; fields are unsigned")
            v = field_set(v, r, name, fv)
        self.backend.write_reg(r.address, v)
        if self.keep_log:
            self.log.append((r.symbol, r.address, v))
        if self.trace:
            print(f"reg_write({r.symbol}, {v:#010x})", file=sys.stderr)
        return v

    def cube(self, unit: str, prefix: str, address: int | None, line_stride: int,
             surf_stride: int) -> None:
        """A cube's place in memory: ``D_<prefix>_BASE_ADDR_LOW/HIGH`` (unless ``address`` is
        None: a unit that reads the strides only), ``D_<prefix>_LINE_STRIDE`` and
        ``D_<prefix>_SURFACE_STRIDE``."""
        if address is not None:
            self.write(unit, f"D_{prefix}_BASE_ADDR_LOW", address & 0xFFFFFFFF)
            self.write(unit, f"D_{prefix}_BASE_ADDR_HIGH", address >> 32)
        self.write(unit, f"D_{prefix}_LINE_STRIDE", line_stride)
        self.write(unit, f"D_{prefix}_SURFACE_STRIDE", surf_stride)

    def read(self, unit: str, reg: str) -> int:
        return self.backend.read_reg(lookup(f"{unit}.{reg}").address)
