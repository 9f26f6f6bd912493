"""Fold a Transpose in front of Flatten -> Gemm into the Gemm's weights.

Models converted from TensorFlow / Caffe-style layouts often flatten a conv trunk
in another axis order: MTCNN's ONet ends with ``Transpose(perm=0,3,2,1) ->
Reshape(1, -1) -> Gemm 1152 -> 256`` over a 128 x 3 x 3 cube.  The DLA reads a
fully-connected layer's input as the cube its producer wrote (no Transpose
engine), so the Transpose would run on the CPU and cut the network in two.

Flattening the transposed tensor only reorders the Gemm's input features: with
``idx`` the position in the flattening of ``x`` of each feature of the flattening
of ``transpose(x, perm)``, ``flat(transpose(x)) = flat(x)[:, idx]`` and so
``flat(transpose(x)) @ B = flat(x) @ B'`` with ``B'[idx] = B`` (the rows of the
``[D, K]`` operand, columns of a ``transB`` weight).  The Transpose goes, the
Flatten / Reshape reads ``x`` (its output keeps its name and shape) and the Gemm
gets the permuted weight as a new constant.

Matched: a Transpose whose ``perm`` keeps the batch axis first, read only by a
Flatten (axis 1) or a Reshape to ``[N, D]``, read only as the Gemm's first input
(``transA=0``, constant 2-D weight).  A ``MatMul`` with a constant weight is such
a Gemm once :mod:`.fuse_bias` has turned it into one.  Nothing changes when the
transposed or the flattened tensor has another reader or is a graph output;
``x`` itself may have other readers (it is not changed).
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node
from tengine_host.ops.reshape import target_shape
from tengine_host.passes.edit import add_constant, constant, drop_unused, sole_consumer


def feature_order(shape: tuple[int, ...], perm: list[int]) -> np.ndarray:
    """For each feature of ``transpose(x, perm)`` flattened from axis 1, its index in
    ``x`` flattened from axis 1 (``x`` of ``shape``, ``perm[0] == 0``).

    >>> feature_order((1, 2, 3), [0, 2, 1]).tolist()
    [0, 3, 1, 4, 2, 5]
    """
    inner = [p - 1 for p in perm[1:]]
    return np.arange(int(np.prod(shape[1:], dtype=np.int64))).reshape(shape[1:]) \
        .transpose(inner).reshape(-1)


def _flattens(graph: Graph, node: Node, src: tuple[int, ...]) -> bool:
    """A Flatten (axis 1) or Reshape writing ``[N, D]``, which it still writes when it
    reads a tensor of shape ``src`` (same batch and size) instead."""
    dst = tuple(graph.tensors[node.outputs[0]].shape)
    if dst != (src[0], int(np.prod(src[1:], dtype=np.int64))):
        return False
    if node.op_type == "Flatten":
        return node.attrs.get("axis", 1) in (1, 1 - len(src))
    target = constant(graph, node.inputs[1]) if node.op_type == "Reshape" else None
    try:
        return target is not None and \
            target_shape(src, target, node.attrs.get("allowzero", 0)) == dst
    except ValueError:
        return False


def _permuted_weight(graph: Graph, gemm: Node, order: np.ndarray) -> np.ndarray | None:
    """The Gemm's weight reading ``flat(x)`` instead of ``flat(x)[:, order]``, or None."""
    w = constant(graph, gemm.inputs[1])
    if w is None or w.ndim != 2:
        return None
    transb = bool(gemm.attrs.get("transB", 0))
    if (w.shape[1] if transb else w.shape[0]) != order.size:
        return None
    out = np.empty_like(w)
    if transb:
        out[:, order] = w
    else:
        out[order] = w
    return out


def apply(graph: Graph) -> bool:
    """Fold every Transpose -> Flatten -> Gemm chain in one sweep; True when any was."""
    changed = False
    for tr in list(graph.nodes):
        if tr.op_type != "Transpose" or graph.is_constant(tr.inputs[0]):
            continue
        shape = tuple(graph.tensors[tr.inputs[0]].shape)
        perm = tr.attrs.get("perm")
        perm = list(range(len(shape)))[::-1] if perm is None else perm
        if len(shape) < 2 or perm[0] != 0:
            continue
        flat = sole_consumer(graph, tr.outputs[0])
        if flat is None or flat.inputs[0] != tr.outputs[0] or not _flattens(graph, flat, shape):
            continue
        gemm = sole_consumer(graph, flat.outputs[0])
        if gemm is None or gemm.op_type != "Gemm" or gemm.attrs.get("transA", 0) \
                or gemm.inputs.count(flat.outputs[0]) != 1 or gemm.inputs[0] != flat.outputs[0]:
            continue
        w = _permuted_weight(graph, gemm, feature_order(shape, perm))
        if w is None:
            continue
        gemm.inputs[1] = add_constant(graph, f"{gemm.name}_unpermuted_weight", w)
        flat.inputs[0] = tr.inputs[0]
        graph.nodes.remove(tr)
        drop_unused(graph)
        changed = True
    return changed
