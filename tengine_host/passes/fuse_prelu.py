"""Fuse ``PRelu`` / ``LeakyRelu`` into the Conv/Gemm/Add feeding it.

NVDLA's SDP multiplier has a PReLU mode (negative values times a per-channel
slope), so a convolution followed by a PReLU is one hardware operation.  The
fused forms are ``attrs["activation"] = "PRelu"`` with
``attrs["activation_slope"]`` (float32, one slope per output channel) and
``"LeakyRelu"`` with ``attrs["activation_alpha"]``.  A PRelu fuses only when
its slope is a constant that varies at most along the output channel axis
(a scalar, ``[K, 1, 1]``, ``[1, K, 1, 1]``, ``[K]`` after a Gemm).  As in
:mod:`~tengine_host.passes.fuse_activation`, the producer must have no fused
activation, the activation must be the only reader of its output, which must
not be a graph output, and the producer takes over the activation's output
name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import constant, drop_unused, per_channel, sole_consumer

# an Add's PReLU runs in the SDP pass that sums (MediaPipe's residual blocks)
PRODUCERS = ("Conv", "Gemm", "Add")


def _fused_attrs(graph: Graph, act: Node, k: int, rank: int) -> dict | None:
    """The producer attributes that express ``act``, or None when it cannot fuse."""
    if act.op_type == "LeakyRelu":
        return {"activation": "LeakyRelu",
                "activation_alpha": float(act.attrs.get("alpha", 0.01))}
    if act.op_type != "PRelu" or len(act.inputs) != 2:
        return None
    slope = constant(graph, act.inputs[1])
    vec = None if slope is None else per_channel(slope, k, rank)
    if vec is None:
        return None
    return {"activation": "PRelu", "activation_slope": vec.astype(np.float32)}


def apply(graph: Graph) -> bool:
    """Fuse every fusable PRelu / LeakyRelu in one sweep; True when any was fused."""
    changed = False
    for act in list(graph.nodes):
        if act.op_type not in ("PRelu", "LeakyRelu"):
            continue
        src = act.inputs[0]
        producer = graph.producer(src)
        if (producer is None or producer.op_type not in PRODUCERS
                or producer.attrs.get("activation") is not None
                or sole_consumer(graph, src) is not act or act.inputs.count(src) != 1):
            continue
        shape = graph.tensors[src].shape
        if tuple(graph.tensors[act.outputs[0]].shape) != tuple(shape):
            continue
        attrs = _fused_attrs(graph, act, int(shape[1]), len(shape))
        if attrs is None:
            continue
        producer.attrs.update(attrs)
        producer.outputs = [act.outputs[0] if t == src else t for t in producer.outputs]
        graph.nodes.remove(act)
        graph.tensors.pop(src, None)
        drop_unused(graph)     # the slope constant, unless another node reads it
        changed = True
    return changed

