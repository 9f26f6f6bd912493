"""Empirical bias correction of Conv/Gemm layers for their int8 weights.

Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and
Bias Correction", section 4.2.  Rounding a layer's weights to int8 shifts its
expected output: ``E[y_q - y] = (W_q * s_w - W) . E[x]``.  The error is not
zero-mean per channel (a channel's rounding errors do not cancel), and a
following ReLU or a per-tensor activation scale turns a shift into lasting
error.  Subtracting the expected shift from the bias removes it on average.

``E[x]`` comes from running the fp32 graph on calibration samples.  For a
spatial convolution this module uses the exact expectation of every kernel
tap's input over the output positions: tap ``(r, s)`` of channel ``c`` reads
``x[c, oh * stride + r * dilation - pad, ...]``, which near the borders is the
zero padding.  The classic approximation (the channel mean times the sum of
the weight errors over the kernel) charges the border taps with the mean of a
value that is really zero, and ignores that a strided convolution samples only
some positions: on the small maps of a network's last stages (a 5x5 kernel on
a 10x13 map reads padding at a third of its taps) it is biased by about the
same order as the shift it corrects.  The exact expectation costs no more: per
spatial axis, a ``[kernel, size]`` 0/1 matrix says which input positions each
tap reads over all output positions, and two small matrix products give every
tap's sum (:func:`tap_sums`).

The weight quantizer is a parameter, ``quantize_weights(w) -> (w_q, scale[K])``,
so the correction matches the int8 weights the DLA really uses; the caller
passes the compiler's (``accel.compiler.quantize.quantize_weights``), which the
host does not import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from accel.ir import Graph, Node
from tengine_host.interpreter import interpret
from tengine_host.passes.edit import drop_unused
from tengine_host.quant.layers import WEIGHTED_OPS, Layer, copy_graph, read_layer, write_layer

WeightQuantizer = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]

#: how the expectation of a convolution's input windows is taken (see the module docstring)
METHOD = "exact expectation of each kernel tap over the output positions (zero padding included)"


@dataclass(frozen=True)
class CorrectedLayer:
    """One layer's correction: ``shift[k]`` was subtracted from its bias."""

    node: str
    shift: np.ndarray
    created_bias: bool

    def __str__(self) -> str:
        made = " (bias created)" if self.created_bias else ""
        return (f"{self.node}: shift max |{np.abs(self.shift).max():.3g}|, "
                f"rms {np.sqrt(np.mean(self.shift ** 2)):.3g}{made}")


@dataclass
class BiasCorrectionReport:
    """What :func:`correct_bias` changed, what it left and why."""

    samples: int = 0
    method: str = METHOD
    layers: list[CorrectedLayer] = field(default_factory=list)
    exact: list[str] = field(default_factory=list)          # weights quantize exactly
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (node, reason)

    def __str__(self) -> str:
        head = (f"bias correction on {self.samples} sample(s), {self.method}: "
                f"{len(self.layers)} layer(s) corrected, {len(self.exact)} exact, "
                f"{len(self.skipped)} skipped")
        return "\n".join([head, *(f"  {c}" for c in self.layers),
                          *(f"  {n}: skipped, {why}" for n, why in self.skipped)])


def tap_selector(size: int, kernel: int, stride: int, pad_begin: int, dilation: int,
                 out: int) -> np.ndarray:
    """``[kernel, size]`` 0/1: entry ``[j, i]`` is 1 when tap ``j`` reads input position
    ``i`` for some output position (padding positions are not columns: they read 0).

    Example: size 4, kernel 3, stride 1, pad 1, dilation 1, out 4 (a "same" 3-tap
    window): tap 0 reads positions -1..2, i.e. columns 0..2; tap 1 all four; tap 2
    positions 1..4, i.e. columns 1..3::

        [[1, 1, 1, 0],
         [1, 1, 1, 1],
         [0, 1, 1, 1]]
    """
    sel = np.zeros((kernel, size))
    starts = np.arange(out) * stride - pad_begin
    for j in range(kernel):
        pos = starts + j * dilation
        sel[j, pos[(pos >= 0) & (pos < size)]] = 1.0
    return sel


def tap_sums(x: np.ndarray, node: Node, out_spatial: tuple[int, ...]) -> np.ndarray:
    """``[C, *kernel]``: for each input channel and kernel tap of the Conv ``node``, the sum
    of the values the tap reads over the batch and every output position."""
    a = node.attrs
    kernel, strides, pads, dilations = (a["kernel_shape"], a["strides"], a["pads"],
                                        a["dilations"])
    nd = len(kernel)
    acc = x.sum(axis=0, dtype=np.float64)          # [C, *spatial]
    for i in range(nd):
        sel = tap_selector(x.shape[2 + i], kernel[i], strides[i], pads[i], dilations[i],
                           out_spatial[i])
        # contracts the first remaining spatial axis and appends its tap axis
        acc = np.tensordot(acc, sel, axes=([1], [1]))
    return acc


