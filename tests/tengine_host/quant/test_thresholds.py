"""KL (TensorRT) and percentile thresholds: hand-made histograms and a plain-loop KL."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tengine_host.quant.thresholds import (
    AbsHistogram,
    _expand,
    kl_threshold,
    percentile_threshold,
)


def test_histogram_counts_abs_values_and_clamps_to_last_bin():
    h = AbsHistogram(4.0, bins=4)
    h.add(np.array([-0.5, 0.5, 1.5, -3.9, 4.0, 9.0]))
    assert h.counts.tolist() == [2, 1, 0, 3]


def test_expand_spreads_each_merged_bin_over_its_nonzero_bins():
    counts = np.array([2.0, 0.0, 4.0, 6.0])
    # merged bins {0,1} = 2 over one non-zero bin, {2,3} = 10 over two
    assert _expand(counts, counts > 0, 2).tolist() == [2.0, 0.0, 5.0, 5.0]


def _plain_kl_threshold(counts, levels, width):
    """TensorRT's loop written out element by element (an independent reading)."""
    n = len(counts)
    best, best_i = math.inf, n
    for i in range(levels, n + 1):
        p = [float(c) for c in counts[:i]]
        p[i - 1] += float(sum(counts[i:]))
        q = [0.0] * i
        for j in range(levels):
            lo, hi = j * i // levels, (j + 1) * i // levels
            total = sum(counts[lo:hi])
            nz = [k for k in range(lo, hi) if p[k] > 0]
            for k in nz:
                q[k] = total / len(nz)
        ps, qs = sum(p), sum(q)
        q = [v / qs for v in q]
        if any(v == 0 for v in q):
            q = [v if v > 0 else 1e-4 for v in q]
            q = [v / sum(q) for v in q]
        kl = sum(pk / ps * math.log(pk / ps / qk) for pk, qk in zip(p, q, strict=True) if pk > 0)
        if kl < best:
            best, best_i = kl, i
    return (best_i + 0.5) * width


def test_kl_matches_a_plain_loop_on_small_histograms():
    rng = np.random.default_rng(3)
    for _ in range(5):
        counts = rng.poisson(rng.uniform(0, 50, 48) * np.exp(-np.arange(48) / 8)).astype(np.int64)
        counts[-1] += 1
        h = AbsHistogram(48.0, bins=48)
        h.counts[:] = counts
        assert kl_threshold(h, levels=8) == pytest.approx(
            min(_plain_kl_threshold(counts.tolist(), 8, 1.0), 48.0))


def test_kl_clips_a_rare_outlier_but_not_a_uniform_range():
    rng = np.random.default_rng(0)
    h = AbsHistogram(40.0)
    h.add(np.concatenate([rng.standard_normal(100_000), [40.0]]))
    assert 2.5 < kl_threshold(h) < 5.0          # a few sigma, far below the outlier
    h = AbsHistogram(1.0)
    h.add(rng.uniform(-1, 1, 100_000))
    assert kl_threshold(h) == pytest.approx(1.0)  # nothing to gain by clipping


def test_percentile_threshold_by_hand():
    h = AbsHistogram(2048.0)                     # bin width 1
    h.counts[0], h.counts[10], h.counts[2047] = 9_990, 9, 1
    assert percentile_threshold(h, 99.9) == 1.0   # 9990 of 10000 within bin 0
    assert percentile_threshold(h, 99.99) == 11.0  # 9999 reached in bin 10
    assert percentile_threshold(h, 100) == 2048.0
    with pytest.raises(ValueError, match="percentile 0"):
        percentile_threshold(h, 0)
