"""The one question the compiler asks a calibration table: the scale of a tensor.

Any object with ``scale(name) -> float`` answers it (the host's
:class:`tengine_host.quant.table.QuantTable` does); :func:`as_scales` also
accepts a plain mapping of NVIDIA's calibration JSON shape (``{name: {"scale":
s}}``, ``{name: {"min": lo, "max": hi}}`` or ``{name: s}``), as tests and
scripts build them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


class CompileError(ValueError):
    """A subgraph cannot be compiled; the message names the node or tensor and the cause."""


@runtime_checkable
class Scales(Protocol):
    def scale(self, tensor: str) -> float:
        """The symmetric int8 scale of ``tensor`` (value of one integer step)."""
        ...


class _MappingScales:
    def __init__(self, table: Mapping[str, Any]) -> None:
        self.table = table

    def scale(self, tensor: str) -> float:
        try:
            entry = self.table[tensor]
        except KeyError:
            raise CompileError(f"tensor {tensor!r} has no entry in the calibration table "
                               f"({len(self.table)} entries); re-run 'opendla quantize'") from None
        if isinstance(entry, (int, float)):
            value = float(entry)
        elif "scale" in entry:
            value = float(entry["scale"])
        else:
            amax = max(abs(float(entry["min"])), abs(float(entry["max"])))
            value = amax / 127.0 if amax > 0 else 1.0 / 127.0
        if not value > 0 or value == float("inf"):
            raise CompileError(f"tensor {tensor!r} has scale {value!r}; it must be finite and > 0")
        return value


def as_scales(table: Any) -> Scales:
    """``table`` itself when it answers ``scale()``, else a view of a calibration mapping."""
    if isinstance(table, Mapping):
        return _MappingScales(table)
    if isinstance(table, Scales):
        return table
    raise TypeError(f"expected a calibration table, got {type(table).__name__}")
