"""DepthToSpace and SpaceToDepth become convolutions of 0/1 weights.

A pixel shuffle (super-resolution networks' ``DepthToSpace``, PyTorch's
``PixelShuffle``) moves channel ``(dy * b + dx) * C' + c`` (mode DCR) or
``c * b * b + dy * b + dx`` (CRD) of input pixel ``(y, x)`` to channel ``c`` of output
pixel ``(b * y + dy, b * x + dx)``. That is a transposed convolution with kernel and
stride ``b`` whose weight ``W[c_in, c, dy, dx]`` is 1 for that one input channel and 0
for the others: every output pixel takes one tap, one product by 1. ``SpaceToDepth``
(the Focus stem of TensorFlow-exported YOLOs) is the inverse, a convolution with kernel
and stride ``b``. Both are exact in fp32 and on the DLA, which runs them as it runs any
(transposed) convolution (:mod:`accel.compiler.ops.convtranspose`): the weight
quantizes to 127 with a scale of 1/127 and the output, calibrated on the same values,
gets the input's scale. As ops of their own they would run on the CPU and cut the
network.

Matched: a DepthToSpace or SpaceToDepth of a 4-D tensor; its output keeps its name.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph
from tengine_host.passes.edit import add_constant, replace_nodes


def source_channel(c: int, dy: int, dx: int, b: int, channels: int, mode: str) -> int:
    """The deep tensor's channel holding channel ``c`` of pixel offset ``(dy, dx)`` in the
    shallow one (``channels`` of them)."""
    return (dy * b + dx) * channels + c if mode == "DCR" else c * b * b + dy * b + dx


def _weights(shallow: int, b: int, mode: str) -> np.ndarray:
    """``[shallow * b * b, shallow, b, b]``: deep channel by shallow channel and offset."""
    w = np.zeros((shallow * b * b, shallow, b, b), dtype=np.float32)
    for c in range(shallow):
        for dy in range(b):
            for dx in range(b):
                w[source_channel(c, dy, dx, b, shallow, mode), c, dy, dx] = 1.0
    return w


def apply(graph: Graph) -> bool:
    """Replace every DepthToSpace / SpaceToDepth; True when any was replaced."""
    changed = False
    for node in list(graph.nodes):
        if node.op_type not in ("DepthToSpace", "SpaceToDepth"):
            continue
        x = node.inputs[0]
        if len(graph.tensors[x].shape) != 4:
            continue
        b, mode = int(node.attrs["blocksize"]), node.attrs.get("mode", "DCR")
        geometry = {"kernel_shape": [b, b], "strides": [b, b], "pads": [0, 0, 0, 0],
                    "dilations": [1, 1], "group": 1}
        if node.op_type == "DepthToSpace":
            shallow = graph.tensors[x].shape[1] // (b * b)
            w = add_constant(graph, f"{node.name}_shuffle", _weights(shallow, b, mode))
            replace_nodes(graph, [node], "ConvTranspose", [x, w],
                          {**geometry, "output_padding": [0, 0]})
        else:
            shallow = graph.tensors[x].shape[1]
            w = add_constant(graph, f"{node.name}_shuffle", _weights(shallow, b, mode))
            replace_nodes(graph, [node], "Conv", [x, w], geometry)
        changed = True
    return changed
