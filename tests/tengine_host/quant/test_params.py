from __future__ import annotations

import numpy as np

from tengine_host.int8_ref import conv2d_int8
from tengine_host.ops.conv import conv
from tengine_host.quant.params import conv_quant_params
from tengine_host.quant.weights import quantize_activation, quantize_weights, weight_scales


def test_multiplier_and_bias_by_hand():
    # ratios s_in*s_w/s_out = [0.125, 0.0625]; 0.125 * 2**18 = 32768 overflows int16 -> shift 17.
    p = conv_quant_params(0.5, np.array([0.25, 0.125]), 1.0, np.array([1.0, -1.0]), relu=True)
    assert p.mul_shift == 17 and p.mul.tolist() == [16384, 8192]
    # bias / (s_in s_w) = [1/0.125, -1/0.0625] = [8, -16]: fits int16, no shift.
    assert p.bias.tolist() == [8, -16] and p.bias_shift == 0
    assert p.relu and (p.cvt_offset, p.cvt_scale, p.cvt_shift) == (0, 1, 0)


def test_large_bias_gets_alu_shift():
    # b32 = 2**20 needs 21 bits -> shift 21 - 15 = 6, stored 2**14.
    p = conv_quant_params(1.0, np.array([0.125]), 1.0, np.array([0.125 * 2**20]))
    assert p.bias_shift == 6 and p.bias.tolist() == [2**14]


def test_int8_conv_tracks_fp32_within_a_couple_of_output_steps():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = (rng.standard_normal((4, 8, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    geom = dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1])
    ref = conv(x, w, b, **geom)
    s_in, s_out = np.abs(x).max() / 127, np.abs(ref).max() / 127
    s_w = weight_scales(w)
    p = conv_quant_params(s_in, s_w, s_out, b)
    q = conv2d_int8(quantize_activation(x, s_in), quantize_weights(w, s_w), stride=1,
                    pads=(1, 1, 1, 1), dilation=1, **p.as_kwargs())
    err = np.abs(q * s_out - ref).max() / s_out
    assert err < 3, f"int8 result is {err:.2f} output steps from fp32"
