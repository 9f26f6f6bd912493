"""Recognize Swish (SiLU) written out as ``Mul(x, Sigmoid(x))``.

Detectors built on SiLU (YOLOX, YOLOv5-8) export it as a Sigmoid and a Mul.
As one ``Swish(x, alpha=1)`` node it is one operation: on the DLA a single
SDP lookup table computes ``x * sigmoid(x)`` from the int8 input with one
rounding (:mod:`accel.compiler.ops.lookup`), where the spelled-out form needs
a table, a product and a rounded intermediate.

``Mul`` matches with its operands in either order; the Sigmoid's output must be
read by the Mul alone (not by another node, not a graph output).  The Swish
takes over the Mul's output name.
"""

from __future__ import annotations

from accel.ir import Graph
from tengine_host.passes.edit import product_with_chain, replace_nodes


def apply(graph: Graph) -> bool:
    """Replace every ``Mul(x, Sigmoid(x))``; True when any was."""
    changed = False
    for node in list(graph.nodes):
        found = product_with_chain(graph, node, ("Sigmoid",))
        if found is not None:
            i, chain = found
            replace_nodes(graph, [*chain, node], "Swish", [node.inputs[i]], {"alpha": 1.0})
            changed = True
    return changed