def _input_sums(graph: Graph, layer: Layer, x: np.ndarray) -> tuple[np.ndarray, int]:
    """The sum of what each weight of ``layer`` multiplies, ``[C, taps]``, and the count
    of products each sum covers (batch x output positions)."""
    node = layer.node
    if node.op_type == "Gemm":
        rows = x.T if node.attrs.get("transA", 0) else x
        return rows.sum(axis=0, dtype=np.float64)[:, None], rows.shape[0]
    out = graph.tensors[node.outputs[0]].shape[2:]
    sums = tap_sums(x, node, tuple(out))
    return sums.reshape(sums.shape[0], -1), x.shape[0] * int(np.prod(out, dtype=np.int64))


def weight_error(layer: Layer, quantize_weights: WeightQuantizer) -> np.ndarray:
    """``W_q * s_w - W``: what rounding to int8 adds to each weight (``layer.weight``'s shape)."""
    w_q, scale = quantize_weights(layer.weight)
    return (np.asarray(w_q, np.float64)
            * np.asarray(scale, np.float64).reshape(-1, *[1] * (layer.weight.ndim - 1))
            - layer.weight)


def expected_shift(layer: Layer, error: np.ndarray, mean_taps: np.ndarray) -> np.ndarray:
    """``[K]``: ``sum over (c, tap) of error[k, c, tap] * E[x at tap of c]``, with
    ``mean_taps`` ``[C, taps]``; input channel ``c`` meets only its group's kernels."""
    g = layer.group
    error = error.reshape(g, layer.out_channels // g, -1)   # [G, K/G, C/G * taps]
    means = mean_taps.reshape(g, -1)                        # [G, C/G * taps]
    return np.einsum("gkt,gt->gk", error, means).reshape(-1)


def correct_bias(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]],
                 quantize_weights: WeightQuantizer, *,
                 int8_nodes: Callable[[Node], bool] | None = None
                 ) -> tuple[Graph, BiasCorrectionReport]:
    """Subtract each Conv/Gemm's expected output shift due to its int8 weights from its bias.

    Parameters
    ----------
    graph : Graph
        After :func:`tengine_host.model.load_model`'s passes (and after
        :func:`~tengine_host.quant.equalize.equalize`, if used).  Not modified.
    samples : iterable of mappings
        Calibration inputs, each mapping every graph input name to an array.
    quantize_weights : callable
        ``quantize_weights(w) -> (w_q, scale[K])`` with ``w`` ``[K, C/group, *kernel]``
        (``[K, C]`` for a Gemm, ``alpha`` folded in): the compiler's per-channel
        quantizer, so the correction fits the weights the DLA computes with.
    int8_nodes : callable, optional
        Which Conv/Gemm nodes run with int8 weights (the DLA's partition); by
        default all.  A layer that falls back to fp32 on the CPU must keep its bias.

    Returns
    -------
    (Graph, BiasCorrectionReport)
        A copy of ``graph`` with corrected (or new) biases; a layer whose weights
        quantize exactly keeps its bias constant untouched.  Calibrate the copy.
    """
    out = copy_graph(graph)
    report = BiasCorrectionReport()
    layers: dict[str, Layer] = {}
    for node in out.nodes:
        if node.op_type not in WEIGHTED_OPS or (int8_nodes is not None and not int8_nodes(node)):
            continue
        layer = read_layer(out, node)
        if isinstance(layer, str):
            report.skipped.append((node.name, layer))
        else:
            layers[node.name] = layer
    sums: dict[str, np.ndarray] = {}
    counts = dict.fromkeys(layers, 0)
    for feeds in samples:
        env = interpret(graph, feeds, keep_all=True)
        for name, layer in layers.items():
            s, n = _input_sums(out, layer, env[layer.node.inputs[0]])
            sums[name] = sums[name] + s if name in sums else s
            counts[name] += n
        report.samples += 1
    if report.samples == 0:
        raise ValueError("bias correction needs at least one input sample")
    for name, layer in layers.items():
        error = weight_error(layer, quantize_weights)
        if not np.any(error):
            report.exact.append(name)
            continue
        shift = expected_shift(layer, error, sums[name] / counts[name])
        created = layer.bias is None
        layer.bias = (0.0 if created else layer.bias) - shift
        write_layer(out, layer, "corrected", weight=False)
        report.layers.append(CorrectedLayer(name, shift, created))
    drop_unused(out)
    return out, report
