"""A mean over a feature map's two spatial axes becomes a GlobalAveragePool.

PyTorch's ``x.mean([2, 3])`` (MnasNet's and ShuffleNetV2's heads in torchvision, many
hand-written models) exports as ``ReduceMean(axes=[2, 3], keepdims=0)``: the same
numbers as ``GlobalAveragePool`` then ``Flatten``, which the DLA computes (the pool, and
the flattening of a ``[N, C, 1, 1]`` cube in place). Left as a ReduceMean it falls
back to the CPU and cuts the network in front of its classifier.

Matched: a ReduceMean of a 4-D tensor whose axes (attribute, or constant input from
opset 18) are exactly the two spatial ones, in any order or sign. With ``keepdims=1``
the node becomes a GlobalAveragePool writing the same tensor; with ``keepdims=0`` a
GlobalAveragePool into a new ``[N, C, 1, 1]`` tensor and a Flatten (axis 1) writing
the ReduceMean's output under its name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node, Tensor
from tengine_host.passes.edit import constant, drop_unused, fresh_name, fresh_node_name


def _spatial_mean(graph: Graph, node: Node) -> bool:
    if node.op_type != "ReduceMean":
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
        n, c = graph.tensors[x].shape[:2]
        at = graph.nodes.index(node)
        if node.attrs.get("keepdims", 1):
            graph.nodes[at] = Node(node.name, "GlobalAveragePool", [x], [y], {})
        else:
            pooled = fresh_name(graph, f"{y}_pooled")
            graph.tensors[pooled] = Tensor(pooled, (n, c, 1, 1), graph.tensors[y].dtype)
            graph.nodes[at:at + 1] = [
                Node(node.name, "GlobalAveragePool", [x], [pooled], {}),
                Node(fresh_node_name(graph, f"{node.name}_flatten"), "Flatten", [pooled], [y],
                     {"axis": 1})]
        drop_unused(graph)
        changed = True
    return changed
