"""Calibration: run the fp32 graph on sample inputs and choose each tensor's int8 scale.

Algorithms (Tengine's quant tool ``-a``):

* ``minmax``: ``scale = max(|min|, |max|) / 127`` over all samples;
* ``kl``: entropy calibration on a 2048-bin histogram of ``|x|`` (TensorRT's, with
  exact zeros set apart and clipped mass charged: :mod:`~tengine_host.quant.thresholds`);
* ``percentile``: the 99.99th percentile of ``|x|`` on the same histogram;
* ``auto`` (the default): for each tensor, of a few candidate ranges (its own
  error-optimal one, min-max, percentiles) the one whose quantization moves the
  outputs of the layers that read it least (:mod:`~tengine_host.quant.range_search`);
  the layers writing model outputs that int8 cannot hold are found
  (:mod:`~tengine_host.quant.coarse_outputs`, the table's ``coarse_outputs``).

Histogram algorithms run the samples twice (ranges first, then histograms).
The DLA's scale rules (:mod:`tengine_host.quant.rules`) are applied last.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence, Sized

import numpy as np

from accel.ir import Graph
from tengine_host.errors import TengineInputError
from tengine_host.interpreter import interpret
from tengine_host.quant.coarse_outputs import coarse_output_writers
from tengine_host.quant.progress import progress_bar
from tengine_host.quant.range_search import SEARCH_SAMPLES, search_thresholds
from tengine_host.quant.rules import apply_dla_rules
from tengine_host.quant.table import QuantTable, entry
from tengine_host.quant.thresholds import (
    BINS,
    AbsHistogram,
    kl_threshold,
    percentile_threshold,
)

ALGORITHMS = ("auto", "minmax", "kl", "percentile")
DEFAULT_ALGORITHM = "auto"

#: a histogram method whose threshold clips more than this share of a tensor's
#: values warns (min-max clips none; a sound KL threshold clips well under 0.1%)
CLIP_WARN = 0.01


class CalibrationWarning(UserWarning):
    """Thresholds that clip far more than min-max would: accuracy may suffer."""


def _check_finite(sample: int, name: str, v: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(v)):
        bad = int(np.count_nonzero(~np.isfinite(v)))
        raise TengineInputError(f"calibration sample {sample}: {what} {name!r} has {bad} "
                                f"NaN/Inf value(s) of {np.size(v)}; calibration needs finite "
                                f"values")


#: an input whose values reach this magnitude is far outside any normalized range
RAW_RANGE = 100.0


def input_warnings(graph: Graph, samples: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
    """Messages for calibration inputs that cannot be what the model was trained on.

    An input that is zero in every sample, or one constant value, calibrates nothing
    (every activation scale would come from biases alone); one whose values reach
    :data:`RAW_RANGE` looks like raw pixels (0-255) where most models expect
    normalized values; identical samples give no variety to calibrate on.  These are
    warnings: a model may really take raw pixels.
    """
    out = []
    for name in graph.inputs:
        arrays = [np.asarray(s[name]) for s in samples if name in s]
        if not arrays or not np.issubdtype(arrays[0].dtype, np.floating):
            continue
        lo = min(float(np.min(a)) for a in arrays)
        hi = max(float(np.max(a)) for a in arrays)
        if lo == hi == 0:
            out.append(f"input {name!r} is all zero in every calibration sample: check the "
                       f"preprocessing (-s 0 scales every pixel to 0)")
        elif lo == hi:
            out.append(f"input {name!r} is the constant {lo:g} in every calibration sample: "
                       f"check the preprocessing")
        elif max(abs(lo), abs(hi)) >= RAW_RANGE:
            out.append(f"input {name!r} spans [{lo:g}, {hi:g}], the range of raw pixels; most "
                       f"models expect normalized values (give the model's mean -w and "
                       f"scale -s), unless this one takes raw pixels")
        if len(arrays) > 1 and all(np.array_equal(arrays[0], a) for a in arrays[1:]):
            out.append(f"input {name!r} is the same in all {len(arrays)} calibration samples")
    return out


def _warn_clipping(algorithm: str, clipped: dict[str, tuple[float, float]]) -> None:
    """One warning naming the tensors whose threshold clips more than CLIP_WARN."""
    heavy = sorted(((f, r, n) for n, (f, r) in clipped.items() if f > CLIP_WARN), reverse=True)
    if not heavy:
        return
    worst = ", ".join(f"{n} ({f:.1%}, threshold {r:.2f}x the range)" for f, r, n in heavy[:5])
    warnings.warn(CalibrationWarning(
        f"{algorithm} thresholds clip more than {CLIP_WARN:.0%} of the values of {len(heavy)} "
        f"tensor(s), where min-max clips none: {worst}"
        + (" ..." if len(heavy) > 5 else "")),
        stacklevel=3)


def _threshold(algorithm: str, hist: AbsHistogram, percentile: float) -> float:
    return kl_threshold(hist) if algorithm == "kl" else percentile_threshold(hist, percentile)


def _activations(graph: Graph, values: Mapping[str, np.ndarray]):
    for name, v in values.items():
        if graph.is_constant(name) or not np.issubdtype(np.asarray(v).dtype, np.floating):
            continue
        yield name, v


def calibrate(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], *,
              algorithm: str = DEFAULT_ALGORITHM, progress: bool = True, percentile: float = 99.99,
              dla_rules: bool = True) -> QuantTable:
    """Per-tensor symmetric int8 scales for every activation of ``graph``.

    Parameters
    ----------
    graph : Graph
        The graph as it will be executed (after passes: fused activations
        change which tensors exist).
    samples : iterable of mappings
        Each maps every graph input name to an array of its shape.
    algorithm : {"auto", "minmax", "kl", "percentile"}
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
    kept: list[dict[str, np.ndarray]] = []     # whole fp32 runs for the auto search
    with progress_bar(len(samples) * passes, "calibrate",
                      enabled=progress) as bar:
        for i, feeds in enumerate(samples):
            for name, v in feeds.items():
                if np.issubdtype(np.asarray(v).dtype, np.floating):
                    _check_finite(i, name, v, "input")
            values = interpret(graph, feeds, keep_all=True)
            if algorithm == "auto" and i < SEARCH_SAMPLES:
                kept.append(values)
            for name, v in _activations(graph, values):
                lo_v, hi_v = float(np.min(v)), float(np.max(v))
                if not (np.isfinite(lo_v) and np.isfinite(hi_v)):
                    _check_finite(i, name, v, "tensor")
                lo[name] = min(lo.get(name, np.inf), lo_v)
                hi[name] = max(hi.get(name, -np.inf), hi_v)
            bar.update()
        table = QuantTable({name: entry(lo[name], hi[name]) for name in lo})
        if algorithm != "minmax":
            hists = {n: AbsHistogram(max(abs(lo[n]), abs(hi[n])), BINS) for n in lo}
            for i, feeds in enumerate(samples):
                values = kept[i] if i < len(kept) else interpret(graph, feeds, keep_all=True)
                for name, v in _activations(graph, values):
                    hists[name].add(v)
                bar.update()
            if algorithm == "auto":
                thresholds = search_thresholds(graph, hists, kept)
            else:
                thresholds = {n: _threshold(algorithm, h, percentile) for n, h in hists.items()}
            clipped = {}
            for name, t in thresholds.items():
                if t > 0:
                    table[name]["scale"] = t / 127.0
                    clipped[name] = (hists[name].clipped_fraction(t), t / hists[name].amax)
            if algorithm != "auto":      # its thresholds are clipped on purpose, by error
                _warn_clipping(algorithm, clipped)
    table = apply_dla_rules(graph, table) if dla_rules else table
    if algorithm == "auto":
        table.coarse_outputs = coarse_output_writers(
            graph, {t: e["scale"] for t, e in table.items()}, hists)
    return table
