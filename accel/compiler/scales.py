"""The questions the compiler asks a calibration table: a tensor's scale and zero point.

Any object with ``scale(name) -> float`` answers them (the host's
:class:`tengine_host.quant.table.QuantTable` does); one without
``zero_point(name) -> int`` quantizes every tensor symmetrically (zero point 0,
:func:`zero_point_of`).  :func:`as_scales` also accepts a plain mapping of
NVIDIA's calibration JSON shape (``{name: {"scale": s}}``, ``{name: {"min":
lo, "max": hi}}`` or ``{name: s}``, with an optional integer ``"zero_point"``),
as tests and scripts build them.

A tensor with scale ``s`` and zero point ``z`` holds ``q = sat8(round(x / s) + z)``:
the code ``z`` stands for 0 and ``(q - z) * s`` is the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any, Protocol, runtime_checkable

from accel.errors import AccelInputError

ZERO_POINTS = (-128, 127)


class CompileError(AccelInputError, ValueError):
    """A subgraph cannot be compiled; the message names the node or tensor and the cause
    (the model or its calibration table asks what the configuration cannot do)."""


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

    def zero_point(self, tensor: str) -> int:
        self.scale(tensor)                  # the entry exists and is sound
        entry = self.table[tensor]
        value = 0 if isinstance(entry, (int, float)) else entry.get("zero_point", 0)
        lo, hi = ZERO_POINTS
        if isinstance(value, bool) or not isinstance(value, Integral) or not lo <= value <= hi:
            raise CompileError(f"tensor {tensor!r} has zero_point {value!r}; it must be an "
                               f"integer in [{lo}, {hi}]")
        return int(value)


def as_scales(table: Any) -> Scales:
    """``table`` itself when it answers ``scale()``, else a view of a calibration mapping."""
    if isinstance(table, Mapping):
        return _MappingScales(table)
    if isinstance(table, Scales):
        return table
    raise TypeError(f"expected a calibration table, got {type(table).__name__}")


def zero_point_of(scales: Scales, tensor: str) -> int:
    """The zero point of ``tensor``: ``scales.zero_point(tensor)``, or 0 when ``scales``
    answers only scales (a symmetric table)."""
    ask = getattr(scales, "zero_point", None)
    return 0 if ask is None else int(ask(tensor))
