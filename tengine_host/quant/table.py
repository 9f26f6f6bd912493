"""The calibration table: ``{tensor: {"scale": s, "min": lo, "max": hi}}`` as JSON.

The format follows the NVDLA compiler's calib JSON (keyed by tensor name, with
``scale`` or ``min``/``max`` giving ``scale = max(|min|, |max|) / 127``).

An entry may also hold an integer ``"zero_point"`` z in [-128, 127] (absent: 0):
the tensor is then quantized as ``q = sat8(round_half_away(x / s) + z)`` and read
back as ``x = (q - z) * s``, so a one-signed tensor can use all 256 codes
(:mod:`tengine_host.quant.zero_point`).

Two keys are not tensors: ``"__graph_rewrites__"`` records the weight rewrites
(cross-layer equalization, bias correction) the table was calibrated after, read
into :attr:`QuantTable.rewrites` (:mod:`tengine_host.quant.rewrites`), and
``"__keep_float__"`` the nodes ``opendla quantize`` measured in fp32 on the CPU
(``--keep-float``), read into :attr:`QuantTable.keep_float`: the default of the
commands that use the table.
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

from tengine_host.errors import TengineInputError, reason

ZERO_POINT_RANGE = (-128, 127)     # int8: the code that stands for x = 0
#: the table's JSON key for the nodes kept in fp32 (a list of node names)
KEEP_FLOAT_KEY = "__keep_float__"


class QuantTable(dict):
    """``{tensor: {"scale": s, "min": lo, "max": hi}}``: the one object every scale question
    goes to (:meth:`scale`, :meth:`zero_point`), still a plain mapping for JSON and for code
    that reads entries.

    ``rewrites`` (:class:`~tengine_host.quant.rewrites.GraphRewrites`) are the weight
    rewrites the ranges were calibrated after; users of the table apply them to the
    model (:func:`~tengine_host.quant.rewrites.with_rewrites`).  ``keep_float`` names
    the nodes the table was checked with in fp32 on the CPU.  ``coarse_outputs`` is what
    calibration found of model outputs int8 cannot hold (``{node: CoarseOutput}``,
    :mod:`~tengine_host.quant.coarse_outputs`); it is not saved."""

    def __init__(self, entries=(), *, rewrites=None, keep_float=()) -> None:
        from tengine_host.quant.rewrites import GraphRewrites

        super().__init__(entries)
        self.rewrites = rewrites if rewrites is not None else GraphRewrites()
        self.keep_float = tuple(sorted(keep_float))
        self.coarse_outputs: dict = {}

    def to_json(self) -> dict:
        """The table as its JSON document: the entries, and the rewrites if any."""
        from tengine_host.quant.rewrites import KEY

        return {**self, **({KEY: self.rewrites.as_json()} if self.rewrites else {}),
                **({KEEP_FLOAT_KEY: list(self.keep_float)} if self.keep_float else {})}

    def scale(self, tensor: str) -> float:
        """The scale of ``tensor``; a missing entry is an error naming it."""
        return float(_entry(self, tensor)["scale"])

    def zero_point(self, tensor: str) -> int:
        """The zero point of ``tensor`` (0 when its entry has none); a missing entry is an
        error naming it."""
        return check_zero_point(tensor, _entry(self, tensor).get("zero_point", 0))


def _entry(table, tensor: str) -> dict:
    try:
        return table[tensor]
    except KeyError:
        raise KeyError(f"tensor {tensor!r} has no entry in the calibration table "
                       f"({len(table)} entries); re-run 'opendla quantize'") from None


def check_zero_point(tensor: str, value) -> int:
    """``value`` as a zero point, or :class:`TengineInputError` naming ``tensor`` and the
    value: an integer (not a bool or a float) in ``ZERO_POINT_RANGE``."""
    lo, hi = ZERO_POINT_RANGE
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not lo <= value <= hi:
        raise TengineInputError(f"table entry {tensor!r} has zero_point {value!r}; it must be "
                                f"an integer in [{lo}, {hi}]")
    return int(value)


def _number(tensor: str, key: str, value) -> float:
    """``value`` of ``key`` in ``tensor``'s entry as a finite float; JSON gives ``null``,
    strings, lists and objects too, and ``true`` would pass as 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise TengineInputError(f"table entry {tensor!r} has {key} {json.dumps(value)}; it must "
                                f"be a finite number")
    return float(value)


