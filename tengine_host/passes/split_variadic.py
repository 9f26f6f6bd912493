"""Sum, Max and Min of more than two tensors become chains of two-input nodes; Sum of
one is its input, Mean a Sum times ``1 / n``.

TensorFlow's ``AddN`` (and Keras' ``Add`` of three branches) exports as one ``Sum``;
the DLA adds, and takes the larger or smaller of, two tensors per SDP pass
(:mod:`accel.compiler.ops.eltwise`), so an ``n``-input node is ``n - 1`` of them.
The results are the same sums in the same order (the CPU's float32 adds left to
right too). Each node of the chain writes a new tensor, the last one the original
output under its name; every input keeps its own scale and the chain's intermediates
get theirs from calibration.

Matched: Sum, Max, Min with three or more inputs, or a Sum of one, and Mean of two or
more, whose inputs all have the output's shape (broadcast ones are left alone: the
DLA's element-wise operands are whole tensors or per-channel vectors, which
:mod:`accel.compiler.ops.eltwise` decides per pair).
"""

from __future__ import annotations

from accel.ir import Graph, Node, Tensor
from tengine_host.passes.edit import add_constant, drop_unused, fresh_name, fresh_node_name

_TWO = {"Sum": "Add", "Max": "Max", "Min": "Min", "Mean": "Add"}


def _chain(graph: Graph, node: Node) -> list[Node]:
    y = node.outputs[0]
    out = graph.tensors[y]
    two = _TWO[node.op_type]
    nodes, acc = [], node.inputs[0]
    last = len(node.inputs) - 1
    for i, x in enumerate(node.inputs[1:], start=1):
        done = i == last and node.op_type != "Mean"
        t = y if done else fresh_name(graph, f"{y}_{two.lower()}{i}")
        if not done:
            graph.tensors[t] = Tensor(t, out.shape, out.dtype)
        nodes.append(Node(fresh_node_name(graph, f"{node.name}_{i}"), two, [acc, x], [t], {}))
        acc = t
    if node.op_type == "Mean":
        k = add_constant(graph, f"{node.name}_inverse", 1.0 / len(node.inputs))
        nodes.append(Node(fresh_node_name(graph, f"{node.name}_mean"), "Mul", [acc, k], [y],
                          {}))
    return nodes


def apply(graph: Graph) -> bool:
    """Split every such node; True when any was split."""
    changed = False
    for node in list(graph.nodes):
        n = len(node.inputs)
        if node.op_type not in _TWO or any(not t for t in node.inputs):
            continue
        shape = graph.tensors[node.outputs[0]].shape
        if any(graph.tensors[t].shape != shape for t in node.inputs):
            continue
        at = graph.nodes.index(node)
        if node.op_type == "Sum" and n == 1:
            graph.nodes[at] = Node(node.name, "Identity", list(node.inputs), list(node.outputs),
                                   {})
        elif n >= 3 or (node.op_type == "Mean" and n >= 2):
            graph.nodes[at:at + 1] = _chain(graph, node)
        else:
            continue
        drop_unused(graph)
        changed = True
    return changed
