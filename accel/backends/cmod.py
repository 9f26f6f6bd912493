"""The ``cmod`` backend: the runtime's register writes and DRAM accesses land on the
bit-accurate register-level model (:class:`accel.cmod.Dla`).

The model executes an operation synchronously when its enabling register
write lands and raises the GLB interrupt status bits; it also replays the
runtime's recordings (:mod:`accel.cmod.fast.replay`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from accel.cmod import Dla
from accel.cmod.fast import replay
from accel.config import HwConfig
from accel.regs import address
from accel.runtime.errors import InterruptTimeout

INTR_STATUS = address("NVDLA_GLB.S_INTR_STATUS")


class CmodBackend:
    """The register-level bit-accurate model, ``accel.cmod.Dla``.

    Operations run during the register write that enables them, so an
    interrupt is either already pending when waited for, or never comes.
    """

    name = "cmod"
    deterministic = True    # the same register writes raise the same interrupts

    def __init__(self, cfg: HwConfig, dla: Any = None) -> None:
        if dla is None:
            dla = Dla(cfg)
        self.cfg = cfg
        self.dla = dla

    def memory_version(self, addr: int) -> int:
        """Changes whenever the DRAM region holding ``addr`` is written."""
        return self.dla.dram.version(addr)

    def prepare_replay(self, events: Iterable[tuple], siblings: Iterable[Any] = ()) -> Any:
        """The cmodel's form of a recording (:func:`accel.cmod.replay.prepare`), sharing
        what it can with ``siblings``, the prepared recordings of the same task."""
        return replay.prepare(self.dla, events, siblings)

    def replay(self, prepared: Any, on_complete: Any = None) -> bool:
        """Play a prepared recording (see :mod:`accel.cmod.fast.replay`); False if the model's
        state is not the one it was prepared for."""
        return replay.run(self.dla, prepared, on_complete)

    def write_reg(self, addr: int, value: int) -> None:
        self.dla.csb_write(addr, value & 0xFFFFFFFF)

    def read_reg(self, addr: int) -> int:
        return int(self.dla.csb_read(addr))

    def map_memory(self, base: int, size: int, name: str) -> None:
        self.dla.dram.map(base, size, name)

    def write_mem(self, addr: int, data: bytes | np.ndarray) -> None:
        self.dla.dram.write(addr, np.frombuffer(bytes(data), dtype=np.uint8)
                            if not isinstance(data, np.ndarray) else data.view(np.uint8),
                            "host")

    def read_mem(self, addr: int, size: int) -> np.ndarray:
        return np.asarray(self.dla.dram.read(addr, size, "host"), dtype=np.uint8)

    def wait_interrupt(self, mask: int) -> int:
        status = self.read_reg(INTR_STATUS) & mask
        if not status:
            raise InterruptTimeout(
                f"no interrupt in mask {mask:#x} is pending (S_INTR_STATUS="
                f"{self.read_reg(INTR_STATUS):#x}); the cmodel runs ops synchronously, so the "
                f"awaited operation was never enabled or did not complete")
        return status

    @property
    def stats(self) -> list[Any]:
        return list(self.dla.stats)

    def reset_stats(self) -> None:
        self.dla.stats.clear()
