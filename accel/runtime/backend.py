"""What the runtime needs from an NVDLA implementation: the :class:`Backend` protocol.

The runtime and firmware program any object with this small protocol; they
never name an implementation.  The implementations (the cmodel, the RTL in
simulation) and the registry that builds one by name live a floor above, in
:mod:`accel.backends`, so that the runtime imports neither model.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Backend(Protocol):
    """What the runtime and firmware need from an NVDLA implementation."""

    name: str

    def write_reg(self, addr: int, value: int) -> None:
        """CSB write of the 32-bit ``value`` at byte address ``addr``."""

    def read_reg(self, addr: int) -> int:
        """CSB read at byte address ``addr``."""

    def map_memory(self, base: int, size: int, name: str) -> None:
        """Make ``size`` bytes of DRAM at ``base`` exist (zero-filled)."""

    def write_mem(self, addr: int, data: bytes | np.ndarray) -> None:
        """Host write into DRAM."""

    def read_mem(self, addr: int, size: int) -> np.ndarray:
        """Host read of ``size`` DRAM bytes as a uint8 array."""

    def wait_interrupt(self, mask: int) -> int:
        """Block until a GLB ``S_INTR_STATUS`` bit in ``mask`` is set; return the set bits."""

    @property
    def stats(self) -> list[Any]:
        """:class:`~accel.cmod.records.OpRecord` of each operation (unit, cycles, shape,
        details) in execution order, since the last :meth:`reset_stats` (the runtime
        resets them at each submit)."""

    def reset_stats(self) -> None:
        """Forget the operation records (nothing accumulates across inferences)."""