def entry(lo: float, hi: float) -> dict[str, float]:
    """One table entry from an observed range (symmetric per-tensor scale)."""
    amax = max(abs(lo), abs(hi))
    # An all-zero tensor quantizes to zeros with any scale; 1/127 keeps it finite.
    return {"scale": (amax if amax > 0 else 1.0) / 127.0, "min": float(lo), "max": float(hi)}


def save_table(table: QuantTable, path: str | Path) -> None:
    """Write ``table`` as indented JSON with sorted keys."""
    doc = table.to_json() if isinstance(table, QuantTable) else table
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def load_table(path: str | Path) -> QuantTable:
    """Read and validate a table; entries with only ``min``/``max`` get their scale."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TengineInputError(f"cannot read calibration table {str(path)!r}: "
                                f"{reason(exc, path)}") from exc
    return table_from_json(raw, f"calibration table {str(path)!r}")


def table_from_json(raw, where: str = "calibration table") -> QuantTable:
    """A validated table from its JSON document (:meth:`QuantTable.to_json`)."""
    from tengine_host.quant.rewrites import KEY, GraphRewrites

    if not isinstance(raw, dict):
        raise TengineInputError(f"{where} must be a JSON object of tensors, not a "
                                f"{type(raw).__name__}")
    raw = dict(raw)
    keep = raw.pop(KEEP_FLOAT_KEY, [])
    if not isinstance(keep, list) or not all(isinstance(n, str) and n for n in keep):
        raise TengineInputError(f"{where}: {KEEP_FLOAT_KEY!r} must be a list of node names, "
                                f"got {keep!r}")
    table = QuantTable(rewrites=GraphRewrites.from_json(raw.pop(KEY), where)
                       if KEY in raw else None, keep_float=keep)
    for name, e in raw.items():
        try:
            table[name] = _entry_from_json(name, e)
        except TengineInputError as exc:
            raise TengineInputError(f"{where}: {exc}") from None
    return table


def _entry_from_json(name: str, e) -> dict:
    """One validated entry: numbers for ``scale``/``min``/``max`` (the scale derived from
    ``min``/``max`` when absent; finite and > 0), an int8 ``zero_point``."""
    if not isinstance(e, dict):
        raise TengineInputError(f"table entry {name!r} must be an object with 'scale' or "
                                f"'min' and 'max', got {json.dumps(e)}")
    out = {k: (check_zero_point(name, v) if k == "zero_point" else _number(name, k, v))
           for k, v in e.items()}
    if "scale" not in out:
        if "min" not in out or "max" not in out:
            raise TengineInputError(f"table entry {name!r} needs 'scale' or 'min' and 'max'")
        out = {**entry(out["min"], out["max"]), **out}
    if not out["scale"] > 0:
        raise TengineInputError(f"table entry {name!r} has scale {out['scale']}; it must be "
                                f"finite and > 0")
    return out


def check_table(table: QuantTable, graph, where: str = "calibration table") -> None:
    """Raise :class:`TengineInputError` unless ``table`` has an entry for every activation
    of ``graph``.

    Activations are the graph inputs and node outputs that are float and not
    constant; a table calibrated on another model (or before passes renamed
    tensors) misses some and is rejected with the first few names.
    """
    import numpy as np

    acts = [t for t in [*graph.inputs, *(o for n in graph.nodes for o in n.outputs)]
            if t and not graph.is_constant(t)
            and np.issubdtype(np.dtype(graph.tensors[t].dtype), np.floating)]
    missing = [t for t in acts if t not in table]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise TengineInputError(f"{where} does not match model {graph.name!r}: {len(missing)} "
                                f"of {len(acts)} activation tensors have no entry ({shown}); "
                                f"re-run 'opendla quantize' on this model")


def scale_of(table: QuantTable, tensor: str) -> float:
    """The scale of ``tensor`` in ``table`` (a :class:`QuantTable` or a plain mapping)."""
    return QuantTable.scale(table, tensor)


def zero_point_of(table: QuantTable, tensor: str) -> int:
    """The zero point of ``tensor`` in ``table`` (a :class:`QuantTable` or a plain mapping)."""
    return QuantTable.zero_point(table, tensor)
