"""The op table: every ONNX op the DLA can run, one entry each (see :mod:`.base`).

Modules are registered here by name, never found by scanning.  The table is
the single answer to "can the DLA run this node?" (:func:`supports`): the
partitioner asks it, the compiler asserts it, the int8 CPU golden and the
calibration rules use the same entries.
"""

from __future__ import annotations

from accel.compiler.ops import (
    activation,
    concat,
    conv,
    convtranspose,
    eltwise,
    lookup,
    lrn,
    pad,
    pool,
    reshape,
    resize,
)
from accel.compiler.ops.base import OpEntry
from accel.config import HwConfig
from accel.ir import Graph, Node

_MODULES = (conv, convtranspose, pool, eltwise, activation, concat, pad, resize, reshape, lrn,
            lookup)

TABLE: dict[str, OpEntry] = {}
for _module in _MODULES:
    for _op in _module.ENTRY.op_types:
        if _op in TABLE:
            raise RuntimeError(f"op {_op} registered twice ({_module.__name__})")
        TABLE[_op] = _module.ENTRY


def entry_for(node: Node) -> OpEntry:
    try:
        return TABLE[node.op_type]
    except KeyError:
        raise KeyError(f"op {node.op_type} has no DLA entry") from None


def supports(node: Node, graph: Graph, cfg: HwConfig) -> tuple[bool, str]:
    """Can ``cfg``'s accelerator run ``node``?  ``(True, "")`` or ``(False, reason)``."""
    entry = TABLE.get(node.op_type)
    if entry is None:
        return False, f"op {node.op_type} has no NVDLA lowering"
    reason = entry.check(node, graph, cfg)
    return (True, "") if reason is None else (False, reason)


__all__ = ["TABLE", "OpEntry", "entry_for", "supports"]
