"""Fold an activation into the Conv/Gemm/Add feeding it.

NVDLA applies ReLU in the SDP right after the convolution (or the
element-wise sum), so the fused form is what the accelerator compiler lowers:
``attrs["activation"] = "Relu"``.  ``Clip(x, 0)`` without an upper bound is a
ReLU too.  ``Clip(x, 0, hi)`` (ReLU6 and its kin) fuses into a Conv or Gemm as
``activation = "Clip"`` with ``activation_max = hi``: the SDP's ReLU plus an
X2 minimum.  The producer takes over the activation's output name (the
pre-activation tensor disappears), which keeps graph outputs and the
calibration table's names valid.
"""

from __future__ import annotations

import math

from accel.ir import Graph, Node
from tengine_host.passes.edit import constant

FUSABLE_PRODUCERS = ("Conv", "Gemm", "Add")
CLIP_PRODUCERS = ("Conv", "Gemm")


def clip_bounds(graph: Graph, node: Node) -> tuple[float | None, float | None]:
    """``(lo, hi)`` of a ``Clip``: None for an absent bound, NaN for a non-constant one."""
    return _bound(graph, node, 1, "min"), _bound(graph, node, 2, "max")


def _bound(graph: Graph, node: Node, index: int, attr: str) -> float | None:
    """A Clip bound (input ``index`` from opset 11, attribute ``attr`` before), or None."""
    if len(node.inputs) > index and node.inputs[index]:
        v = constant(graph, node.inputs[index])
        return math.nan if v is None or v.size != 1 else float(v)
    v = node.attrs.get(attr)
    return None if v is None else float(v)


def is_relu(graph: Graph, node: Node) -> bool:
    """``Relu``, or a ``Clip`` with lower bound 0 and no (or an infinite) upper bound."""
    if node.op_type == "Relu":
        return True
    if node.op_type != "Clip":
        return False
    lo, hi = clip_bounds(graph, node)
    return lo == 0.0 and (hi is None or hi == math.inf)


def relu_cap(graph: Graph, node: Node) -> float | None:
    """The upper bound ``hi`` of a ``Clip(x, 0, hi)`` with a finite, positive ``hi``."""
    if node.op_type != "Clip":
        return None
    lo, hi = clip_bounds(graph, node)
    if lo == 0.0 and hi is not None and math.isfinite(hi) and hi > 0:
        return hi
    return None


def apply(graph: Graph) -> bool:
    """Fuse every fusable activation in one sweep; True when any was fused."""
    changed = False
    for act in list(graph.nodes):
        cap = None if is_relu(graph, act) else relu_cap(graph, act)
        if cap is None and not is_relu(graph, act):
            continue
        src = act.inputs[0]
        producer = graph.producer(src)
        allowed = FUSABLE_PRODUCERS if cap is None else CLIP_PRODUCERS
        if (producer is None or producer.op_type not in allowed
                or producer.attrs.get("activation") is not None
                or len(graph.consumers(src)) != 1 or src in graph.outputs):
            continue
        if cap is None:
            producer.attrs["activation"] = "Relu"
        else:
            producer.attrs["activation"] = "Clip"
            producer.attrs["activation_max"] = cap
        producer.outputs = [act.outputs[0] if t == src else t for t in producer.outputs]
        graph.nodes.remove(act)
        graph.tensors.pop(src, None)
        changed = True
    return changed
