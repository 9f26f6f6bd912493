"""KL and percentile thresholds: hand-made histograms, plain-loop KLs, and the two ways
TensorRT's literal entropy calibration collapses (a zero spike, a range away from 0)."""

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
    h.add(np.array([-0.5, 0.5, 1.5, -3.9, 4.0, 9.0, 0.0, -0.0]))
    assert h.counts.tolist() == [2, 1, 0, 3]
    assert h.zeros == 2 and h.total == 8           # exact zeros counted apart
    assert h.clipped_fraction(3.0) == 3 / 8         # the last bin, [3, 4]


def test_expand_spreads_each_merged_bin_over_its_nonzero_bins():
    counts = np.array([2.0, 0.0, 4.0, 6.0])
    # merged bins {0,1} = 2 over one non-zero bin, {2,3} = 10 over two
    assert _expand(counts, counts > 0, 2).tolist() == [2.0, 0.0, 5.0, 5.0]


def _plain_kl_threshold(counts, levels, width, tensorrt=False):
    """The candidate loop written out element by element (an independent reading).

    ``tensorrt=True`` is TensorRT's literal algorithm (Q renormalized after
    the outliers are dropped, empty bins smoothed to 1e-4 and renormalized);
    otherwise bin 0 is left out, Q keeps P's total and empty bins get 1e-4 / i.
    """
    if not tensorrt:
        counts = [0, *counts[1:]]
    n = len(counts)
    best, best_i = math.inf, n
    total = float(sum(counts))
    for i in range(levels, n + 1):
        p = [float(c) for c in counts[:i]]
        p[i - 1] += float(sum(counts[i:]))
        q = [0.0] * i
        for j in range(levels):
            lo, hi = j * i // levels, (j + 1) * i // levels
            merged = sum(counts[lo:hi])
            nz = [k for k in range(lo, hi) if p[k] > 0]
            for k in nz:
                q[k] = merged / len(nz)
        if sum(q) == 0:
            continue
        if tensorrt:
            qs = sum(q)
            q = [v / qs for v in q]
            if any(v == 0 for v in q):
                q = [v if v > 0 else 1e-4 for v in q]
                q = [v / sum(q) for v in q]
            p = [v / total for v in p]
        else:
            p = [v / total for v in p]
            q = [max(v / total, 1e-4 / i) for v in q]
        kl = sum(pk * math.log(pk / qk) for pk, qk in zip(p, q, strict=True) if pk > 0)
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


def test_exact_zeros_do_not_move_the_threshold():
    """A ReLU output: half exact zeros.  TensorRT's loop, zeros in bin 0, clips far
    more than the same values without the zeros; here the zeros change nothing."""
    rng = np.random.default_rng(1)
    tail = rng.exponential(1.0, 50_000)
    amax = float(tail.max())
    with_zeros, without = AbsHistogram(amax, 256), AbsHistogram(amax, 256)
    with_zeros.add(np.concatenate([tail, np.zeros(50_000)]))
    without.add(tail)
    assert with_zeros.zeros == 50_000 and without.zeros == 0
    assert kl_threshold(with_zeros, levels=16) == kl_threshold(without, levels=16)
    literal = with_zeros.counts.copy()
    literal[0] += with_zeros.zeros
    collapsed = _plain_kl_threshold(literal.tolist(), 16, with_zeros.width, tensorrt=True)
    assert collapsed < 0.5 * kl_threshold(with_zeros, levels=16)


def test_a_range_away_from_zero_is_not_clipped_to_one_bin():
    """HardSigmoid gates in [0.4, 1.0] of the range: TensorRT's loop finds KL = 0 just above
    the smallest value (P and renormalized Q the same spike) and clips nearly everything."""
    rng = np.random.default_rng(2)
    h = AbsHistogram(1.0, 128)
    h.add(rng.uniform(0.4, 1.0, 2000))
    literal = _plain_kl_threshold(h.counts.tolist(), 8, h.width, tensorrt=True)
    assert h.clipped_fraction(literal) > 0.9
    assert kl_threshold(h, levels=8) > 0.95 and h.clipped_fraction(kl_threshold(h, 8)) < 0.01


def test_a_softmax_spike_near_zero_does_not_clip_the_confident_class():
    """Probabilities of a confident classifier: 90% tiny values in bin 0, 10% near 1 (on
    LeNet's softmax the literal loop clipped 10% of the values, the CLI test's warning)."""
    rng = np.random.default_rng(4)
    probs = np.concatenate([rng.uniform(0, 1e-4, 9000), rng.uniform(0.9, 1.0, 1000)])
    h = AbsHistogram(1.0, 256)
    h.add(probs)
    assert h.clipped_fraction(kl_threshold(h, levels=16)) < 0.01


def test_percentile_threshold_by_hand():
    h = AbsHistogram(2048.0)                     # bin width 1
    h.counts[0], h.counts[10], h.counts[2047] = 9_990, 9, 1
    assert percentile_threshold(h, 99.9) == 1.0   # 9990 of 10000 within bin 0
    assert percentile_threshold(h, 99.99) == 11.0  # 9999 reached in bin 10
    assert percentile_threshold(h, 100) == 2048.0
    with pytest.raises(ValueError, match="percentile 0"):
        percentile_threshold(h, 0)
