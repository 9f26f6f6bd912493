"""Calibration: run the fp32 graph on sample inputs and choose each tensor's int8 scale.

Algorithms (Tengine's quant tool ``-a``):

* ``minmax``: ``scale = max(|min|, |max|) / 127`` over all samples;
* ``kl``: TensorRT's entropy calibration on a 2048-bin histogram of ``|x|``;
* ``percentile``: the 99.99th percentile of ``|x|`` on the same histogram.

Histogram algorithms run the samples twice (ranges first, then histograms).
The DLA's scale rules (:mod:`tengine_host.quant.rules`) are applied last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized

import numpy as np

from tengine_host.interpreter import interpret
from tengine_host.ir import Graph
from tengine_host.quant.progress import progress_bar
from tengine_host.quant.rules import apply_dla_rules
from tengine_host.quant.table import QuantTable, entry
from tengine_host.quant.thresholds import (
    BINS,
    AbsHistogram,
    kl_threshold,
    percentile_threshold,
)

ALGORITHMS = ("minmax", "kl", "percentile")


def _activations(graph: Graph, values: Mapping[str, np.ndarray]):
    for name, v in values.items():
        if graph.is_constant(name) or not np.issubdtype(np.asarray(v).dtype, np.floating):
            continue
        yield name, v


def calibrate(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], *,
              algorithm: str = "minmax", progress: bool = True, percentile: float = 99.99,
              dla_rules: bool = True) -> QuantTable:
    """Per-tensor symmetric int8 scales for every activation of ``graph``.

    Parameters
    ----------
    graph : Graph
        The graph as it will be executed (after passes: fused activations
        change which tensors exist).
    samples : iterable of mappings
        Each maps every graph input name to an array of its shape.
    algorithm : {"minmax", "kl", "percentile"}
    progress : bool
        Draw a progress bar on stderr.
    percentile : float
        For ``algorithm="percentile"``.
    dla_rules : bool
        Tie the scales NVDLA cannot rescale between (pooling, concat, eltwise).

    Returns
    -------
    QuantTable
        ``{tensor: {"scale", "min", "max"}}`` for every graph input and node
        output; ``min`` / ``max`` are the observed range.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"calibration algorithm {algorithm!r} not in {', '.join(ALGORITHMS)}")
    samples = samples if isinstance(samples, Sized) else list(samples)
    if len(samples) == 0:
        raise ValueError("calibration needs at least one input sample")
    passes = 1 if algorithm == "minmax" else 2
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    with progress_bar(len(samples) * passes, "calibrate",
                     enabled=progress) as bar:
        for feeds in samples:
            for name, v in _activations(graph, interpret(graph, feeds, keep_all=True)):
                lo[name] = min(lo.get(name, np.inf), float(np.min(v)))
                hi[name] = max(hi.get(name, -np.inf), float(np.max(v)))
            bar.update()
        table = QuantTable({name: entry(lo[name], hi[name]) for name in lo})
        if algorithm != "minmax":
            hists = {n: AbsHistogram(max(abs(lo[n]), abs(hi[n])), BINS) for n in lo}
            for feeds in samples:
                for name, v in _activations(graph, interpret(graph, feeds, keep_all=True)):
                    hists[name].add(v)
                bar.update()
            for name, h in hists.items():
                t = kl_threshold(h) if algorithm == "kl" else percentile_threshold(h, percentile)
                if t > 0:
                    table[name]["scale"] = t / 127.0
    return apply_dla_rules(graph, table) if dla_rules else table
