"""Calibration: run the fp32 graph on sample inputs and choose each tensor's int8 scale.

Algorithms (Tengine's quant tool ``-a``):

* ``minmax``: ``scale = max(|min|, |max|) / 127`` over all samples;
* ``kl``: entropy calibration on a 2048-bin histogram of ``|x|`` (TensorRT's, with
  exact zeros set apart and clipped mass charged: :mod:`~tengine_host.quant.thresholds`);
* ``percentile``: the 99.99th percentile of ``|x|`` on the same histogram.

Histogram algorithms run the samples twice (ranges first, then histograms).
The DLA's scale rules (:mod:`tengine_host.quant.rules`) are applied last.
"""

from __future__ import annotations

import warnings
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

#: a histogram method whose threshold clips more than this share of a tensor's
#: values warns (min-max clips none; a sound KL threshold clips well under 0.1%)
CLIP_WARN = 0.01


class CalibrationWarning(UserWarning):
    """Thresholds that clip far more than min-max would: accuracy may suffer."""


def _check_finite(sample: int, name: str, v: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(v)):
        bad = int(np.count_nonzero(~np.isfinite(v)))
        raise ValueError(f"calibration sample {sample}: {what} {name!r} has {bad} NaN/Inf "
                         f"value(s) of {np.size(v)}; calibration needs finite values")


def _warn_clipping(algorithm: str, clipped: dict[str, tuple[float, float]]) -> None:
    """One warning naming the tensors whose threshold clips more than CLIP_WARN."""
    heavy = sorted(((f, r, n) for n, (f, r) in clipped.items() if f > CLIP_WARN), reverse=True)
    if not heavy:
        return
    worst = ", ".join(f"{n} ({f:.1%}, threshold {r:.2f}x the range)" for f, r, n in heavy[:5])
    warnings.warn(CalibrationWarning(
        f"{algorithm} thresholds clip more than {CLIP_WARN:.0%} of the values of {len(heavy)} "
        f"tensor(s), where min-max clips none: {worst}"
        + (" ..." if len(heavy) > 5 else "") + "; compare accuracy with -a minmax"),
        stacklevel=3)


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
    if algorithm == "percentile" and not 0 < percentile <= 100:
        raise ValueError(f"percentile {percentile} must be in (0, 100]")
    samples = samples if isinstance(samples, Sized) else list(samples)
    if len(samples) == 0:
        raise ValueError("calibration needs at least one input sample")
    passes = 1 if algorithm == "minmax" else 2
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    with progress_bar(len(samples) * passes, "calibrate",
                      enabled=progress) as bar:
        for i, feeds in enumerate(samples):
            for name, v in feeds.items():
                if np.issubdtype(np.asarray(v).dtype, np.floating):
                    _check_finite(i, name, v, "input")
            for name, v in _activations(graph, interpret(graph, feeds, keep_all=True)):
                lo_v, hi_v = float(np.min(v)), float(np.max(v))
                if not (np.isfinite(lo_v) and np.isfinite(hi_v)):
                    _check_finite(i, name, v, "tensor")
                lo[name] = min(lo.get(name, np.inf), lo_v)
                hi[name] = max(hi.get(name, -np.inf), hi_v)
            bar.update()
        table = QuantTable({name: entry(lo[name], hi[name]) for name in lo})
        if algorithm != "minmax":
            hists = {n: AbsHistogram(max(abs(lo[n]), abs(hi[n])), BINS) for n in lo}
            for feeds in samples:
                for name, v in _activations(graph, interpret(graph, feeds, keep_all=True)):
                    hists[name].add(v)
                bar.update()
            clipped = {}
            for name, h in hists.items():
                t = kl_threshold(h) if algorithm == "kl" else percentile_threshold(h, percentile)
                if t > 0:
                    table[name]["scale"] = t / 127.0
                    clipped[name] = (h.clipped_fraction(t), t / h.amax)
            _warn_clipping(algorithm, clipped)
    return apply_dla_rules(graph, table) if dla_rules else table
