"""Fold an inference-mode ``BatchNormalization`` into the ``Conv`` feeding it.

``y = k * (conv(x, W) + B - mean) + beta`` with ``k = gamma / sqrt(var + eps)``
is ``conv(x, W * k[:, None, None, None]) + (B - mean) * k + beta``: NVDLA runs
it as one convolution (the compiler's BN sub-engine is not needed).  The fold
happens in float64 and is stored as float32.  The Conv takes over the BN's
output name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph
from tengine_host.passes.edit import absorb, add_constant, constant, sole_consumer


def apply(graph: Graph) -> bool:
    """Fold every Conv -> BatchNormalization pair in one sweep; True when any was folded."""
    changed = False
    for conv in list(graph.nodes):
        if conv.op_type != "Conv" or conv.attrs.get("activation") is not None:
            continue
        w = constant(graph, conv.inputs[1])
        b = constant(graph, conv.inputs[2]) if len(conv.inputs) > 2 else None
        if w is None or (len(conv.inputs) > 2 and conv.inputs[2] and b is None):
            continue
        bn = sole_consumer(graph, conv.outputs[0])
        if bn is None or bn.op_type != "BatchNormalization" or bn.inputs[0] != conv.outputs[0]:
            continue
        if bn.attrs.get("training_mode") or any(t for t in bn.outputs[1:]):
            continue
        params = [constant(graph, t) for t in bn.inputs[1:5]]
        if any(p is None for p in params):
            continue
        gamma, beta, mean, var = (np.asarray(p, np.float64) for p in params)
        k = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
        bias = np.zeros(w.shape[0]) if b is None else np.asarray(b, np.float64)
        new_w = (np.asarray(w, np.float64) * k.reshape(-1, *([1] * (w.ndim - 1))))
        new_b = (bias - mean) * k + beta
        conv.inputs = [conv.inputs[0], add_constant(graph, f"{conv.name}_bn_weight", new_w),
                       add_constant(graph, f"{conv.name}_bn_bias", new_b)]
        absorb(graph, conv, bn)
        changed = True
    return changed
