"""Small graph edits the passes share."""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node, Tensor


def sole_consumer(graph: Graph, tensor: str) -> Node | None:
    """The only node reading ``tensor`` when it is not also a graph output, else ``None``."""
    users = graph.consumers(tensor)
    if len(users) != 1 or tensor in graph.outputs:
        return None
    return users[0]


def private_producer(graph: Graph, tensor: str, reader: Node) -> Node | None:
    """The producer of ``tensor`` when ``reader`` is its only reader (reading it once) and
    it is no graph output - an intermediate a pattern may swallow - else ``None``."""
    if sole_consumer(graph, tensor) is not reader or reader.inputs.count(tensor) != 1:
        return None
    return graph.producer(tensor)


def replace_nodes(graph: Graph, nodes: list[Node], op_type: str, inputs: list[str],
                  attrs: dict) -> Node:
    """Put one ``op_type`` node reading ``inputs`` in place of ``nodes``: it writes the
    last node's first output, at that node's position; returns the new node."""
    last = nodes[-1]
    new = Node(fresh_node_name(graph, f"{last.name}_{op_type.lower()}"), op_type,
               list(inputs), [last.outputs[0]], attrs)
    ids = {id(n) for n in nodes}
    at = next(i for i, n in enumerate(graph.nodes) if n is last)
    graph.nodes[at] = new
    graph.nodes = [n for n in graph.nodes if id(n) not in ids or n is new]
    drop_unused(graph)
    return new


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


def fresh_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... : a tensor name the graph does not use yet."""
    used = set(graph.tensors) | set(graph.inputs) | set(graph.outputs)
    for n in graph.nodes:
        used.update(n.inputs)
        used.update(n.outputs)
    name, i = base, 0
    while name in used:
        i += 1
        name = f"{base}_{i}"
    return name


def fresh_node_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... : a node name the graph does not use yet."""
    used = {n.name for n in graph.nodes}
    name, i = base, 0
    while name in used:
        i += 1
        name = f"{base}_{i}"
    return name


def add_constant(graph: Graph, base: str, value) -> str:
    """Store ``value`` as a new float32 constant under a fresh name derived from ``base``.

    Passes never write into an existing constant's array: it may be shared with
    other nodes.  The replaced constant disappears with :func:`drop_unused` once
    nothing reads it.
    """
    data = np.ascontiguousarray(value, dtype=np.float32)
    name = fresh_name(graph, base)
    graph.tensors[name] = Tensor(name, tuple(data.shape), np.dtype(np.float32), data)
    return name


def scalar(graph: Graph, tensor: str) -> float | None:
    """The value of a one-element constant, else ``None``."""
    v = constant(graph, tensor)
    return None if v is None or v.size != 1 else float(np.asarray(v).reshape(-1)[0])


def per_channel(value, k: int, rank: int) -> np.ndarray | None:
    """``value`` as a float64 [K] vector when, broadcast ONNX-style (aligned at the last
    axis) against a rank-``rank`` output with ``k`` channels on axis 1, it varies at most
    along that axis; else ``None``.  A [K] vector is per channel for a Gemm's [M, K]
    output but not for a conv's [N, K, H, W] one (it would align with W)."""
    v = np.asarray(value)
    if v.ndim > rank or rank < 2:
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if shape[0] != 1 or any(d != 1 for d in shape[2:]) or shape[1] not in (1, k):
        return None
    return np.broadcast_to(v.reshape(-1).astype(np.float64), (k,)).copy()


def move_activation(src: Node, dst: Node) -> None:
    """Give ``dst`` the activation fused into ``src`` (every ``activation*`` attribute)."""
    for key, value in src.attrs.items():
        if key.startswith("activation") and value is not None:
            dst.attrs[key] = value


def product_with_chain(graph: Graph, mul: Node, chain: tuple[str, ...]
                       ) -> tuple[int, list[Node]] | None:
    """For a two-input float ``Mul`` that is ``x * f(x)`` with ``f`` the single-input ops
    ``chain`` applied in turn (``("Softplus", "Tanh")``: ``tanh(softplus(x))``), each read
    only by the next: ``(i, nodes)`` with ``x = mul.inputs[i]`` and ``nodes`` the chain's
    nodes in order; else None."""
    if mul.op_type != "Mul" or len(mul.inputs) != 2 or not any(n is mul for n in graph.nodes):
        return None
    if graph.tensors[mul.outputs[0]].dtype != np.float32:
        return None
    for i in (0, 1):
        nodes, reader, t = [], mul, mul.inputs[1 - i]
        for op in reversed(chain):
            producer = private_producer(graph, t, reader)
            if producer is None or producer.op_type != op:
                break
            nodes.insert(0, producer)
            reader, t = producer, producer.inputs[0]
        else:
            if t == mul.inputs[i]:
                return i, nodes
    return None
