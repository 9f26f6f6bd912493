from __future__ import annotations

import numpy as np
import pytest

from accel.compiler.quantize import (
    conv_quant,
    quantize_weights,
    round_half_away,
)


def test_round_half_away():
    assert round_half_away(np.array([0.5, -0.5, 1.5, -1.5, 2.4, -2.6])).tolist() == \
        [1, -1, 2, -2, 2, -3]


def test_per_channel_weights_hand_case():
    w = np.array([[1.0, -0.5], [0.0, 0.0], [-2.54, 1.27]]).reshape(3, 2, 1, 1)
    q, s = quantize_weights(w)
    # the all-zero channel gets the floor scale (largest scale / 256)
    assert s.tolist() == pytest.approx([1 / 127, 2.54 / 127 / 256, 2.54 / 127])
    assert q.reshape(3, 2).tolist() == [[127, -64], [0, 0], [-127, 64]]  # -63.5 -> -64


def _pipeline(acc, p):
    """The NVDLA conv+SDP arithmetic written out with Python integers."""
    def rnd(v, n):
        if n == 0:
            return v
        mag = (abs(v) + (1 << (n - 1))) >> n
        return mag if v >= 0 else -mag
    out = []
    for k, a in enumerate(acc):
        a1 = max(-2**31, min(2**31 - 1, rnd(int(a), p.clip_truncate)))
        a2 = a1 + (int(p.bias[k]) << p.bias_shift if p.bias is not None else 0)
        a4 = max(-2**31, min(2**31 - 1, rnd(a2 * int(p.mul[k]), p.mul_shift)))
        a5 = max(a4, 0) if p.relu else a4
        out.append(max(-128, min(127, a5)))
    return out


def test_integer_parameters_reproduce_the_float_layer():
    rng = np.random.default_rng(0)
    k, c = 6, 40
    w = rng.normal(0, 0.2, size=(k, c, 1, 1))
    w[2] *= 0.01  # a channel with much smaller weights
    b = rng.normal(0, 0.5, size=k)
    s_in, s_out = 0.02, 0.05
    p = conv_quant(w, b, s_in, s_out, relu=True)
    assert p.mul.dtype == np.int16 and p.bias.dtype == np.int16
    x_q = rng.integers(-127, 128, size=c)
    acc = (p.weight.reshape(k, c).astype(np.int64) * x_q).sum(axis=1)
    got = np.array(_pipeline(acc, p)) * s_out
    # float layer on the same quantized input
    want = np.maximum((w.reshape(k, c) * (x_q * s_in)).sum(axis=1) + b, 0)
    want = np.clip(want, -128 * s_out, 127 * s_out)
    # error budget: weight quantization + half an output step
    assert np.max(np.abs(got - want)) < 0.05 * np.abs(want).max() + s_out


def test_big_accumulators_get_a_clip_truncate():
    w = np.ones((1, 8192, 3, 3))
    p = conv_quant(w, None, 1.0, 1.0, relu=False)
    # 127 * 128 * 73728 needs 31+ bits: 1_198_522_368 * ... -> truncate > 0
    assert p.clip_truncate == (127 * 128 * 8192 * 9).bit_length() - 31


def test_bad_scales_are_named():
    with pytest.raises(ValueError, match="conv7: activation scales must be positive"):
        conv_quant(np.ones((1, 1, 1, 1)), None, 0.0, 1.0, relu=False, name="conv7")


def _weights_with_scales(scales):
    """KCRS weights whose per-channel max |w| is 127 * scale."""
    return np.array([[s * 127, -s] for s in scales]).reshape(len(scales), 2, 1, 1)


def test_multiplier_and_bias_by_hand():
    # rescale s_in*s_w/s_out = [0.125, 0.0625]; 0.125 * 2**18 = 32768 overflows int16 -> shift 17
    p = conv_quant(_weights_with_scales([0.25, 0.125]), np.array([1.0, -1.0]), 0.5, 1.0,
                   relu=True)
    assert p.mul_shift == 17 and p.mul.tolist() == [16384, 8192]
    # bias / (s_in s_w) = [1/0.125, -1/0.0625] = [8, -16]: fits int16, no ALU shift
    assert p.bias.tolist() == [8, -16] and p.bias_shift == 0
    assert p.relu and (p.cvt_offset, p.cvt_scale, p.cvt_shift) == (0, 1, 0)


def test_large_bias_gets_an_alu_shift():
    # 4096 channels of weight 127 reach |acc| = 127*128*4096 ~ 2**26, so a bias of
    # b32 = 2**20 matters; it needs 21 bits -> shift 21 - 15 = 6, stored as 2**14
    w = np.full((1, 4096, 1, 1), 0.125 * 127)
    p = conv_quant(w, np.array([0.125 * 2**20]), 1.0, 1.0, relu=False)
    assert p.bias_shift == 6 and p.bias.tolist() == [2**14]


def test_dead_channel_does_not_wipe_out_the_other_biases():
    """A trained layer's dead channel (weights 1e-27, bias -8e-15) next to live ones."""
    w = np.array([[0.3, -0.2], [1e-27, -1e-27], [0.1, 0.05]]).reshape(3, 2, 1, 1)
    b = np.array([0.25, -8e-15, -0.125])
    p = conv_quant(w, b, 0.01, 0.02, relu=False)
    assert p.bias_shift == 0
    # live channels keep their bias exactly: b / (s_in * s_w)
    s_w = np.array([0.3, 0.3 / 256, 0.1]) / 127
    assert p.bias[[0, 2]].tolist() == [round(0.25 / (0.01 * s_w[0])),
                                       -round(0.125 / (0.01 * s_w[2]))]
    assert p.bias[1] == 0 and p.weight[1].tolist() == [[[0]], [[0]]]


def test_bias_beyond_saturation_is_clipped_without_changing_results():
    w = np.array([[0.5, 0.5]]).reshape(1, 2, 1, 1)
    p = conv_quant(w, np.array([1e6]), 0.01, 0.01, relu=False)
    assert p.bias_shift < 16
    acc = np.array([-(127 * 128 * 2)])  # the most negative accumulator
    assert _pipeline(acc, p) == [127]   # still saturated high, as the float layer is


def test_relu_cap_needs_x2_only_inside_the_int8_range():
    w = _weights_with_scales([0.25])
    inside = conv_quant(w, None, 0.5, 6.0 / 100, relu=True, relu_max=6.0)
    assert inside.clip_max == 100
    outside = conv_quant(w, None, 0.5, 6.0 / 127, relu=True, relu_max=6.0)
    assert outside.clip_max is None  # saturation at 127 is the cap already
    with pytest.raises(ValueError, match="a ReLU cap needs a ReLU"):
        conv_quant(w, None, 0.5, 0.1, relu=False, relu_max=6.0)
