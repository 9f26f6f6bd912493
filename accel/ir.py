"""The graph IR: tensors, nodes, and a topologically sorted graph.

The host engine (``tengine_host``) builds it from ONNX, rewrites and runs it;
the accelerator compiler (``accel.compiler``) lowers its supported subgraphs.
Both are written against these names, so they are the contract between them:
``Tensor``, ``Node``, ``Graph`` and the graph's ``producer`` / ``consumers`` /
``is_constant`` / ``subgraph`` queries.  It lives on accel's bottom floor and
imports nothing of the project, so the compiler and the host both import it
downward (``docs/architecture.md``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Tensor:
    """A named value: an activation (``data is None``) or a constant.

    Attributes
    ----------
    name : str
        Unique name inside its graph (ONNX value name).
    shape : tuple of int
        Static shape; every dimension is known after import.
    dtype : numpy.dtype
        ``np.float32`` for activations; constants keep their ONNX type.
    data : numpy.ndarray or None
        The value of an initializer / ``Constant``; ``None`` for activations.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Node:
    """One operator application.

    ``inputs`` holds ``""`` for an omitted optional ONNX input.  ``attrs`` are
    normalized by the op's definition at import time (every default filled in),
    so consumers never need to know ONNX's defaults.
    """

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


class Graph:
    """A dataflow graph whose ``nodes`` are kept in topological order.

    Parameters
    ----------
    name : str
        Model or subgraph name.
    nodes : iterable of Node
        Operators; sorted topologically on construction.
    tensors : dict
        Every tensor referenced by ``nodes``, ``inputs`` and ``outputs``.
    inputs, outputs : list of str
        Names of the graph's runtime inputs (never constants) and outputs.
    """

    def __init__(self, name: str, nodes: Iterable[Node], tensors: dict[str, Tensor],
                 inputs: list[str], outputs: list[str]) -> None:
        self.name = name
        self.tensors = dict(tensors)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = _toposort(list(nodes), self)

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}, {len(self.nodes)} nodes, inputs={self.inputs}, "
                f"outputs={self.outputs})")

    def producer(self, tensor: str) -> Node | None:
        """The node that writes ``tensor``, or ``None`` for inputs and constants."""
        for node in self.nodes:
            if tensor in node.outputs:
                return node
        return None

    def consumers(self, tensor: str) -> list[Node]:
        """Nodes that read ``tensor``, in execution order."""
        return [node for node in self.nodes if tensor in node.inputs]

    def is_constant(self, tensor: str) -> bool:
        """True when ``tensor`` has a value known before running the graph."""
        t = self.tensors.get(tensor)
        return t is not None and t.data is not None

    def node(self, name: str) -> Node:
        """Look a node up by name."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"node {name!r} not in graph {self.name!r}")

    def subgraph(self, nodes: Iterable[Node], name: str | None = None) -> Graph:
        """The graph made of ``nodes`` alone, with inputs/outputs computed from the cut.

        Inputs are the non-constant tensors the nodes read but do not produce;
        outputs are the tensors they produce that are read outside the cut or
        are outputs of this graph.  Constants travel with the subgraph.
        """
        chosen = list(nodes)
        ids = {id(n) for n in chosen}
        produced = {t for n in chosen for t in n.outputs if t}
        inputs: list[str] = []
        for n in chosen:
            for t in n.inputs:
                if t and t not in produced and not self.is_constant(t) and t not in inputs:
                    inputs.append(t)
        read_outside = {t for n in self.nodes if id(n) not in ids for t in n.inputs}
        outputs = [t for n in chosen for t in n.outputs
                   if t and (t in read_outside or t in self.outputs)]
        names = {t for n in chosen for t in (*n.inputs, *n.outputs) if t}
        tensors = {t: self.tensors[t] for t in names if t in self.tensors}
        return Graph(name or f"{self.name}_sub", chosen, tensors, inputs, outputs)


def dependencies(nodes: list[Node]) -> tuple[list[list[int]], list[int]]:
    """Node-index dependency lists: ``users[i]`` read an output of node ``i``, and
    ``pending[i]`` counts the distinct nodes whose outputs node ``i`` reads."""
    producer = {t: i for i, n in enumerate(nodes) for t in n.outputs if t}
    users: list[list[int]] = [[] for _ in nodes]
    pending = [0] * len(nodes)
    for i, n in enumerate(nodes):
        for j in {producer[t] for t in n.inputs if t in producer} - {i}:
            users[j].append(i)
            pending[i] += 1
    return users, pending


def _toposort(nodes: list[Node], graph: Graph) -> list[Node]:
    """Stable topological sort (Kahn with a heap): the original order breaks ties."""
    users, pending = dependencies(nodes)
    ready = [i for i, p in enumerate(pending) if p == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(nodes):
        stuck = [n.name for i, n in enumerate(nodes) if pending[i] > 0]
        raise ValueError(f"graph {graph.name!r} has a cycle through nodes {stuck}")
    return order
