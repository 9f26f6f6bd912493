"""Clipping thresholds from a histogram of ``|x|``: KL divergence (TensorRT) and percentile.

Both see the activation through a histogram of absolute values over
``[0, amax]`` with :data:`BINS` bins, accumulated over every calibration
sample (:class:`AbsHistogram`).  The int8 scale is then ``threshold / 127``.
"""

from __future__ import annotations

import numpy as np

BINS = 2048          # TensorRT's histogram size
LEVELS = 128         # int8 magnitudes 0..127


class AbsHistogram:
    """A fixed-range histogram of ``|x|`` over ``[0, amax]`` with ``bins`` bins."""

    def __init__(self, amax: float, bins: int = BINS) -> None:
        self.amax = float(amax)
        self.counts = np.zeros(bins, dtype=np.int64)

    @property
    def width(self) -> float:
        return self.amax / len(self.counts) if self.amax > 0 else 0.0

    def add(self, x: np.ndarray) -> None:
        """Count ``|x|``; values beyond ``amax`` land in the last bin."""
        a = np.abs(np.asarray(x, dtype=np.float64)).ravel()
        if self.amax <= 0:
            self.counts[0] += a.size
            return
        idx = np.minimum((a / self.width).astype(np.int64), len(self.counts) - 1)
        self.counts += np.bincount(idx, minlength=len(self.counts))


def _expand(counts: np.ndarray, nonzero: np.ndarray, levels: int) -> np.ndarray:
    """Quantize ``counts`` into ``levels`` merged bins and spread them back.

    Each merged bin's total is divided evenly among the bins inside it that
    are marked ``nonzero`` (the reference distribution's non-empty bins);
    the other bins stay empty (TensorRT's candidate distribution Q).
    """
    n = len(counts)
    edges = (np.arange(levels + 1) * n) // levels        # merged bin boundaries
    which = np.repeat(np.arange(levels), np.diff(edges))  # merged bin of each original bin
    totals = np.bincount(which, weights=counts, minlength=levels)
    count = np.bincount(which, weights=nonzero, minlength=levels)
    share = np.divide(totals, count, out=np.zeros(levels), where=count > 0)
    return np.where(nonzero, share[which], 0.0)


def _smooth(p: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """Give empty bins a tiny mass ``eps`` and renormalize (keeps KL finite)."""
    if np.all(p > 0):
        return p
    p = np.where(p > 0, p, eps)
    return p / p.sum()


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """``sum p log(p/q)`` over ``p > 0`` of the normalized distributions (``q`` smoothed)."""
    p = p / p.sum()
    qs = q.sum()
    if qs <= 0:
        return float("inf")
    q = _smooth(q / qs)
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def kl_threshold(hist: AbsHistogram, levels: int = LEVELS) -> float:
    """TensorRT's entropy calibration: the clip threshold minimizing KL(P || Q).

    For every candidate ``i`` in ``levels .. bins``: P is the first ``i`` bins
    with the outliers beyond them added to bin ``i-1``; Q is those ``i`` bins
    (without the outliers) quantized to ``levels`` levels and expanded back
    over P's non-empty bins, then smoothed where it has no mass.
    The threshold is the upper edge of the best ``i``'s middle: ``(i + 0.5) * width``.
    """
    counts = hist.counts.astype(np.float64)
    n = len(counts)
    if hist.amax <= 0 or counts[1:].sum() == 0:
        return hist.amax
    if n <= levels:
        return hist.amax
    tail = np.cumsum(counts[::-1])[::-1]                 # tail[i] = counts[i:].sum()
    best_i, best_kl = n, float("inf")
    for i in range(levels, n + 1):
        p = counts[:i].copy()
        if i < n:
            p[i - 1] += tail[i]
        if p.sum() == 0:
            continue
        q = _expand(counts[:i], p > 0, levels)
        kl = kl_divergence(p, q)
        if kl < best_kl:
            best_i, best_kl = i, kl
    return min((best_i + 0.5) * hist.width, hist.amax)


def percentile_threshold(hist: AbsHistogram, percentile: float = 99.99) -> float:
    """The upper edge of the bin where the cumulative share of ``|x|`` reaches ``percentile``."""
    if not 0 < percentile <= 100:
        raise ValueError(f"percentile {percentile} must be in (0, 100]")
    total = hist.counts.sum()
    if hist.amax <= 0 or total == 0:
        return hist.amax
    cum = np.cumsum(hist.counts)
    i = int(np.searchsorted(cum, total * percentile / 100.0))
    return min((i + 1) * hist.width, hist.amax)
