"""One-dimensional layers (``[N, C, L]`` tensors) become two-dimensional ones of height 1.

Audio and time-series networks (keyword spotting, ECG, TCNs) are ``Conv1d``,
``BatchNorm1d``, ``MaxPool1d`` and activations over ``[N, C, L]`` tensors. The DLA
holds NCHW cubes, and an ``L``-long sequence is a ``C x 1 x L`` cube: a 1-D
convolution with kernel ``k`` is the 2-D one with kernel ``1 x k`` on it, the same
products in the same order. So every such node is rewritten onto ``[N, C, 1, L]``
tensors (window attributes gain a unit first axis, a weight ``[K, C, k]`` becomes
``[K, C, 1, k]``, per-channel constants ``[C, 1]`` become ``[C, 1, 1]``), an
``Unsqueeze`` lifts each 3-D tensor that comes from elsewhere (a graph input, a node
left as it is) and a ``Squeeze`` gives it back under its own name where something
else reads it (a graph output, a node left as it is).

Lifted: Conv, ConvTranspose, MaxPool, AveragePool (without indices), BatchNormalization,
GlobalAveragePool, GlobalMaxPool, Concat, Flatten (axis 1), the element-wise functions
of one tensor, and Add, Sub, Mul, Div, Max, Min, PRelu whose operands are lifted
tensors or constants - every one of them whose tensors (but constants) are all 3-D and
that is connected through them to a convolution or pooling (a transformer's
element-wise ops over ``[N, T, D]`` tokens stay as they are).
"""

from __future__ import annotations

import numpy as np

from accel.ir import Graph, Node, Tensor
from tengine_host.passes.edit import (
    add_constant,
    constant,
    drop_unused,
    fresh_name,
    fresh_node_name,
)

_WINDOWED = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"}
_UNARY = {"Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Swish",
          "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "Abs", "Neg",
          "BatchNormalization", "GlobalAveragePool", "GlobalMaxPool", "Identity"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"}


def _activations(graph: Graph, node: Node) -> list[str]:
    return [t for t in (*node.inputs, *node.outputs) if t and not graph.is_constant(t)]


def _liftable(graph: Graph, node: Node) -> bool:
    op = node.op_type
    if op not in _WINDOWED | _UNARY | _BINARY | {"Concat", "Flatten"}:
        return False
    if op == "MaxPool" and len([t for t in node.outputs if t]) > 1:
        return False
    if op == "Flatten":
        return len(graph.tensors[node.inputs[0]].shape) == 3 and node.attrs.get("axis") == 1
    if op in _BINARY and any(graph.is_constant(t) and np.ndim(constant(graph, t)) > 3
                             for t in node.inputs):
        return False
    return all(len(graph.tensors[t].shape) == 3 for t in _activations(graph, node))


def _lift_attrs(node: Node) -> None:
    a = node.attrs
    if node.op_type in _WINDOWED:
        for key in ("kernel_shape", "strides", "dilations"):
            if key in a:
                a[key] = [1, *a[key]]
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
        if "output_padding" in a:
            a["output_padding"] = [0, *a["output_padding"]]
    elif node.op_type == "Concat":
        a["axis"] = a["axis"] if a["axis"] in (0, 1, -1) else (3 if a["axis"] == 2 else -3)


def _lift_constant(graph: Graph, node: Node, i: int) -> None:
    """A constant operand of a lifted node: a weight gains its kernel's unit axis, an
    operand broadcast against ``[N, C, L]`` one before its last axis."""
    value = constant(graph, node.inputs[i])
    if value is None or np.ndim(value) < 2 or (node.op_type in _WINDOWED and i != 1):
        return
    if node.op_type in _WINDOWED and i == 1:
        lifted = value[:, :, None, :]
    else:
        lifted = np.expand_dims(value, np.ndim(value) - 1)
    node.inputs[i] = add_constant(graph, f"{node.inputs[i]}_2d", lifted)


def _with_windows(graph: Graph, nodes: list[Node]) -> list[Node]:
    """The nodes connected through 3-D tensors to a convolution or pooling among them:
    a transformer's element-wise ops over ``[N, T, D]`` tokens are not a sequence's
    layers, and lifting them alone would only add reshapes."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        while parent.setdefault(t, t) != t:
            t = parent[t]
        return t

    for n in nodes:
        ts = [t for t in _activations(graph, n) if len(graph.tensors[t].shape) == 3]
        for t in ts[1:]:
            parent[find(t)] = find(ts[0])
    windowed = {find(n.inputs[0]) for n in nodes if n.op_type in _WINDOWED}
    return [n for n in nodes if find(n.inputs[0]) in windowed]


def apply(graph: Graph) -> bool:
    """Lift every liftable node connected to a 1-D convolution or pooling; True when any
    was."""
    lifted = _with_windows(graph, [n for n in graph.nodes if _liftable(graph, n)])
    if not lifted:
        return False
    ids = {id(n) for n in lifted}
    flat = {t for n in lifted for t in _activations(graph, n)
            if n.op_type != "Flatten" or t == n.inputs[0]}
    twod: dict[str, str] = {}
    for t in flat:
        twod[t] = fresh_name(graph, f"{t}_2d")
        n, c, length = graph.tensors[t].shape
        graph.tensors[twod[t]] = Tensor(twod[t], (n, c, 1, length), graph.tensors[t].dtype)
    nodes: list[Node] = []
    for node in graph.nodes:
        if id(node) in ids:
            for i, t in enumerate(node.inputs):
                if t in twod:
                    node.inputs[i] = twod[t]
                elif t and graph.is_constant(t):
                    _lift_constant(graph, node, i)
            node.outputs = [twod.get(t, t) for t in node.outputs]
            _lift_attrs(node)
        nodes.append(node)
    # where each 3-D tensor comes from and goes to outside the lifted nodes
    produced = {t for n in lifted for t in n.outputs}
    read_outside = {t for n in nodes if id(n) not in ids for t in n.inputs}
    head, tail = [], []
    for t, t2 in twod.items():
        if t2 not in produced:           # a graph input or a node left as it is
            head.append((t, t2))
        elif t in read_outside or t in graph.outputs:
            tail.append((t, t2))
    out: list[Node] = []
    for node in nodes:
        if id(node) in ids:
            for t, t2 in head:
                if t2 in node.inputs and not any(t2 in n.outputs for n in out):
                    out.append(Node(fresh_node_name(graph, f"{t}_lift"), "Unsqueeze", [t],
                                    [t2], {"axes": [2]}))
        out.append(node)
        for t, t2 in tail:
            if t2 in node.outputs:
                out.append(Node(fresh_node_name(graph, f"{t}_drop"), "Squeeze", [t2], [t],
                                {"axes": [2]}))
    graph.nodes = out
    drop_unused(graph)
    return True
