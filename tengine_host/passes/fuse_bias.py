"""Bias and MatMul fusions NVDLA's conv/FC pipeline needs.

* ``Conv -> Add(per-channel constant)`` becomes the Conv's bias (added to an
  existing one): the SDP adds a per-channel bias in X1 for free.
* ``MatMul(x[N, F], W const [F, K])`` becomes ``Gemm`` (``transB=0``): the DLA
  runs fully-connected layers as Gemm.
* ``Gemm(no bias) -> Add(constant [K] or [1, K])`` becomes the Gemm's bias.

The fused node takes over the Add's output name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node
from tengine_host.ops import get_op
from tengine_host.passes.edit import absorb, add_constant, constant, per_channel, sole_consumer


def _set_bias(graph: Graph, node: Node, add: np.ndarray) -> None:
    old = constant(graph, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    total = add if old is None else np.asarray(old, np.float64).reshape(-1) + add
    node.inputs = [*node.inputs[:2], add_constant(graph, f"{node.name}_fused_bias", total)]


def _matmul_to_gemm(graph: Graph, node: Node) -> bool:
    x = graph.tensors[node.inputs[0]]
    w = constant(graph, node.inputs[1])
    if w is None or w.ndim != 2 or len(x.shape) != 2 or x.dtype != np.float32:
        return False
    ins = [graph.tensors[t] for t in node.inputs]
    node.op_type = "Gemm"
    node.attrs = get_op("Gemm").normalize({}, ins, 13)
    return True


def _fuse_add(graph: Graph, node: Node) -> bool:
    if node.attrs.get("activation") is not None:
        return False
    if len(node.inputs) > 2 and node.inputs[2] and constant(graph, node.inputs[2]) is None:
        return False
    if node.op_type == "Gemm" and (node.attrs.get("beta", 1.0) != 1.0):
        return False
    add = sole_consumer(graph, node.outputs[0])
    if add is None or add.op_type != "Add" or len(add.inputs) != 2:
        return False
    other = add.inputs[1] if add.inputs[0] == node.outputs[0] else add.inputs[0]
    value = constant(graph, other)
    if value is None:
        return False
    out = graph.tensors[node.outputs[0]]
    if graph.tensors[add.outputs[0]].shape != out.shape:
        return False  # the constant would broadcast the output to a larger shape
    vec = per_channel(value, out.shape[1], len(out.shape))
    if vec is None:
        return False
    _set_bias(graph, node, vec)
    if add.attrs.get("activation") is not None:  # a ReLU already fused into the Add moves on
        node.attrs["activation"] = add.attrs["activation"]
        if "activation_max" in add.attrs:
            node.attrs["activation_max"] = add.attrs["activation_max"]
    absorb(graph, node, add)
    return True


def apply(graph: Graph) -> bool:
    """Every fusion in one sweep; True when any was made."""
    changed = False
    for node in list(graph.nodes):
        if node.op_type == "MatMul":
            changed |= _matmul_to_gemm(graph, node)
        if node.op_type in ("Conv", "Gemm"):
            changed |= _fuse_add(graph, node)
    return changed
