"""Backends: where the runtime's register writes and DRAM accesses land.

A backend is anything with the small :class:`Backend` protocol; ``BACKENDS``
names the available ones and :func:`get_backend` builds one by name.  The
default, ``cmod``, is the bit-accurate register-level model
(:class:`accel.cmod.Dla`): it executes an operation synchronously when its
enabling register write lands and raises the GLB interrupt status bits.
``rtl`` runs the convolutions on the RTL engine in simulation as well
(:mod:`accel.rtl.cosim`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from accel.config import HwConfig
from accel.regs import address
from accel.runtime.errors import InterruptTimeout

INTR_STATUS = address("NVDLA_GLB.S_INTR_STATUS")


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


class CmodBackend:
    """The register-level bit-accurate model, ``accel.cmod.Dla``.

    Operations run during the register write that enables them, so an
    interrupt is either already pending when waited for, or never comes.
    """

    name = "cmod"
    deterministic = True    # the same register writes raise the same interrupts

    def __init__(self, cfg: HwConfig, dla: Any = None) -> None:
        if dla is None:
            from accel.cmod import Dla  # the cmodel is optional until a cmod run is asked for
            dla = Dla(cfg)
        self.cfg = cfg
        self.dla = dla

    def memory_version(self, addr: int) -> int:
        """Changes whenever the DRAM region holding ``addr`` is written."""
        return self.dla.dram.version(addr)

    def prepare_replay(self, events: Iterable[tuple], siblings: Iterable[Any] = ()) -> Any:
        """The cmodel's form of a recording (:func:`accel.cmod.fast.replay.prepare`), sharing
        what it can with ``siblings``, the prepared recordings of the same task."""
        from accel.cmod.fast import replay
        return replay.prepare(self.dla, events, siblings)

    def replay(self, prepared: Any, on_complete: Any = None) -> bool:
        """Play a prepared recording (see :mod:`accel.cmod.fast.replay`); False if the model's
        state is not the one it was prepared for."""
        from accel.cmod.fast import replay
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


def _rtl_backend(cfg: HwConfig, **kwargs: Any) -> Backend:
    # imported on demand: the RTL stack (Amaranth, cocotb) loads only when asked for
    from accel.rtl.cosim import RtlBackend
    return RtlBackend(cfg, **kwargs)


#: backend name -> factory ``(cfg, **options)``; ``rtl`` runs convolutions on the RTL
#: engine in simulation (option ``simulator``: icarus or verilator) and the rest on the
#: cmodel (:mod:`accel.rtl.cosim`)
BACKENDS: dict[str, Any] = {"cmod": CmodBackend, "rtl": _rtl_backend}


def get_backend(name: str, cfg: HwConfig, **kwargs: Any) -> Backend:
    """Build the backend called ``name`` for configuration ``cfg``.

    Raises
    ------
    ValueError
        If ``name`` is not in :data:`BACKENDS`; the message lists the valid names.
    """
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r} not in {', '.join(BACKENDS)}")
    return BACKENDS[name](cfg, **kwargs)
