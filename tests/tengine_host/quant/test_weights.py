from __future__ import annotations

import numpy as np

from tengine_host.quant.weights import (
    dequantize,
    quantize_activation,
    quantize_counted,
    round_half_away,
)


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


def test_quantize_counts_nan_and_infinities_only():
    """The count is of the inputs that are NaN or infinite, not of a finite one whose
    quotient by a tiny scale overflows (1e308 / 1e-3): hand-picked values."""
    x = np.array([np.nan, 1.0, np.inf, -np.inf, 1e308, -0.0], dtype=np.float64)
    q, bad = quantize_counted(x, 1e-3)
    assert bad == 3
    assert q[1:].tolist() == [127, 127, -128, 127, 0]
    assert quantize_counted(np.ones((2, 3), dtype=np.float32), 0.5)[1] == 0


def test_dequantize_rounds_the_float64_product_once():
    """Against the plain form ``float32(float64(q) * scale)`` on every int8 value and int16
    extremes, scales whose products are not float32 values; per-channel scales too."""
    q8 = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    q16 = np.array([-32768, -1, 0, 1, 32767], dtype=np.int16)
    for scale in (1 / 3, 0.1, 2.0 ** -20, 7.000000123):
        for q in (q8, q16):
            want = (q.astype(np.float64) * scale).astype(np.float32)
            got = dequantize(q, scale)
            assert got.dtype == np.float32 and got.shape == q.shape
            np.testing.assert_array_equal(got, want)
    per_channel = np.linspace(0.01, 0.3, 16)[:, None]
    np.testing.assert_array_equal(dequantize(q8, per_channel),
                                  (q8 * per_channel).astype(np.float32))
    view = q8[:, ::2]                             # not contiguous
    np.testing.assert_array_equal(dequantize(view, 0.1), (view * 0.1).astype(np.float32))


def test_zero_point_shifts_the_codes_after_rounding_and_before_saturation():
    """Hand-computed: scale 0.5, zero point -128 - the code of 0 is -128, 127.5 is code 127
    (the top of a one-signed range), 128 saturates, a negative value clips to code -128
    (x = 0), and a half rounds away from zero before the shift (0.25 / 0.5 = 0.5 -> 1)."""
    x = np.array([0.0, 127.5, 128.0, -3.0, 0.25, 10.0])
    assert quantize_activation(x, 0.5, -128).tolist() == [-128, 127, 127, -128, -127, -108]
    assert quantize_activation(x, 0.5, 5).tolist() == [5, 127, 127, -1, 6, 25]
    q, bad = quantize_counted(np.array([np.nan, 1.0]), 0.5, -128)
    assert bad == 1 and q[1] == -126


def test_dequantize_subtracts_the_zero_point_first():
    q = np.array([-128, -127, 0, 127], dtype=np.int8)
    np.testing.assert_array_equal(dequantize(q, 0.5, -128), np.float32([0.0, 0.5, 64.0, 127.5]))
    np.testing.assert_array_equal(dequantize(q.astype(np.int16), 0.1, 3),
                                  ((q.astype(np.float64) - 3) * 0.1).astype(np.float32))
    np.testing.assert_array_equal(dequantize(q, np.array([0.5, 1, 2, 4]), -128),
                                  np.float32([0, 1, 256, 1020]))
