"""GLB: the interrupt status / mask / set registers.

Completion of an operation in register group ``g`` raises ``<UNIT>_DONE_STATUS<g>``
unless ``S_INTR_MASK`` masks it; software clears status bits by writing 1s.
"""

from __future__ import annotations

import functools

from accel.cmod.csb import UnitRegs
from accel.regs import UNITS

_STATUS = UNITS["NVDLA_GLB"].registers["S_INTR_STATUS"]
_MASK = UNITS["NVDLA_GLB"].registers["S_INTR_MASK"]
_SET = UNITS["NVDLA_GLB"].registers["S_INTR_SET"]

# interrupt source names used by NVDLA traces (``intr_notify(SDP_0, ..)``) -> field prefix
SOURCES = {"SDP": "SDP_DONE", "CDP": "CDP_DONE", "PDP": "PDP_DONE", "BDMA": "BDMA_DONE",
           "RUBIK": "RUBIK_DONE", "CDMA_DAT": "CDMA_DAT_DONE", "CDMA_WT": "CDMA_WT_DONE",
           "CACC": "CACC_DONE"}


@functools.cache
def status_bit(source: str, group: int) -> int:
    """Bit mask of ``<source>_DONE_STATUS<group>`` (source as in :data:`SOURCES`)."""
    try:
        prefix = SOURCES[source.upper()]
    except KeyError:
        raise KeyError(f"interrupt source {source!r} not in {', '.join(SOURCES)}") from None
    return _STATUS.field(f"{prefix}_STATUS{group}").mask


class Glb:
    """Interrupt logic on top of the GLB registers."""

    def __init__(self, regs: UnitRegs) -> None:
        self.regs = regs
        self._single = regs.store_of(_STATUS, 0)   # GLB's registers are all single

    @property
    def status(self) -> int:
        return self._single[_STATUS.offset]

    def raise_done(self, source: str, group: int) -> None:
        self.raise_bits(status_bit(source, group))

    def raise_bits(self, bits: int) -> None:
        """Raise the done interrupts of ``bits`` (an OR of :func:`status_bit`) that
        ``S_INTR_MASK`` does not mask."""
        single = self._single
        single[_STATUS.offset] |= bits & ~single[_MASK.offset]

    def clear(self, bits: int) -> None:
        """A CSB write of ``bits`` to ``S_INTR_STATUS``: write 1 to clear."""
        self._single[_STATUS.offset] &= ~bits

    def csb_write(self, name: str, value: int) -> bool:
        """Handle writes with side effects; return False to let the caller store it."""
        if name == "S_INTR_STATUS":
            self.clear(value)
            return True
        if name == "S_INTR_SET":
            self.regs.set_hw("S_INTR_STATUS", self.status | (value & _STATUS_MASK))
            return True
        return False


_STATUS_MASK = sum(f.mask for f in _STATUS.fields)
