"""Register-level, bit-accurate model of NVDLA (one module per hardware unit)."""

from __future__ import annotations

from accel.cmod.dla import Dla
from accel.cmod.dram import Dram, DramAccessError
from accel.cmod.errors import ConfigError, UnsupportedError

__all__ = ["Dla", "Dram", "DramAccessError", "ConfigError", "UnsupportedError"]
