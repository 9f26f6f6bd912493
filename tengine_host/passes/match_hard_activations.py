"""Recognize HardSigmoid and HardSwish written out as elementary ops.

Exporters (paddle2onnx, older PyTorch) spell them with ``Add``, ``Clip``,
``Mul`` and ``Div``; NVDLA runs each spelled-out op as its own SDP pass, but a
HardSigmoid after a convolution folds into it
(:mod:`~tengine_host.passes.fold_hardsigmoid`) and a HardSwish is one op.

* ``Div(Clip(Add(x, 3), 0, 6), 6)`` (or ``Mul`` by 1/6) becomes
  ``HardSigmoid(x, alpha=1/6, beta=0.5)``;
* ``Mul(x, HardSigmoid(x, 1/6, 0.5))`` and PP-OCR's
  ``Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)`` (or ``Mul`` by 1/6) become
  ``HardSwish(x)``.

``Add`` and ``Mul`` match with their operands in either order.  Only exact
constants match (3, 0, 6, 1/6 within float32 rounding), and every
intermediate tensor must be read by the pattern alone (not by another node,
not a graph output).  The new node takes over the last node's output name.
"""

from __future__ import annotations

import math

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import private_producer, replace_nodes, scalar
from tengine_host.passes.fuse_activation import clip_bounds

#: Relative tolerance of a constant: a few float32 ulps (1/6 is not exact in float32).
RTOL = 1e-6
SIXTH = 1.0 / 6.0


def _is(value: float | None, target: float) -> bool:
    return value is not None and math.isclose(value, target, rel_tol=RTOL, abs_tol=0.0)


def _split_const(graph: Graph, node: Node) -> tuple[str, float] | None:
    """``(tensor, constant)`` of a binary node with one scalar-constant operand."""
    if len(node.inputs) != 2:
        return None
    for i in (0, 1):
        c = scalar(graph, node.inputs[1 - i])
        if c is not None and not graph.is_constant(node.inputs[i]):
            return node.inputs[i], c
    return None


def _scaled_sixth(graph: Graph, node: Node) -> str | None:
    """``t`` when ``node`` is ``t / 6`` or ``t * 1/6`` (either order), else None."""
    if node.op_type == "Div" and len(node.inputs) == 2 and _is(scalar(graph, node.inputs[1]), 6.0):
        return node.inputs[0]
    if node.op_type == "Mul":
        tc = _split_const(graph, node)
        if tc is not None and _is(tc[1], SIXTH):
            return tc[0]
    return None


def _relu6_shift(graph: Graph, tensor: str, reader: Node) -> tuple[str, list[Node]] | None:
    """``(x, [add, clip])`` when ``tensor`` is ``Clip(Add(x, 3), 0, 6)`` read only by ``reader``."""
    clip = private_producer(graph, tensor, reader)
    if clip is None or clip.op_type != "Clip":
        return None
    lo, hi = clip_bounds(graph, clip)
    if lo != 0.0 or not _is(hi, 6.0):
        return None
    add = private_producer(graph, clip.inputs[0], clip)
    if add is None or add.op_type != "Add":
        return None
    xc = _split_const(graph, add)
    if xc is None or not _is(xc[1], 3.0):
        return None
    return xc[0], [add, clip]


def _hard_sigmoid(graph: Graph, node: Node) -> tuple[str, list[Node]] | None:
    """``(x, nodes)``: ``node`` ends ``relu6(x + 3) / 6``."""
    t = _scaled_sixth(graph, node)
    if t is None:
        return None
    found = _relu6_shift(graph, t, node)
    return None if found is None else (found[0], [*found[1], node])


def _hard_swish(graph: Graph, node: Node) -> tuple[str, list[Node]] | None:
    """``(x, nodes)``: ``node`` ends ``x * relu6(x + 3) / 6`` or ``x * HardSigmoid(x)``."""
    t = _scaled_sixth(graph, node)
    if t is not None:       # Div(Mul(x, relu6(x + 3)), 6)
        mul = private_producer(graph, t, node)
        if mul is None or mul.op_type != "Mul" or len(mul.inputs) != 2:
            return None
        for i in (0, 1):
            found = _relu6_shift(graph, mul.inputs[1 - i], mul)
            if found is not None and found[0] == mul.inputs[i]:
                return found[0], [*found[1], mul, node]
        return None
    if node.op_type != "Mul" or len(node.inputs) != 2:
        return None
    for i in (0, 1):        # Mul(x, HardSigmoid(x))
        hs = private_producer(graph, node.inputs[1 - i], node)
        if (hs is not None and hs.op_type == "HardSigmoid" and hs.inputs[0] == node.inputs[i]
                and _is(hs.attrs.get("alpha"), SIXTH) and _is(hs.attrs.get("beta"), 0.5)):
            return hs.inputs[0], [hs, node]
    return None


def apply(graph: Graph) -> bool:
    """Replace every spelled-out HardSigmoid / HardSwish in one sweep; True when any was."""
    changed = False
    for node in list(graph.nodes):
        if not any(n is node for n in graph.nodes):
            continue    # already replaced as part of another pattern
        if graph.tensors[node.outputs[0]].dtype != np.float32:
            continue
        found = _hard_sigmoid(graph, node)
        if found is not None:
            replace_nodes(graph, found[1], "HardSigmoid", [found[0]],
                          {"alpha": SIXTH, "beta": 0.5})
            changed = True
            continue
        found = _hard_swish(graph, node)
        if found is not None:
            replace_nodes(graph, found[1], "HardSwish", [found[0]], {})
            changed = True
    return changed
