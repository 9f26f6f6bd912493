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


def reader_error(graph: Graph, tensor: str, readers: Sequence[Node], threshold: float,
                 values: Sequence[Mapping[str, np.ndarray]]) -> float:
    """Sum over ``readers`` of their outputs' squared error relative to the outputs' energy
    when ``tensor`` is quantized with ``threshold`` (fp32 otherwise), over ``values``."""
    noise = {n.name: 0.0 for n in readers}
    energy = {n.name: 0.0 for n in readers}
    for env in values:
        xq = _fake_quant(env[tensor], threshold)
        for node in readers:
            args = [xq if t == tensor else tensor_value(graph, env, t) for t in node.inputs]
            outs = run_op(node.op_type, args, node.attrs)
            for name, got in zip(node.outputs, outs, strict=False):
                if not name or name not in env:
                    continue
                want = np.asarray(env[name], dtype=np.float64)
                d = np.asarray(got, dtype=np.float64) - want
                noise[node.name] += float(np.vdot(d, d))
                energy[node.name] += float(np.vdot(want, want))
    return sum(noise[k] / energy[k] if energy[k] > 0 else noise[k] for k in noise)


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
        errors = [reader_error(graph, tensor, readers, t, values) for t in tried]
        out[tensor] = tried[int(np.argmin(errors))]
    return out
