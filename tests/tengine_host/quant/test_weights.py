from __future__ import annotations

import numpy as np

from tengine_host.quant.weights import quantize_activation, round_half_away


def test_round_half_away_differs_from_numpy_on_even_halves():
    assert round_half_away(np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4])).tolist() == \
        [1, 2, 3, -1, -3, 2]


def test_activation_uses_the_full_int8_range():
    q = quantize_activation(np.array([-300.0, -127.5, 126.5, 300.0]), 1.0)
    assert q.tolist() == [-128, -128, 127, 127]


def test_activation_quantization_saturates_and_rounds_away():
    q = quantize_activation(np.array([0.05, -0.05, 100.0, -100.0]), 0.1)
    assert q.tolist() == [1, -1, 127, -128]


def test_activation_quantization_equals_the_plain_rule_on_halves_and_extremes():
    """Against clip(round_half_away(x / scale)) written out: every quarter step (exact
    halves among them), the float32 extremes, infinities and signed zeros."""
    x = np.concatenate([np.arange(-1200, 1200, dtype=np.float32) * 0.25,
                        np.array([np.inf, -np.inf, 0.0, -0.0, 3.4e38, -3.4e38, 1e-45],
                                 dtype=np.float32)])
    for scale in (1.0, 0.5, 0.1, 1 / 3, 2.0):
        want = np.clip(round_half_away(x.astype(np.float64) / scale), -128, 127).astype(np.int8)
        np.testing.assert_array_equal(quantize_activation(x, scale), want)
