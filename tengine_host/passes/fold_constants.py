"""Constant folding: evaluate every node whose outputs are known before run time.

A node folds when all its inputs are constants, or when it reads only the
*shape* of an activation (``Shape``, whose result is static in this engine).
Chains fold in one application because nodes are visited in topological
order: ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``'s shape operand
becomes a constant and the Reshape keeps reading it.  The folded outputs
become constant tensors; nodes writing graph outputs stay (a graph output
must be computed by a node).
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Tensor
from tengine_host.ops import OPS, run_op
from tengine_host.passes.edit import drop_unused


def _args(node, graph: Graph) -> list[np.ndarray | None] | None:
    op = OPS.get(node.op_type)
    if op is None:
        return None
    ins = [graph.tensors.get(t) if t else None for t in node.inputs]
    if any(t is None for t, name in zip(ins, node.inputs, strict=True) if name):
        return None
    if getattr(op, "shape_only", False):
        # only the shape is read: a zero-stride view stands in for the activation
        return [None if t is None else t.data if t.data is not None
                else np.broadcast_to(np.zeros((), t.dtype), t.shape) for t in ins]
    present = [t for t in ins if t is not None]
    if not present or any(t.data is None for t in present):
        return None
    return [None if t is None else t.data for t in ins]


def apply(graph: Graph) -> bool:
    """Fold every foldable node; True when any was folded."""
    folded = []
    for node in graph.nodes:
        if any(t in graph.outputs for t in node.outputs):
            continue
        args = _args(node, graph)
        if args is None:
            continue
        values = run_op(node.op_type, args, node.attrs)
        for name, value in zip(node.outputs, values, strict=False):
            if name:
                value = np.asarray(value)
                graph.tensors[name] = Tensor(name, tuple(value.shape), value.dtype, value)
        folded.append(node)
    if not folded:
        return False
    ids = {id(n) for n in folded}
    graph.nodes = [n for n in graph.nodes if id(n) not in ids]
    drop_unused(graph)
    return True
