"""Remove ``Identity`` and inference-mode ``Dropout``: readers of the output read the input.

A node whose output is a graph output is removed by renaming the producer's
tensor instead (so graph output names never change); if the input is itself
a graph input or constant, the node stays.
"""

from __future__ import annotations

from accel.ir import Graph, Node

PASS_THROUGH = ("Identity", "Dropout")


def _removable(node: Node, graph: Graph) -> bool:
    if node.op_type not in PASS_THROUGH:
        return False
    # Dropout's mask output must be unused, else the node computes something.
    if any(t and graph.consumers(t) or t in graph.outputs for t in node.outputs[1:]):
        return False
    return True


def _rename(graph: Graph, old: str, new: str) -> None:
    for n in graph.nodes:
        n.inputs = [new if t == old else t for t in n.inputs]
        n.outputs = [new if t == old else t for t in n.outputs]
    graph.outputs = [new if t == old else t for t in graph.outputs]


def apply(graph: Graph) -> bool:
    """Remove every removable pass-through node in one sweep; True when any was removed."""
    changed = False
    for node in list(graph.nodes):
        if not _removable(node, graph):
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if dst in graph.outputs:
            producer = graph.producer(src)
            if producer is None or src in graph.outputs:
                continue
            graph.nodes.remove(node)
            graph.tensors.pop(src, None)
            _rename(graph, src, dst)
        else:
            graph.nodes.remove(node)
            _rename(graph, dst, src)
            graph.tensors.pop(dst, None)
        for t in node.outputs[1:]:
            graph.tensors.pop(t, None)
        changed = True
    return changed
