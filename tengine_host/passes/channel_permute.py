"""Reshape / Transpose chains that only reorder channels become a 1x1 convolution.

ShuffleNet's channel shuffle is ``Reshape [N, g, C/g, H, W] -> Transpose(0, 2, 1, 3, 4)
-> Reshape [N, C, H, W]``: channel ``k`` of the result is channel ``p[k]`` of the input.
The DLA holds NCHW cubes and has no transpose engine on nv_small, so the 5-D tensors
would go to the CPU and cut every block of the network in two. A reordering of channels
is a 1x1 convolution whose weight row ``k`` is 1 at ``p[k]`` and 0 elsewhere: exact in
fp32 (one product by 1, the rest add 0), and on the DLA too, where the weight quantizes
to 127 with a scale of 1/127 and the output, calibrated on the same values, gets the
input's scale.

Matched, by what the chain computes rather than by its ops: from a 4-D tensor, a run of
Reshape and Transpose nodes (each the only reader of the previous one's output, none a
graph output) ending in a tensor of the same 4-D shape, such that every element of the
result is the input's element at the same batch, row and column of a channel that
depends on the output channel only. The map is worked out on the element indices
themselves, so any spelling of the shuffle (5-D, 4-D over ``H * W``, a Transpose
back, several groups) is caught and nothing else is.
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node
from tengine_host.ops.reshape import target_shape
from tengine_host.passes.edit import add_constant, constant, replace_nodes, sole_consumer

#: Longest Reshape / Transpose chain looked at.
MAX_CHAIN = 4
#: Largest tensor (elements) whose index map is computed.
MAX_ELEMENTS = 1 << 24


def _step(graph: Graph, node: Node, idx: np.ndarray) -> np.ndarray | None:
    """``idx`` carried through ``node`` (a Reshape or Transpose), or None."""
    if node.op_type == "Transpose":
        perm = node.attrs.get("perm")
        return idx.transpose(perm) if perm is not None else idx.transpose()
    target = constant(graph, node.inputs[1])
    if target is None:
        return None
    try:
        shape = target_shape(idx.shape, target, node.attrs.get("allowzero", 0))
    except ValueError:
        return None
    return idx.reshape(shape)


def channel_order(graph: Graph, chain: list[Node], shape: tuple[int, ...]) -> np.ndarray | None:
    """``p`` with ``out[:, k] == x[:, p[k]]`` when ``chain`` (from an ``x`` of 4-D ``shape``
    to an output of the same shape) only reorders channels, else None."""
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for node in chain:
        idx = _step(graph, node, idx)
        if idx is None:
            return None
    if idx.shape != shape:
        return None
    _, c, h, w = shape
    p = idx[0, :, 0, 0] // (h * w)
    if sorted(p.tolist()) != list(range(c)) or np.array_equal(p, np.arange(c)):
        return None
    want = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[:, p]
    return p if np.array_equal(idx, want) else None


def _chain_from(graph: Graph, first: Node, shape: tuple[int, ...]) -> list[Node] | None:
    chain = [first]
    while len(chain) <= MAX_CHAIN:
        out = chain[-1].outputs[0]
        if len(chain) > 1 and tuple(graph.tensors[out].shape) == shape:
            return chain
        nxt = sole_consumer(graph, out)
        if nxt is None or nxt.op_type not in ("Reshape", "Transpose") or nxt.inputs[0] != out:
            return None
        chain.append(nxt)
    return None


def apply(graph: Graph) -> bool:
    """Replace every channel-reordering chain; True when any was replaced."""
    changed = False
    replaced: set[int] = set()        # nodes of chains already replaced
    for node in list(graph.nodes):
        if node.op_type not in ("Reshape", "Transpose") or id(node) in replaced:
            continue
        x = node.inputs[0]
        shape = tuple(graph.tensors[x].shape)
        if len(shape) != 4 or graph.is_constant(x) or int(np.prod(shape)) > MAX_ELEMENTS:
            continue
        chain = _chain_from(graph, node, shape)
        p = None if chain is None else channel_order(graph, chain, shape)
        if p is None:
            continue
        c = shape[1]
        weight = np.zeros((c, c, 1, 1), dtype=np.float32)
        weight[np.arange(c), p] = 1.0
        w = add_constant(graph, f"{chain[-1].name}_permutation", weight)
        replaced.update(id(n) for n in chain)
        replace_nodes(graph, chain, "Conv", [x, w],
                      {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0],
                       "dilations": [1, 1], "group": 1})
        changed = True
    return changed
