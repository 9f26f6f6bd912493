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

each candidate quantizes the tensor as the DLA would (round half away from zero,
saturate), every reader node runs on the quantized value in fp32, and the candidate
whose readers' outputs move least (squared error relative to each output's energy,
summed over the readers) wins.  A tensor that nothing reads (a model output) keeps
its own error-optimal threshold.  The scale is then ``threshold / 127``.
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


def candidates(hist: AbsHistogram) -> list[float]:
    """The thresholds tried for one tensor, ascending, without repeats or zeros."""
    ts = {mse_threshold(hist), hist.amax,
          *(percentile_threshold(hist, p) for p in SEARCH_PERCENTILES)}
    return sorted(t for t in ts if t > 0)


def _fake_quant(x: np.ndarray, threshold: float) -> np.ndarray:
    scale = threshold / 127.0
    return dequantize(quantize_activation(x, scale), scale).astype(x.dtype, copy=False)


def reader_errors(graph: Graph, tensor: str, readers: Sequence[Node],
                  thresholds: Sequence[float], values: Sequence[Mapping[str, np.ndarray]]
                  ) -> list[float]:
    """For each of ``thresholds``: the sum over ``readers`` of their outputs' squared error
    relative to the outputs' energy when ``tensor`` is quantized with that threshold (fp32
    otherwise), over ``values``.  The readers' fp32 outputs are read (and their energy
    summed) once for all thresholds."""
    noise = np.zeros((len(thresholds), len(readers)))
    energy = np.zeros(len(readers))
    for env in values:
        wants = []                  # per reader: its outputs the environment holds, float64
        for k, node in enumerate(readers):
            outs = [(i, np.asarray(env[name], dtype=np.float64))
                    for i, name in enumerate(node.outputs) if name and name in env]
            for _, want in outs:
                energy[k] += float(np.vdot(want, want))
            wants.append(outs)
        for j, threshold in enumerate(thresholds):
            xq = _fake_quant(env[tensor], threshold)
            for k, node in enumerate(readers):
                args = [xq if t == tensor else tensor_value(graph, env, t) for t in node.inputs]
                got = run_op(node.op_type, args, node.attrs)
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
