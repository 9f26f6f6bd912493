"""Cross-layer equalization of Conv/Gemm pairs before quantization.

Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and
Bias Correction", section 4.1.  When a layer's output tensor feeds exactly one
Conv/Gemm, dividing the producer's output channel ``k`` (its weights and bias)
by ``s_k > 0`` and multiplying the consumer's input channel ``k`` by ``s_k``
leaves the fp32 function unchanged, as long as the activation between them
commutes with a positive per-channel scale: ReLU, PReLU (whatever its slope,
per channel) and LeakyReLU do, ``f(z / s) = f(z) / s``.  Zero padding of the
consumer stays zero.

With ``s_k = sqrt(r1_k / r2_k)``, where ``r1_k`` is the largest ``|w|`` of the
producer's output channel ``k`` and ``r2_k`` the largest ``|w|`` the consumer
applies to its input channel ``k``, both become ``sqrt(r1_k * r2_k)``: the
consumer's input channels (which share a per-output-channel weight scale) and
the activation's channels (which share one per-tensor scale) even out.  A
depthwise convolution's channel ``k`` is both its input and output channel, so
in a chain ``conv -> dw -> conv`` each layer takes part in two pairs; sweeps
over all pairs repeat until the scales settle.

A capped activation (ReLU6, a fused ``Clip`` with ``activation_max``) does not
commute: after scaling, channel ``k`` would need the bound ``cap / s_k``, and
the SDP applies one scalar minimum per layer.  Such pairs are skipped and
reported, as are tensors read twice or that are graph outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.ir import Graph, Node
from tengine_host.passes.edit import drop_unused
from tengine_host.quant.layers import WEIGHTED_OPS, Layer, copy_graph, read_layer, write_layer

#: fused activations ``f`` with ``f(z / s) = f(z) / s`` for every ``s > 0``
HOMOGENEOUS_ACTIVATIONS = (None, "Relu", "PRelu", "LeakyRelu")

#: sweeps stop once no scale of a sweep moves further than this from 1 (relative)
TOLERANCE = 1e-4


@dataclass(frozen=True)
class EqualizedPair:
    """One producer -> consumer pair and its per-channel weight ranges.

    ``producer_before`` / ``producer_after`` are the producer's output-channel
    ranges ``r1`` (largest ``|w|`` per output channel); ``consumer_before`` /
    ``consumer_after`` the consumer's input-channel ranges ``r2``.  ``scale`` is
    the product of the ``s_k`` of every sweep: the producer's channel ``k`` was
    divided by it, the consumer's multiplied.  "After" is measured when all pairs
    are done, so a layer in two pairs shows the outcome of both.
    """

    producer: str
    consumer: str
    tensor: str
    scale: np.ndarray
    producer_before: np.ndarray
    producer_after: np.ndarray
    consumer_before: np.ndarray
    consumer_after: np.ndarray

    def __str__(self) -> str:
        return (f"{self.producer} -> {self.consumer}: range spread (max/min over channels) "
                f"producer {spread(self.producer_before):.3g} -> "
                f"{spread(self.producer_after):.3g}, consumer "
                f"{spread(self.consumer_before):.3g} -> {spread(self.consumer_after):.3g}; "
                f"s in [{self.scale.min():.3g}, {self.scale.max():.3g}]")


@dataclass(frozen=True)
class SkippedPair:
    """A Conv/Gemm whose output reaches a Conv/Gemm but could not be equalized."""

    producer: str
    consumer: str
    reason: str

    def __str__(self) -> str:
        return f"{self.producer} -> {self.consumer}: skipped, {self.reason}"


@dataclass
class EqualizeReport:
    """What :func:`equalize` did: the pairs equalized, those skipped and why, the sweeps."""

    pairs: list[EqualizedPair] = field(default_factory=list)
    skipped: list[SkippedPair] = field(default_factory=list)
    sweeps: int = 0

    def __str__(self) -> str:
        head = (f"cross-layer equalization: {len(self.pairs)} pair(s) in {self.sweeps} "
                f"sweep(s), {len(self.skipped)} skipped")
        return "\n".join([head, *(f"  {p}" for p in self.pairs),
                          *(f"  {s}" for s in self.skipped)])


def spread(ranges: np.ndarray) -> float:
    """Largest over smallest of the non-zero ``ranges`` (1 when fewer than two)."""
    live = ranges[ranges > 0]
    return float(live.max() / live.min()) if live.size > 1 else 1.0


def output_ranges(layer: Layer) -> np.ndarray:
    """``r1``: the largest ``|w|`` of each output channel, ``[K]``."""
    return np.abs(layer.weight).reshape(layer.out_channels, -1).max(axis=1)


def input_ranges(layer: Layer) -> np.ndarray:
    """``r2``: the largest ``|w|`` applied to each input channel, ``[C]`` (over the
    output channels of the channel's group and the kernel taps)."""
    return np.abs(layer.grouped()).max(axis=(1, 3)).reshape(-1)


def equalization_scales(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """``s_k = sqrt(r1_k / r2_k)``; 1 where either range is 0 (a dead channel: scaling
    cannot balance it, and dividing by zero would destroy the other side)."""
    live = (r1 > 0) & (r2 > 0)
    s = np.ones_like(r1)
    s[live] = np.sqrt(r1[live] / r2[live])
    return s


def scale_outputs(layer: Layer, s: np.ndarray) -> None:
    """Divide output channel ``k`` of ``layer`` (weights and bias) by ``s[k]``."""
    layer.weight /= s.reshape(-1, *[1] * (layer.weight.ndim - 1))
    if layer.bias is not None:
        layer.bias /= s


def scale_inputs(layer: Layer, s: np.ndarray) -> None:
    """Multiply the weights ``layer`` applies to input channel ``c`` by ``s[c]``."""
    grouped = layer.grouped()
    grouped *= s.reshape(layer.group, 1, -1, 1)


def _skip_reason(graph: Graph, producer: Node, consumer: Node) -> str | None:
    """Why ``producer -> consumer`` cannot be equalized, or None when it can."""
    t = producer.outputs[0]
    if t in graph.outputs:
        return f"{t!r} is a graph output (its values must not change)"
    readers = graph.consumers(t)
    if len(readers) != 1 or consumer.inputs.count(t) != 1:
        names = ", ".join(n.name for n in readers)
        return f"{t!r} has {len(readers)} readers ({names}); equalization needs exactly one"
    act = producer.attrs.get("activation")
    if act == "Clip":
        cap = producer.attrs.get("activation_max")
        return (f"capped activation Clip(0, {cap}): channel k's cap would become "
                f"{cap}/s_k, and the SDP applies one scalar bound per layer")
    if act not in HOMOGENEOUS_ACTIVATIONS:
        return f"activation {act!r} does not commute with a per-channel scale"
    if consumer.op_type == "Gemm" and consumer.attrs.get("transA", 0):
        return "the consumer Gemm reads its input transposed (transA=1)"
    for node in (producer, consumer):
        layer = read_layer(graph, node)
        if isinstance(layer, str):
            return f"{node.name}: {layer}"
    return None


def find_pairs(graph: Graph) -> tuple[list[tuple[Node, Node]], list[SkippedPair]]:
    """Every Conv/Gemm whose output is the data input of a Conv/Gemm: the pairs that can
    be equalized, and the others with the reason."""
    pairs: list[tuple[Node, Node]] = []
    skipped: list[SkippedPair] = []
    for producer in graph.nodes:
        if producer.op_type not in WEIGHTED_OPS:
            continue
        t = producer.outputs[0]
        for consumer in graph.consumers(t):
            if consumer.op_type not in WEIGHTED_OPS or consumer.inputs[0] != t:
                continue
            reason = _skip_reason(graph, producer, consumer)
            if reason is None:
                pairs.append((producer, consumer))
            else:
                skipped.append(SkippedPair(producer.name, consumer.name, reason))
    return pairs, skipped


def equalize(graph: Graph, iterations: int = 20) -> tuple[Graph, EqualizeReport]:
    """Cross-layer equalization of every eligible Conv/Gemm pair of ``graph``.

    Parameters
    ----------
    graph : Graph
        After :func:`tengine_host.model.load_model`'s passes (activations fused).
        It is not modified.
    iterations : int
        Most sweeps over all pairs; sweeps stop earlier once every scale of a sweep
        is within ``TOLERANCE`` of 1.  A lone pair settles in one sweep; chains
        through depthwise convolutions need more.

    Returns
    -------
    (Graph, EqualizeReport)
        A copy of ``graph`` computing the same fp32 function (up to the float32
        rounding of the rescaled weights), and the report.  Calibrate the copy:
        its activation ranges differ.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    out = copy_graph(graph)
    pairs, skipped = find_pairs(out)
    report = EqualizeReport(skipped=skipped)
    if not pairs:
        return out, report
    layers: dict[str, Layer] = {}
    for node in {id(n): n for pair in pairs for n in pair}.values():
        layers[node.name] = read_layer(out, node)
    chain = [(layers[p.name], layers[c.name]) for p, c in pairs]
    before = [(output_ranges(p), input_ranges(c)) for p, c in chain]
    total = [np.ones(p.out_channels) for p, _ in chain]
    for sweep in range(1, iterations + 1):
        moved = 0.0
        for i, (p, c) in enumerate(chain):
            s = equalization_scales(output_ranges(p), input_ranges(c))
            scale_outputs(p, s)
            scale_inputs(c, s)
            total[i] *= s
            moved = max(moved, float(np.abs(s - 1).max()))
        report.sweeps = sweep
        if moved < TOLERANCE:
            break
    for layer in layers.values():
        write_layer(out, layer, "equalized")
    drop_unused(out)
    for (p, c), (r1, r2), s in zip(chain, before, total, strict=True):
        report.pairs.append(EqualizedPair(
            p.node.name, c.node.name, p.node.outputs[0], s, r1, output_ranges(p), r2,
            input_ranges(c)))
    return out, report
