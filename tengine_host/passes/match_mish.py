"""Recognize Mish written out as ``Mul(x, Tanh(Softplus(x)))``.

YOLOv4-style backbones export Mish as Softplus, Tanh and a Mul (PyTorch's
``F.mish`` before opset 18). As one ``Mish`` node it is one lookup table on the
DLA, computed from the int8 input with one rounding (:mod:`accel.compiler.ops.lookup`),
where the spelled-out form needs two tables, a product of two tensors and two
rounded intermediates.

``Mul`` matches with its operands in either order; the Softplus and Tanh outputs must
be read by the next node alone (not by another node, not a graph output). The Mish
takes over the Mul's output name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph
from tengine_host.passes.edit import private_producer, replace_nodes


def apply(graph: Graph) -> bool:
    """Replace every ``Mul(x, Tanh(Softplus(x)))``; True when any was."""
    changed = False
    for node in list(graph.nodes):
        if node.op_type != "Mul" or len(node.inputs) != 2 or not any(
                n is node for n in graph.nodes):
            continue
        if graph.tensors[node.outputs[0]].dtype != np.float32:
            continue
        for i in (0, 1):
            tanh = private_producer(graph, node.inputs[1 - i], node)
            if tanh is None or tanh.op_type != "Tanh":
                continue
            soft = private_producer(graph, tanh.inputs[0], tanh)
            if soft is not None and soft.op_type == "Softplus" \
                    and soft.inputs[0] == node.inputs[i]:
                replace_nodes(graph, [soft, tanh, node], "Mish", [node.inputs[i]], {})
                changed = True
                break
    return changed
