"""A mean (or sum) over a feature map's two spatial axes becomes a GlobalAveragePool.

PyTorch's ``x.mean([2, 3])`` (MnasNet's and ShuffleNetV2's heads in torchvision, many
hand-written models) exports as ``ReduceMean(axes=[2, 3], keepdims=0)``: the same
numbers as ``GlobalAveragePool`` then ``Flatten``, which the DLA computes (the pool, and
the flattening of a ``[N, C, 1, 1]`` cube in place). Left as a ReduceMean it falls
back to the CPU and cuts the network in front of its classifier.

Matched: a ReduceMean of a 4-D tensor whose axes (attribute, or constant input from
opset 18 on) are exactly the two spatial ones, in any order or sign. With
``keepdims=1`` the node becomes a GlobalAveragePool writing the same tensor; with
``keepdims=0`` a GlobalAveragePool into a new ``[N, C, 1, 1]`` tensor and a Flatten
(axis 1) writing the ReduceMean's output under its name. A ReduceSum (axes an input
from opset 13 on) is the same mean times ``H * W``: a Mul by that constant follows.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node, Tensor
from tengine_host.passes.edit import (
    add_constant,
    constant,
    drop_unused,
    fresh_name,
    fresh_node_name,
)


def _spatial_mean(graph: Graph, node: Node) -> bool:
    if node.op_type not in ("ReduceMean", "ReduceSum"):
        return False
    shape = graph.tensors[node.inputs[0]].shape
    if len(shape) != 4:
        return False
    axes = node.attrs.get("axes")
    if len(node.inputs) > 1 and node.inputs[1]:
        given = constant(graph, node.inputs[1])
        if given is None:
            return False
        axes = given
    if axes is None or np.asarray(axes).size == 0:
        return False
    return sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) == [2, 3]


def apply(graph: Graph) -> bool:
    """Replace every spatial ReduceMean; True when any was replaced."""
    changed = False
    for node in list(graph.nodes):
        if not _spatial_mean(graph, node):
            continue
        x, y = node.inputs[0], node.outputs[0]
        n, c, h, w = graph.tensors[x].shape
        dtype = graph.tensors[y].dtype
        at = graph.nodes.index(node)
        nodes, t = [], y
        if node.op_type == "ReduceSum":       # the mean times H * W, into y
            t = fresh_name(graph, f"{y}_mean")
            graph.tensors[t] = Tensor(t, graph.tensors[y].shape, dtype)
            k = add_constant(graph, f"{node.name}_size", float(h * w))
            nodes.append(Node(fresh_node_name(graph, f"{node.name}_sum"), "Mul", [t, k], [y],
                              {}))
        if node.attrs.get("keepdims", 1):
            nodes.insert(0, Node(node.name, "GlobalAveragePool", [x], [t], {}))
        else:
            pooled = fresh_name(graph, f"{y}_pooled")
            graph.tensors[pooled] = Tensor(pooled, (n, c, 1, 1), dtype)
            nodes[:0] = [Node(node.name, "GlobalAveragePool", [x], [pooled], {}),
                         Node(fresh_node_name(graph, f"{node.name}_flatten"), "Flatten",
                              [pooled], [t], {"axis": 1})]
        graph.nodes[at:at + 1] = nodes
        drop_unused(graph)
        changed = True
    return changed
