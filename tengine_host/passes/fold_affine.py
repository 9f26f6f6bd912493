"""Fold a constant affine op (``Mul``, ``Add``, ``Sub``, ``Div``) into the Conv/Gemm feeding it.

``conv(x, W) + B`` followed by ``* s`` and ``+ t`` (``s``, ``t`` scalars or one
value per output channel) is ``conv(x, W * s) + (B * s + t)``: NVDLA then runs
one convolution instead of a convolution and two SDP passes.  PP-OCRv4's
learnable affine blocks (``Conv -> Mul(scale) -> Add(bias)``) disappear this
way, like a BatchNormalization.

The folded forms are ``Mul``/``Add`` with the constant on either side, and
``conv - c``, ``conv / c`` (``c - conv`` and ``c / conv`` are not affine in the
same way and stay).  The producer must have no fused activation (an affine
op after an activation does not commute with it) and the affine op must be the
only reader of its output.  The fold happens in float64 and is stored in new
float32 constants (the old ones may be shared); the producer takes over the
affine op's output name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import (
    absorb,
    add_constant,
    constant,
    move_activation,
    per_channel,
    sole_consumer,
)

PRODUCERS = ("Conv", "Gemm")
AFFINE = ("Mul", "Add", "Sub", "Div")


def foldable_producer(graph: Graph, node: Node) -> bool:
    """A Conv/Gemm without a fused activation whose weights and bias are constants."""
    if node.op_type not in PRODUCERS or node.attrs.get("activation") is not None:
        return False
    if constant(graph, node.inputs[1]) is None:
        return False
    if len(node.inputs) > 2 and node.inputs[2] and constant(graph, node.inputs[2]) is None:
        return False
    return graph.tensors[node.outputs[0]].dtype == np.float32


def channels(graph: Graph, node: Node) -> tuple[int, int]:
    """(output channels, output rank) of a Conv/Gemm: channels are on axis 1."""
    shape = graph.tensors[node.outputs[0]].shape
    return int(shape[1]), len(shape)


def scale_shift(graph: Graph, node: Node, scale: np.ndarray, shift: np.ndarray,
                tag: str) -> bool:
    """Make ``node`` (a foldable Conv/Gemm) compute ``node(x) * scale + shift``.

    ``scale`` and ``shift`` are float64 [K] vectors (K output channels).  New
    weight and bias constants replace the node's; a missing bias is created.
    False (and nothing changed) when the folded values overflow float32.
    """
    w = np.asarray(constant(graph, node.inputs[1]), np.float64)
    old_b = constant(graph, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    k = scale.shape[0]
    if node.op_type == "Conv":
        new_w = w * scale.reshape(k, *([1] * (w.ndim - 1)))
        b = np.zeros(k) if old_b is None else np.asarray(old_b, np.float64).reshape(-1)
        new_b = b * scale + shift
    else:
        # Gemm: alpha * A' @ B' + beta * C, output channels are B's columns (rows if transB)
        new_w = w * (scale.reshape(k, 1) if node.attrs.get("transB", 0) else scale)
        beta = float(node.attrs.get("beta", 1.0))
        c = np.zeros(k) if old_b is None else beta * np.asarray(old_b, np.float64)
        new_b = c * scale + shift      # broadcasts over the last (channel) axis of C
    with np.errstate(over="ignore"):
        if not (np.all(np.isfinite(new_w.astype(np.float32)))
                and np.all(np.isfinite(new_b.astype(np.float32)))):
            return False
    if node.op_type == "Gemm":
        node.attrs["beta"] = 1.0
    wname = add_constant(graph, f"{node.name}_{tag}_weight", new_w)
    bname = add_constant(graph, f"{node.name}_{tag}_bias", new_b)
    node.inputs = [node.inputs[0], wname, bname]
    return True


def affine_of(graph: Graph, producer: Node, op: Node) -> tuple[np.ndarray, np.ndarray] | None:
    """``(scale, shift)`` per output channel when ``op`` is a foldable affine op of
    ``producer``'s output, else ``None``."""
    if op.op_type not in AFFINE or len(op.inputs) != 2:
        return None
    src = producer.outputs[0]
    if op.inputs.count(src) != 1:
        return None
    pos = op.inputs.index(src)
    if op.op_type in ("Sub", "Div") and pos != 0:
        return None  # c - conv, c / conv
    value = constant(graph, op.inputs[1 - pos])
    if value is None or not np.issubdtype(np.asarray(value).dtype, np.floating):
        return None
    if tuple(graph.tensors[op.outputs[0]].shape) != tuple(graph.tensors[src].shape):
        return None  # the constant would broadcast the output to a larger shape
    k, rank = channels(graph, producer)
    c = per_channel(value, k, rank)
    if c is None or not np.all(np.isfinite(c)):
        return None
    one, zero = np.ones(k), np.zeros(k)
    if op.op_type == "Mul":
        return c, zero
    if op.op_type == "Add":
        return one, c
    if op.op_type == "Sub":
        return one, -c
    if np.any(c == 0):
        return None
    return 1.0 / c, zero


def apply(graph: Graph) -> bool:
    """Fold every foldable affine op in one sweep; True when any was folded."""
    changed = False
    for node in list(graph.nodes):
        if not foldable_producer(graph, node):
            continue
        while True:      # a chain (Mul then Add) folds op after op
            op = sole_consumer(graph, node.outputs[0])
            ab = None if op is None else affine_of(graph, node, op)
            if ab is None or not scale_shift(graph, node, *ab, tag=op.op_type.lower()):
                break
            move_activation(op, node)   # a ReLU fused into the Add comes along
            absorb(graph, node, op)
            changed = True
            if node.attrs.get("activation") is not None:
                break
    return changed
