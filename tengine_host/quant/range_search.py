"""``-a auto``: each activation's int8 range chosen by the error it causes downstream.

A tensor's own squared quantization error is a poor guide at 8 bits: its rounding
noise is tiny, so any clipped value costs more than the resolution it frees, and
the error-optimal range of the tensor alone is nearly its min-max range even when a
handful of values sit ten times above the rest (an early SiLU of a detector, a
residual sum).  What matters is what the next layer makes of the error: outliers
usually live in a few channels, which the next convolution weighs like any other,
while the resolution lost to them is lost on every channel.

So for every activation with readers, a few candidate thresholds are tried on
cached calibration samples:

* the error-optimal threshold of the tensor itself
  (:func:`~tengine_host.quant.thresholds.mse_threshold`) and its min-max range;
* its 99th, 99.9th, 99.99th and 99.999th percentiles of ``|x|``;
* min-max divided by every quarter octave down to a sixteenth of it (those at least
  half the smallest of the candidates above): the percentiles of a long-tailed tensor
  (a deep depthwise output) leave gaps of a third of the range between them;

each candidate quantizes the tensor as the DLA would (round half away from zero,
saturate), every reader node runs on the quantized value in fp32, and the candidate
whose readers' outputs move least (squared error relative to each output's energy,
summed over the readers) wins.  A reader whose only output goes only to an activation
(SiLU, sigmoid, HardSwish...: :data:`ACTIVATIONS`) is measured after it, where the
layers after it see its error: a SiLU all but erases errors on the negative side,
and a reader's raw output weighs them like any other.  A tensor that nothing reads (a
model output) keeps its own error-optimal threshold.  The scale is then
``threshold / 127``.

Measured on real models (docs/quantization.md): either change alone lost on one of
them (the finer thresholds on YOLOv8n, errors past the activations on PP-OCR's text
detector); together they raised the worst output's SQNR on four of six by 1.4-6.5 dB
and lowered it on two by 0.5-0.8 dB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from accel.ir import Graph, Node
from tengine_host.interpreter import tensor_value
from tengine_host.ops import run_op
from tengine_host.quant.thresholds import AbsHistogram, mse_threshold, percentile_threshold
from tengine_host.quant.weights import dequantize, quantize_activation

#: calibration samples the readers are run on (the first ones; the histograms use all)
SEARCH_SAMPLES = 4
#: percentiles of |x| tried besides the tensor's own error-optimal range and min-max
SEARCH_PERCENTILES = (99.0, 99.9, 99.99, 99.999)
#: min-max times 2**(-k / GRID_PER_OCTAVE) for k = 1 .. GRID_STEPS are tried too
GRID_PER_OCTAVE = 4
GRID_STEPS = 16
#: pointwise functions of one tensor: a reader followed only by one of them is measured
#: after it (PRelu's second input is its constant slopes)
ACTIVATIONS = frozenset({
    "Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Swish",
    "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf"})


def candidates(hist: AbsHistogram) -> list[float]:
    """The thresholds tried for one tensor, ascending, without repeats or zeros."""
    ts = {mse_threshold(hist), hist.amax,
          *(percentile_threshold(hist, p) for p in SEARCH_PERCENTILES)}
    ts = {t for t in ts if t > 0}
    if not ts:
        return []
    floor = min(ts) / 2
    grid = (hist.amax * 2.0 ** (-k / GRID_PER_OCTAVE) for k in range(1, GRID_STEPS + 1))
    return sorted(ts | {t for t in grid if t >= floor})


def _fake_quant(x: np.ndarray, threshold: float) -> np.ndarray:
    scale = threshold / 127.0
    return dequantize(quantize_activation(x, scale), scale).astype(x.dtype, copy=False)


def activation_after(graph: Graph, tensor: str) -> Node | None:
    """The activation that alone reads ``tensor``: its one reader, an :data:`ACTIVATIONS`
    op whose other inputs are constants (PRelu's slopes), ``tensor`` not a model output;
    else None."""
    readers = graph.consumers(tensor)
    if tensor in graph.outputs or len(readers) != 1:
        return None
    (act,) = readers
    if act.op_type not in ACTIVATIONS or any(t and t != tensor and not graph.is_constant(t)
                                             for t in act.inputs):
        return None
    return act


def _measured_chain(graph: Graph, reader: Node) -> list[Node]:
    """``[reader]``, or ``[reader, activation]`` when the reader's one output goes only to
    an activation (:func:`activation_after`): where its error is measured."""
    outs = [t for t in reader.outputs if t]
    act = activation_after(graph, outs[0]) if len(outs) == 1 else None
    return [reader] if act is None else [reader, act]


def reader_errors(graph: Graph, tensor: str, readers: Sequence[Node],
                  thresholds: Sequence[float], values: Sequence[Mapping[str, np.ndarray]]
                  ) -> list[float]:
    """For each of ``thresholds``: the sum over ``readers`` of their outputs' squared error
    relative to the outputs' energy when ``tensor`` is quantized with that threshold (fp32
    otherwise), over ``values``; a reader followed only by an activation is measured
    after it (:func:`_measured_chain`).  The fp32 outputs are read (and their energy
    summed) once for all thresholds."""
    chains = [_measured_chain(graph, node) for node in readers]
    noise = np.zeros((len(thresholds), len(readers)))
    energy = np.zeros(len(readers))
    for env in values:
        wants = []                  # per reader: the outputs measured, float64
        for k, chain in enumerate(chains):
            outs = [(i, np.asarray(env[name], dtype=np.float64))
                    for i, name in enumerate(chain[-1].outputs) if name and name in env]
            for _, want in outs:
                energy[k] += float(np.vdot(want, want))
            wants.append(outs)
        for j, threshold in enumerate(thresholds):
            xq = _fake_quant(env[tensor], threshold)
            for k, chain in enumerate(chains):
                made = {tensor: xq}         # what the chain computes from the quantized tensor
                for node in chain:
                    args = [made[t] if t in made else tensor_value(graph, env, t)
                            for t in node.inputs]
                    got = run_op(node.op_type, args, node.attrs)
                    made.update(zip(node.outputs, got, strict=False))
                for i, want in wants[k]:
                    d = np.asarray(got[i], dtype=np.float64) - want
                    noise[j, k] += float(np.vdot(d, d))
    relative = np.divide(noise, energy, out=noise.copy(), where=energy > 0)
    return [float(sum(row)) for row in relative]


def search_thresholds(graph: Graph, hists: Mapping[str, AbsHistogram],
                      values: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """The threshold of every tensor in ``hists`` (see the module docstring).

    ``values`` are whole fp32 environments (``interpret(..., keep_all=True)``) of a few
    calibration samples.
    """
    out: dict[str, float] = {}
    for tensor, hist in hists.items():
        readers = graph.consumers(tensor)
        tried = candidates(hist)
        if not readers or len(tried) < 2 or not values:
            out[tensor] = mse_threshold(hist)
            continue
        tried.reverse()             # on an exact tie (readers that ignore it) the wider range
        errors = reader_errors(graph, tensor, readers, tried, values)
        out[tensor] = tried[int(np.argmin(errors))]
    return out
