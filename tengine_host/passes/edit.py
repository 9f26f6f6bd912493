"""Small graph edits the passes share."""

from __future__ import annotations

from tengine_host.ir import Graph, Node


def sole_consumer(graph: Graph, tensor: str) -> Node | None:
    """The only node reading ``tensor`` when it is not also a graph output, else ``None``."""
    users = graph.consumers(tensor)
    if len(users) != 1 or tensor in graph.outputs:
        return None
    return users[0]


def constant(graph: Graph, tensor: str):
    """The value of a constant tensor, or ``None`` (also for ``""``)."""
    t = graph.tensors.get(tensor) if tensor else None
    return None if t is None else t.data


def absorb(graph: Graph, producer: Node, follower: Node) -> None:
    """Remove ``follower`` and let ``producer`` write its first output under its name."""
    old, new = producer.outputs[0], follower.outputs[0]
    producer.outputs[0] = new
    graph.nodes.remove(follower)
    graph.tensors.pop(old, None)
    drop_unused(graph)


def drop_unused(graph: Graph) -> None:
    """Forget tensors no node, input or output mentions any more."""
    used = set(graph.inputs) | set(graph.outputs)
    for n in graph.nodes:
        used.update(n.inputs)
        used.update(n.outputs)
    for name in [t for t in graph.tensors if t not in used]:
        del graph.tensors[name]
