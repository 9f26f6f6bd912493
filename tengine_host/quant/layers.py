"""Conv and Gemm weights in one shape, for the passes that rewrite them before quantization.

Cross-layer equalization and bias correction both reason about a layer's output
channel ``k`` and input channel ``c``.  A Conv stores its weight as
``[K, C/group, *kernel]``; a Gemm as ``[C, K]`` (or ``[K, C]`` with ``transB``)
scaled by ``alpha``, with a bias ``C`` scaled by ``beta``.  :class:`Layer` holds
both in the Conv form, as the DLA sees them (the compiler quantizes ``alpha * W``
as ``[K, C]``), and :func:`write_layer` stores them back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import add_constant, constant, per_channel

#: the ops whose weights are quantized per output channel
WEIGHTED_OPS = ("Conv", "Gemm")


@dataclass
class Layer:
    """The effective weights of one Conv or Gemm node, in float64.

    Attributes
    ----------
    node : Node
        The node (of the graph being rewritten).
    weight : numpy.ndarray
        ``[K, C/group, *kernel]`` for a Conv, ``[K, C]`` (``alpha`` folded in) for a Gemm.
    bias : numpy.ndarray or None
        ``[K]`` (a Gemm's ``beta`` folded in), or None when the node has none.
    group : int
        Convolution groups (1 for a Gemm).
    """

    node: Node
    weight: np.ndarray
    bias: np.ndarray | None
    group: int

    @property
    def out_channels(self) -> int:
        return self.weight.shape[0]

    @property
    def in_channels(self) -> int:
        return self.weight.shape[1] * self.group

    def grouped(self) -> np.ndarray:
        """The weight as ``[group, K/group, C/group, taps]`` (a view): output channel
        ``k`` of group ``g`` reads input channel ``g * C/group + c`` through ``[g, k, c]``."""
        k, cg = self.weight.shape[:2]
        return self.weight.reshape(self.group, k // self.group, cg, -1)


def read_layer(graph: Graph, node: Node) -> Layer | str:
    """The :class:`Layer` of a Conv or Gemm node, or why its weights cannot be rewritten."""
    if node.op_type not in WEIGHTED_OPS:
        return f"{node.op_type} is not one of {', '.join(WEIGHTED_OPS)}"
    w = constant(graph, node.inputs[1])
    if w is None:
        return f"weight {node.inputs[1]!r} is not a constant"
    b_name = node.inputs[2] if len(node.inputs) > 2 else ""
    b = constant(graph, b_name)
    if b_name and b is None:
        return f"bias {b_name!r} is not a constant"
    w = np.array(w, dtype=np.float64)
    if node.op_type == "Conv":
        bias = None if b is None else np.array(b, dtype=np.float64).reshape(-1)
        return Layer(node, w, bias, int(node.attrs.get("group", 1)))
    a = node.attrs
    w = (w if a.get("transB", 0) else w.T) * float(a.get("alpha", 1.0))
    bias = None
    if b is not None:
        bias = per_channel(b, w.shape[0], 2)
        if bias is None:
            return f"bias {b_name!r} of shape {tuple(np.shape(b))} is not one value per channel"
        bias = bias * float(a.get("beta", 1.0))
    return Layer(node, w, bias, 1)


def write_layer(graph: Graph, layer: Layer, tag: str, *, weight: bool = True,
                bias: bool = True) -> None:
    """Store ``layer``'s weight and/or bias as new float32 constants of its node.

    New constants (named ``<node>_<tag>_weight`` / ``_bias``) leave the old ones to
    any other reader; :func:`~tengine_host.passes.edit.drop_unused` forgets them
    otherwise.  A Gemm's ``alpha`` (``beta``) becomes 1, being folded into the
    written weight (bias).
    """
    node = layer.node
    gemm = node.op_type == "Gemm"
    inputs = [*node.inputs[:3], *[""] * (3 - len(node.inputs))]
    if weight:
        w = layer.weight.T if gemm and not node.attrs.get("transB", 0) else layer.weight
        inputs[1] = add_constant(graph, f"{node.name}_{tag}_weight", w)
        if gemm:
            node.attrs["alpha"] = 1.0
    if bias and layer.bias is not None:
        inputs[2] = add_constant(graph, f"{node.name}_{tag}_bias", layer.bias)
        if gemm:
            node.attrs["beta"] = 1.0
    node.inputs = inputs if inputs[2] else inputs[:2]


def copy_graph(graph: Graph) -> Graph:
    """A graph whose nodes (and their attributes) and tensor table can be edited without
    touching ``graph``.  Constant arrays are shared: passes replace constants, never
    write into them (:func:`~tengine_host.passes.edit.add_constant`)."""
    nodes = [Node(n.name, n.op_type, list(n.inputs), list(n.outputs), dict(n.attrs))
             for n in graph.nodes]
    return Graph(graph.name, nodes, graph.tensors, graph.inputs, graph.outputs)
