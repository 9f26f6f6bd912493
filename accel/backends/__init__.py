"""Backends: the NVDLA implementations the runtime's register writes and DRAM accesses
land on, and the registry that builds one by name.

Each backend has the :class:`~accel.runtime.backend.Backend` protocol.  The
default, ``cmod`` (:mod:`.cmod`), is the bit-accurate register-level model;
``rtl`` (:mod:`.rtl`) runs the convolutions on the RTL engine in simulation as
well.  This floor sits above the runtime, the cmodel, the RTL and the trace
players, and none of them imports it (see ``docs/architecture.md``).
"""

from __future__ import annotations

from typing import Any

from accel.backends.cmod import CmodBackend
from accel.config import HwConfig
from accel.runtime.backend import Backend


def _rtl_backend(cfg: HwConfig, **kwargs: Any) -> Backend:
    # imported on demand: the RTL stack (Amaranth, cocotb) loads only when asked for
    from accel.backends.rtl import RtlBackend
    return RtlBackend(cfg, **kwargs)


#: backend name -> factory ``(cfg, **options)``; ``rtl`` runs convolutions on the RTL
#: engine in simulation (option ``simulator``: icarus or verilator) and the rest on the
#: cmodel (:mod:`accel.backends.rtl`)
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
