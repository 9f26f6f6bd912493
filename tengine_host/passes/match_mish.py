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

from accel.ir import Graph
from tengine_host.passes.edit import product_with_chain, replace_nodes


def apply(graph: Graph) -> bool:
    """Replace every ``Mul(x, Tanh(Softplus(x)))``; True when any was."""
    changed = False
    for node in list(graph.nodes):
        found = product_with_chain(graph, node, ("Softplus", "Tanh"))
        if found is not None:
            i, chain = found
            replace_nodes(graph, [*chain, node], "Mish", [node.inputs[i]], {})
            changed = True
    return changed
