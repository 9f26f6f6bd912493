"""Fold a ``HardSigmoid`` into the Conv/Gemm feeding it.

``HardSigmoid(y; alpha, beta) = clip(alpha * y + beta, 0, 1)``, and with
``y = conv(x, W) + B`` that is ``clip(conv(x, alpha * W) + alpha * B + beta, 0, 1)``:
the convolution with rescaled weights and bias, then the capped ReLU NVDLA
already fuses (``activation = "Clip"``, ``activation_max = 1.0``).  The
squeeze-excite gates of MobileNetV3 and PP-OCR (``1x1 conv -> HardSigmoid``)
become one hardware operation.  Only with ``alpha > 0`` (a negative alpha
flips the clip) and no activation already fused; the HardSigmoid must be the
only reader of the convolution's output, which must not be a graph output.
The producer takes over the HardSigmoid's output name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph
from tengine_host.passes.edit import absorb, sole_consumer
from tengine_host.passes.fold_affine import channels, foldable_producer, scale_shift


def apply(graph: Graph) -> bool:
    """Fold every foldable HardSigmoid in one sweep; True when any was folded."""
    changed = False
    for node in list(graph.nodes):
        if not foldable_producer(graph, node):
            continue
        hs = sole_consumer(graph, node.outputs[0])
        if hs is None or hs.op_type != "HardSigmoid":
            continue
        alpha, beta = float(hs.attrs.get("alpha", 0.2)), float(hs.attrs.get("beta", 0.5))
        if not (alpha > 0 and np.isfinite(alpha) and np.isfinite(beta)):
            continue
        k, _ = channels(graph, node)
        if not scale_shift(graph, node, np.full(k, alpha), np.full(k, beta), tag="hardsigmoid"):
            continue
        node.attrs["activation"] = "Clip"
        node.attrs["activation_max"] = 1.0
        absorb(graph, node, hs)
        changed = True
    return changed
