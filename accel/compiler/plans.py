"""One node's op-table plan: the typed spec and integer parameters its entry computes once,
after checking the node is supported and its tied tensors share one zero point.

The lowering, the int8 golden (:func:`accel.compiler.run_reference`) and the
host's int8 device all start from this plan.
"""

from __future__ import annotations

from typing import Any

from accel.compiler.ops import entry_for
from accel.compiler.scales import CompileError, as_scales, zero_point_of
from accel.config import HwConfig
from accel.ir import Graph, Node


def make_plan(node: Node, graph: Graph, cfg: HwConfig, table: Any) -> Any:
    """The op-table plan of one supported node (typed spec and integer parameters)."""
    entry = entry_for(node)
    reason = entry.check(node, graph, cfg)
    if reason is not None:
        raise CompileError(f"node {node.name!r} ({node.op_type}) cannot run on {cfg.name}: "
                           f"{reason}")
    scales = as_scales(table)
    for group in entry.zero_point_ties(node, graph):
        group = [t for t in group if t and not graph.is_constant(t)]
        zps = {t: zero_point_of(scales, t) for t in group}
        if len(set(zps.values())) > 1:
            raise CompileError(f"node {node.name!r} ({node.op_type}): tensors "
                               f"{', '.join(map(repr, zps))} must share one zero point (the "
                               f"DLA cannot re-centre between them), got "
                               f"{', '.join(str(z) for z in zps.values())}; re-run "
                               f"'opendla quantize'")
    try:
        return entry.plan(node, graph, cfg, scales)
    except CompileError:
        raise
    except (ValueError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise CompileError(f"node {node.name!r} ({node.op_type}): {msg}") from None
