"""Equalization of channel groups: tensors tied channel by channel, scaled by their data.

Weight-based equalization (:mod:`tengine_host.quant.equalize`) balances a
producer -> consumer pair through the single tensor between them.  A residual
network's stream is not such a tensor: ``x`` feeds a depthwise convolution and
the sum ``x + conv(dw(x))``, the sum feeds the next block, max pooling and
channel padding carry it on.  Tensors that hold channel ``k`` of the same
quantity can only be rescaled together: dividing channel ``k`` of each by
``s_k`` needs

* every layer that writes into the group to divide its output channel ``k``
  by ``s_k``: a Conv whose output is a member in its weights and bias, a
  HardSwish (not homogeneous: ``hswish(x / s) != hswish(x) / s``) by a factor
  per output channel (its ``channel_scale``), which the DLA applies in the
  multiplier its product leaves free (:mod:`accel.compiler.ops.activation`);
* every layer that reads the group to multiply its input channel ``k`` by
  ``s_k``: a Conv whose data input is a member in its weights, a HardSwish by
  a factor per input channel (its ``input_scale``, in the gate's multiplier and
  the product's);
* every op inside the group to commute with a positive per-channel scale: Add,
  ReLU / LeakyReLU / PReLU (standalone or fused), max and average pooling,
  Resize, and ops that move channels: zero padding, Concat and Split on
  channels (each tensor's channels sit at an offset of the group's).

A residual sum need not tie its inputs, though: the DLA brings its main input
onto the other's grid with X1's multiplier, which may differ per channel
(:func:`accel.compiler.ops.sdp_math.binary`).  So a sum (ReLU fused at most)
whose branch - the input a convolution or HardSwish writes for it alone - is
the operand reads the stream as a reader (``input_scale`` times ``s_k``) and
writes the group of its branch and output as a writer (``input_scale`` divided
by that group's ``s_k``): a stream is cut into one group per block, each with
its own scales.

A group is found by following these ops from a tensor; it is refused when it
reaches a graph input or output, or any other kind of reader or writer.

Weights are quantized per output channel, so the writers' rescaled rows and a
depthwise reader's rescaled channels lose nothing; a full convolution reading
the group keeps its rows' scales and its shrunken columns lose relative
precision.  The activations gain: one per-tensor int8 scale serves channels whose
ranges differ tens of times (a stream's "outlier channels" persist from block to
block).  So the scales come from the data: ``r_k`` is channel ``k``'s largest
``|x|`` relative to its tensor's largest, the most over the group's tensors (on
the calibration samples), and ``s_k = r_k`` (at least :data:`FLOOR`; 1 for a
channel that is zero everywhere): a channel that is small in every tensor is
magnified to the tensor's full range, and no tensor's range grows.

A group that is one tensor between two Convs is a pair, left to the
weight-based equalization unless asked for (``pairs``: its tensor scaled by
its data as well; the held-out check weighs that against the weights' scales
alone: it evens BlazeFace's depthwise outputs, while a text detector's full
convolutions lose more weight bits than their inputs gain).  The tensors around
a HardSwish are where per-tensor int8 loses most on HardSwish networks
(PP-LCNet, PicoDet): their channels' ranges differ by tens of times and no
weight rewrite reaches them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import constant, drop_unused
from tengine_host.quant.equalize import HOMOGENEOUS_ACTIVATIONS, scale_inputs, scale_outputs
from tengine_host.quant.layers import Layer, read_layer, write_layer

#: the smallest scale: a full convolution reading the group loses at most 4 bits of a
#: weight column's resolution
FLOOR = 1 / 16

#: ops whose output channel ``k`` depends on one input channel alone and commutes with a
#: positive scale of it (Pad only with a zero constant; Concat, Split on channels)
_MEMBER_OPS = ("Add", "Relu", "LeakyRelu", "PRelu", "MaxPool", "AveragePool", "Pad", "Resize",
               "Concat", "Split")


@dataclass(frozen=True)
class ChannelGroup:
    """Tensors that share a channel scale.

    ``offsets[t]`` places tensor ``t``'s channel ``c`` at group channel
    ``offsets[t] + c`` (channel padding shifts it); ``channels`` is the group's
    width.  ``writers`` are the Conv and HardSwish nodes writing a member,
    ``readers`` the Conv and HardSwish nodes reading one (with the member they
    read).
    """

    key: str
    offsets: Mapping[str, int]
    channels: int
    writers: tuple[str, ...]
    readers: tuple[tuple[str, str], ...]


def _channel_pad(graph: Graph, node: Node) -> int | None:
    """A zero Pad's leading channel pad (what it adds in front of channel 0), or None
    when ``node`` is not a zero-constant Pad of an NCHW tensor."""
    if node.attrs.get("mode", "constant") != "constant":
        return None
    pads = constant(graph, node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else \
        node.attrs.get("pads")
    value = constant(graph, node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else 0
    if pads is None or value is None or np.any(np.asarray(value) != 0):
        return None
    pads = np.asarray(pads, np.int64).reshape(-1)
    rank = len(pads) // 2
    if rank != 4 or pads[0] or pads[rank] or np.any(pads < 0):
        return None
    return int(pads[1])


def _stacked(graph: Graph, tensors: list[str]) -> list[int]:
    """Where each of ``tensors`` starts when they are stacked on channels."""
    widths = [int(graph.tensors[t].shape[1]) for t in tensors]
    return [int(v) for v in np.cumsum([0, *widths[:-1]])]


def _channel_map(graph: Graph, node: Node) -> tuple[dict[str, int], dict[str, int]] | None:
    """``(inputs, outputs)``: where each data input's and output's channel 0 sits in the
    node's own channel frame, for a member op (see :data:`_MEMBER_OPS`); None for any
    other node, or one that does not keep channels apart."""
    op = node.op_type
    if op not in _MEMBER_OPS or any(len(graph.tensors[t].shape) != 4
                                    for t in (*node.inputs[:1], *node.outputs) if t):
        return None
    data = list(node.inputs) if op in ("Add", "Concat") else node.inputs[:1]
    outs = [t for t in node.outputs if t]
    ins = dict.fromkeys(data, 0)
    if op == "PRelu" and not graph.is_constant(node.inputs[1]):
        return None
    if op == "Add" and (len({tuple(graph.tensors[t].shape) for t in data}) != 1 or
                        node.attrs.get("activation") not in HOMOGENEOUS_ACTIVATIONS):
        return None
    if op == "Pad":
        front = _channel_pad(graph, node)
        if front is None:
            return None
        ins = {data[0]: front}
    if op in ("Concat", "Split") and node.attrs.get("axis", 0) not in (1, -3):
        return None
    if op == "Concat":
        if len(set(data)) != len(data):        # one tensor at two places
            return None
        ins = dict(zip(data, _stacked(graph, data), strict=True))
    if op == "Split":
        return ins, dict(zip(outs, _stacked(graph, outs), strict=True))
    return ins, dict.fromkeys(outs, 0)


def _is_writer(graph: Graph, node: Node) -> bool:
    """A node that can divide its output channels: a Conv (:func:`_is_conv`) or a
    HardSwish."""
    return _is_conv(graph, node) or node.op_type == "HardSwish"


def _is_conv(graph: Graph, node: Node) -> bool:
    """A Conv with constant weights (and bias) and an activation that commutes."""
    return (node.op_type == "Conv" and node.attrs.get("activation") in HOMOGENEOUS_ACTIVATIONS
            and all(graph.is_constant(t) for t in node.inputs[1:3] if t))


class _Links:
    """Each tensor's writer, readers and place in the graph's order, looked up once
    (``Graph.producer`` and ``Graph.consumers`` scan every node)."""

    def __init__(self, graph: Graph) -> None:
        self.writer = {t: n for n in graph.nodes for t in n.outputs if t}
        self.order = {t: i for i, n in enumerate(graph.nodes) for t in n.outputs if t}
        self.readers: dict[str, list[Node]] = {}
        for n in graph.nodes:
            for t in dict.fromkeys(n.inputs):
                self.readers.setdefault(t, []).append(n)


def _split_sum(graph: Graph, node: Node, links: _Links) -> tuple[str, str] | None:
    """``(main, operand)`` of a residual sum that keeps its inputs' channel scales apart:
    an Add of two tensors of its output's shape (ReLU fused at most) whose operand (the
    second input, or else the first) is written by a layer that can rescale its output
    channels and read by this sum alone - a block's branch; the main input is the
    stream.  The DLA scales the main input per channel on its way to the operand's grid
    (:func:`accel.compiler.ops.sdp_math.binary`), so the stream before the sum and the
    sum with its branch are separate groups.  None for any other node."""
    if node.op_type != "Add" or len(node.inputs) != 2 or node.inputs[0] == node.inputs[1] \
            or node.attrs.get("activation") not in (None, "Relu") \
            or any(graph.is_constant(t) or tuple(graph.tensors[t].shape) !=
                   tuple(graph.tensors[node.outputs[0]].shape) for t in node.inputs) \
            or len(graph.tensors[node.outputs[0]].shape) != 4:
        return None
    for operand in reversed(node.inputs):
        writer = links.writer.get(operand)
        if writer is not None and _is_writer(graph, writer) and \
                [r.name for r in links.readers.get(operand, [])] == [node.name]:
            main = node.inputs[0] if operand == node.inputs[1] else node.inputs[1]
            return main, operand
    return None


def _grow(graph: Graph, start: str, links: _Links, pairs: bool) -> ChannelGroup | None:
    """The group of ``start``, or None when it cannot be rescaled (or is a pair, unless
    ``pairs``)."""
    offsets = {start: 0}
    todo = [start]
    writers: dict[str, None] = {}
    readers: dict[tuple[str, str], str] = {}      # -> the reader's op type

    def link(tensor: str, offset: int) -> bool:
        if tensor in offsets:
            return offsets[tensor] == offset
        offsets[tensor] = offset
        todo.append(tensor)
        return True

    def follow(node: Node, tensor: str, frame: dict[str, int]) -> bool:
        """Link every data tensor of member ``node``, which holds ``tensor`` at
        ``frame[tensor]`` of its own channel frame."""
        origin = offsets[tensor] - frame[tensor]
        ins, outs = _channel_map(graph, node)
        return all(link(u, origin + at) for u, at in (*ins.items(), *outs.items()))

    while todo:
        t = todo.pop()
        if t in graph.inputs or t in graph.outputs or len(graph.tensors[t].shape) != 4:
            return None
        producer = links.writer.get(t)
        if producer is None:
            return None
        mapping = _channel_map(graph, producer)
        split = _split_sum(graph, producer, links)
        if split is not None:               # the sum writes it, with its branch
            if not link(split[1], offsets[t]):
                return None
            writers[producer.name] = None
        elif mapping is not None:
            if not follow(producer, t, mapping[1]):
                return None
        elif _is_writer(graph, producer) and producer.outputs[0] == t:
            writers[producer.name] = None
        else:
            return None
        for reader in links.readers.get(t, []):
            mapping = _channel_map(graph, reader)
            split = _split_sum(graph, reader, links)
            if split is not None and t == split[0]:       # the stream into a sum
                readers[(reader.name, t)] = reader.op_type
            elif split is not None:                       # a branch: the sum joins
                if not link(reader.outputs[0], offsets[t]):
                    return None
                writers[reader.name] = None
            elif mapping is not None and t in mapping[0]:
                if not follow(reader, t, mapping[0]):
                    return None
            elif (_is_conv(graph, reader) or reader.op_type == "HardSwish") and \
                    reader.inputs[0] == t and reader.inputs.count(t) == 1:
                readers[(reader.name, t)] = reader.op_type
            else:
                return None
    low = min(offsets.values())
    offsets = {t: o - low for t, o in offsets.items()}
    width = max(o + graph.tensors[t].shape[1] for t, o in offsets.items())
    key = min(offsets, key=links.order.__getitem__)
    if not pairs and len(offsets) == 1 and links.writer[start].op_type == "Conv" and \
            list(readers.values()) == ["Conv"]:
        return None                  # a pair: weight-based equalization's
    return ChannelGroup(key, offsets, width, tuple(writers), tuple(readers))


def channel_groups(graph: Graph, *, pairs: bool = False) -> list[ChannelGroup]:
    """Every group of ``graph`` that can be rescaled, in the order of their first tensor;
    with ``pairs``, lone Conv -> Conv tensors too (scaled by their data, on top of the
    weight-based equalization)."""
    return _channel_groups(graph, _Links(graph), pairs)


def _channel_groups(graph: Graph, links: _Links, pairs: bool) -> list[ChannelGroup]:
    groups: list[ChannelGroup] = []
    seen: set[str] = set()
    for node in graph.nodes:
        if not _is_writer(graph, node) or node.outputs[0] in seen:
            continue
        group = _grow(graph, node.outputs[0], links, pairs)
        if group is not None:
            groups.append(group)
            seen.update(group.offsets)
    return groups


def group_scales(group: ChannelGroup, values: Iterable[Mapping[str, np.ndarray]]) -> np.ndarray:
    """``s`` of ``group`` (see the module docstring) from fp32 runs of calibration samples
    (``interpret(..., keep_all=True)`` environments)."""
    peaks: dict[str, np.ndarray] = {}
    for env in values:
        for t in group.offsets:
            peak = np.abs(np.asarray(env[t], np.float64)).max(axis=(0, 2, 3))
            peaks[t] = np.maximum(peaks[t], peak) if t in peaks else peak
    r = np.zeros(group.channels)
    for t, peak in peaks.items():
        if peak.max() > 0:
            at = group.offsets[t]
            r[at:at + len(peak)] = np.maximum(r[at:at + len(peak)], peak / peak.max())
    return np.where(r > 0, np.clip(r, FLOOR, 1.0), 1.0)


def _factor(graph: Graph, node: Node, attr: str, tensor: str, s: np.ndarray, at: int,
            power: int) -> None:
    """Multiply ``node``'s per-channel ``attr`` by ``s**power`` over ``tensor``'s channels
    (at group channel ``at``)."""
    width = graph.tensors[tensor].shape[1]
    before = node.attrs.get(attr)
    node.attrs[attr] = (1.0 if before is None else before) * s[at:at + width] ** power


#: the per-channel factors a node that is not a Conv takes as a group's writer and reader
_FACTORS = {"HardSwish": ("channel_scale", "input_scale"), "Add": ("input_scale",) * 2}


def rescale(graph: Graph, scales: Mapping[str, np.ndarray]) -> None:
    """Divide channel ``k`` of each group ``scales`` names (by its key) by ``s[k]``: its
    writers' output channels and its readers' input channels, in place (new weight
    constants, a HardSwish's factors).  A group ``graph`` does not have, or ``s`` of
    another width, is a ``ValueError`` naming it."""
    links = _Links(graph)
    groups = {g.key: g for g in _channel_groups(graph, links, pairs=True)}
    nodes = {n.name: n for n in graph.nodes}
    splits = {n.name: split for n in graph.nodes
              if (split := _split_sum(graph, n, links)) is not None}
    layers: dict[str, Layer] = {}

    def layer(name: str) -> Layer:
        if name not in layers:
            layers[name] = read_layer(graph, nodes[name])
        return layers[name]

    for key, s in scales.items():
        group = groups.get(key)
        if group is None:
            raise ValueError(f"no channel group of {graph.name!r} starts at tensor {key!r}")
        s = np.asarray(s, np.float64)
        if s.shape != (group.channels,):
            raise ValueError(f"channel group {key!r} has {group.channels} channels, the "
                             f"scales {s.size}")
        for name in group.writers:
            node = nodes[name]
            t = node.outputs[0]
            if node.op_type in _FACTORS:
                _factor(graph, node, _FACTORS[node.op_type][0], t, s, group.offsets[t], -1)
            else:
                w = layer(name)
                scale_outputs(w, s[group.offsets[t]:group.offsets[t] + w.out_channels])
        for name, t in group.readers:
            node = nodes[name]
            if node.op_type in _FACTORS:
                _factor(graph, node, _FACTORS[node.op_type][1], t, s, group.offsets[t], 1)
            else:
                w = layer(name)
                scale_inputs(w, s[group.offsets[t]:group.offsets[t] + w.in_channels])
    for name, (main, operand) in splits.items():      # the scaled input goes first
        if "input_scale" in nodes[name].attrs:
            nodes[name].inputs = [main, operand]
    for w in layers.values():
        write_layer(graph, w, "rescaled")
    drop_unused(graph)
