"""Kernel rows and columns of a convolution that only ever read padding are dropped.

DeepLabV3's ASPP convolves its feature map with dilations 12, 24 and 36 whatever the
input size; on a small map (8 x 8 at a 128-pixel input) the outer taps of a 3x3 kernel
dilated by 36 land in the zero padding for every output pixel, so the layer is a 1x1
convolution of its centre taps. Beyond a dilation of 32 (the DLA's register field) it
would run on the CPU and cut the network. Taps that read only zeros add nothing, so
dropping them leaves every output unchanged (in fp32 exactly: the products were 0).

Matched: a 2-D Conv with a constant weight, whose kernel rows (columns) at the top
and bottom (left and right) read, at every output row (column), an input row (column)
outside the map. The kept taps are the rows ``i0..i1`` between them, so the kernel
stays a dilated grid; its top padding becomes ``pad_top - i0 * dilation`` and its
bottom padding what the output's height needs. Nothing changes when no tap goes or
the remaining paddings would be negative.
"""

from __future__ import annotations

from accel.ir import Graph, Node
from tengine_host.passes.edit import add_constant, constant, drop_unused


def _kept(n: int, out: int, k: int, stride: int, dil: int, pad: int) -> tuple[int, int]:
    """First and last kernel index along one axis that reads inside ``0..n-1`` for some
    output position (``(k, -1)`` when none does)."""
    inside = [i for i in range(k)
              if any(0 <= o * stride - pad + i * dil < n for o in range(out))]
    return (inside[0], inside[-1]) if inside else (k, -1)


def _prune(graph: Graph, node: Node) -> bool:
    a = node.attrs
    w = constant(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    if node.op_type != "Conv" or w is None or w.ndim != 4:
        return False
    _, _, h, wd = graph.tensors[node.inputs[0]].shape
    _, _, oh, ow = graph.tensors[node.outputs[0]].shape
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    t, left, _, _ = a["pads"]
    r0, r1 = _kept(h, oh, kh, sh, dh, t)
    c0, c1 = _kept(wd, ow, kw, sw, dw, left)
    if r1 < r0 or c1 < c0 or (r0, r1, c0, c1) == (0, kh - 1, 0, kw - 1):
        return False
    nkh, nkw = r1 - r0 + 1, c1 - c0 + 1
    nt, nl = t - r0 * dh, left - c0 * dw
    nb = (oh - 1) * sh + (nkh - 1) * dh + 1 - h - nt
    nr = (ow - 1) * sw + (nkw - 1) * dw + 1 - wd - nl
    if min(nt, nl, nb, nr) < 0:
        return False
    node.inputs[1] = add_constant(graph, f"{node.name}_taps", w[:, :, r0:r1 + 1, c0:c1 + 1])
    a["kernel_shape"] = [nkh, nkw]
    a["pads"] = [nt, nl, nb, nr]
    a["dilations"] = [dh if nkh > 1 else 1, dw if nkw > 1 else 1]
    return True


def apply(graph: Graph) -> bool:
    """Prune every such convolution; True when any changed."""
    changed = False
    for node in list(graph.nodes):
        changed |= _prune(graph, node)
    if changed:
        drop_unused(graph)
    return changed
