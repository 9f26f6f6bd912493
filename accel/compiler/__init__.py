"""Accelerator compiler: host subgraph -> NVDLA loadable, through one op table.

* :func:`supports` answers whether the DLA can run a node (the partitioner
  asks it, the compiler asserts it) - :mod:`accel.compiler.ops`;
* :func:`compile_subgraph` lowers a supported subgraph into engine operations
  (:mod:`.lowering`, :mod:`.tiling`), plans its memory (:mod:`.memory`) and
  emits a loadable (:mod:`.emitter`);
* :func:`run_reference` is the int8 CPU golden of a compiled subgraph, the
  op table's plain-numpy references on the same plans (:mod:`.reference`).
"""

from __future__ import annotations

from typing import Any

from accel.compiler.compile import CompiledSubgraph, compile_subgraph
from accel.compiler.ops import TABLE, entry_for, supports
from accel.compiler.reference import run_reference, scale_constraints, zero_point_constraints
from accel.compiler.scales import CompileError, as_scales, zero_point_of
from accel.config import HwConfig
from tengine_host.ir import Graph, Node


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


__all__ = ["TABLE", "CompileError", "CompiledSubgraph", "as_scales", "compile_subgraph",
           "entry_for", "make_plan", "run_reference", "scale_constraints", "supports",
           "zero_point_constraints", "zero_point_of"]
