"""Model outputs that int8 cannot hold: their layers stay in fp32.

A layer whose output the model returns unchanged (through Transpose, Reshape,
Concat and the like, nothing that computes) writes what the user reads.  Its
int8 step is set by the largest values, and some outputs are dominated by a few
huge ones: BlazeFace's face logits lie around -5 with background anchors down
to -9000, so one step is 35 logits and every face score near the decision point
0 comes out as the same code.  No range is right for such a tensor without
knowing what reads it (a sigmoid makes -9000 and -20 the same, a box decoder
does not), and the error the range search measures is dominated by the huge
values.

So when a model output's int8 step exceeds the median of the tensor's non-zero
``|x|`` on the calibration samples (more than half of them would come out as 0
or one step; exact zeros are exact at any step), the layer writing it is kept in
fp32 on the CPU, as TensorRT leaves network outputs in floating point unless
asked otherwise.  Calibration finds such layers (:func:`coarse_output_writers`,
the table's ``coarse_outputs``); the fidelity check keeps those the DLA would run
in fp32, says so in a warning, and the table records them (``keep_float``).
Such layers are the heads of a network, small next to the layers before them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from accel.ir import Graph
from tengine_host.quant.thresholds import AbsHistogram

#: ops that move values without changing them
MOVEMENT_OPS = frozenset({"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat",
                          "Identity", "Split", "Slice"})


@dataclass(frozen=True)
class CoarseOutput:
    """A layer writing a model output int8 cannot hold: the int8 ``step`` of its output,
    the ``median`` of its non-zero ``|x|``, and the ``movers`` (:data:`MOVEMENT_OPS`
    nodes) between it and the model's outputs, which must not requantize it either."""

    step: float
    median: float
    movers: tuple[str, ...]


def movers(graph: Graph, tensor: str) -> list[str]:
    """Every node downstream of ``tensor`` (for a tensor that reaches the outputs
    unchanged: the movers between it and them)."""
    out = []
    for reader in graph.consumers(tensor):
        out.append(reader.name)
        for t in reader.outputs:
            if t:
                out.extend(movers(graph, t))
    return list(dict.fromkeys(out))


def reaches_outputs_unchanged(graph: Graph, tensor: str) -> bool:
    """Whether every use of ``tensor`` is a graph output, directly or through
    :data:`MOVEMENT_OPS` only (and it has at least one)."""
    readers = graph.consumers(tensor)
    if not readers:
        return tensor in graph.outputs
    return all(r.op_type in MOVEMENT_OPS
               and all(reaches_outputs_unchanged(graph, o) for o in r.outputs if o)
               for r in readers)


def nonzero_median(hist: AbsHistogram) -> float:
    """The median of the non-zero ``|x|`` counted in ``hist`` (to its bin's upper edge;
    0 when there are none)."""
    cum = np.cumsum(hist.counts)
    if not cum.size or cum[-1] == 0:
        return 0.0
    return min((int(np.searchsorted(cum, cum[-1] / 2)) + 1) * hist.width, hist.amax)


def coarse_output_writers(graph: Graph, scales: Mapping[str, float],
                          hists: Mapping[str, AbsHistogram]) -> dict[str, CoarseOutput]:
    """The layers writing a model output (see :func:`reaches_outputs_unchanged`) whose
    int8 step ``scales[t]`` exceeds the median non-zero ``|x|`` of ``hists[t]``, by node
    name in graph order."""
    out: dict[str, CoarseOutput] = {}
    for node in graph.nodes:
        if node.op_type in MOVEMENT_OPS:
            continue
        for t in node.outputs:
            if not t or t not in scales or t not in hists:
                continue
            median = nonzero_median(hists[t])
            if scales[t] > median and reaches_outputs_unchanged(graph, t):
                out[node.name] = CoarseOutput(float(scales[t]), float(median),
                                              tuple(movers(graph, t)))
    return out


def describe(kept: Mapping[str, CoarseOutput]) -> str:
    """A sentence naming the layers :func:`coarse_output_writers` keeps in fp32."""
    layers = ", ".join(f"{name} (step {c.step:.3g}, median |x| {c.median:.3g})"
                       for name, c in kept.items())
    return (f"kept in fp32 on the CPU: {len(kept)} layer(s) writing a model output whose int8 "
            f"step would exceed the median of its values: {layers}")
