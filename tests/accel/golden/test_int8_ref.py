"""int8 reference: hand-computed edge cases, and the accumulation against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accel.golden.int8_ref import accumulate, conv2d_int8, fc_int8, round_shift, sdp_int8

NO_SDP = dict(clip_truncate=0, bias=None, bias_shift=0, mul=None, mul_shift=0, relu=False,
              cvt_offset=0, cvt_scale=1, cvt_shift=0)


def _sdp(acc, **kw):
    return sdp_int8(np.array(acc, dtype=np.int64).reshape(1, -1), **{**NO_SDP, **kw})[0].tolist()


def test_round_shift_halves_away_from_zero():
    assert round_shift(np.array([1, -1, 3, -3, 2, -2, 7, -7]), 1).tolist() == \
        [1, -1, 2, -2, 1, -1, 4, -4]
    assert round_shift(np.array([6, -6, 5, -5]), 2).tolist() == [2, -2, 1, -1]  # 1.5, 1.25


def test_clip_truncate_rounds_negative_halves_away():
    # 1x1 conv with weight 1 passes x through; truncate 1 halves with rounding.
    x = np.array([3, -3, 1, -1, 2], dtype=np.int8).reshape(1, 5, 1, 1).transpose(1, 0, 2, 3)
    w = np.ones((1, 1, 1, 1), dtype=np.int8)
    y = conv2d_int8(x, w, **{**NO_SDP, "clip_truncate": 1})
    assert y.reshape(-1).tolist() == [2, -2, 1, -1, 1]


def test_accumulator_saturates_at_34_bits_before_truncate():
    # 2**40 -> 2**33-1; /2**16 -> 131072 (131071.99998 rounds up); /2**17 -> 1.
    # Without the 34-bit clamp it would be 2**24 / 2**17 = 128 -> 127.
    assert _sdp([2**40], clip_truncate=16, mul_shift=17) == [1]
    assert _sdp([-(2**40)], clip_truncate=16, mul_shift=17) == [-1]


def test_bias_add_is_33_bit_exact_then_truncate_saturates_to_int32():
    # a1 = 2**31-1 (int32 max after CACC), bias 32767 << 15 = 1073709056:
    # a2 = 3221192703 (not clamped), /2**16 = 49151.49998 -> 49151, cvt /2**9 = 95.998 -> 96.
    assert _sdp([2**33 - 1], bias=np.array([32767]), bias_shift=15, mul_shift=16,
                cvt_shift=9) == [96]


def test_multiplier_negative_half_and_relu():
    # 5 * -3 = -15, /2 = -7.5 -> -8 ; relu clamps it to 0.
    assert _sdp([5], mul=np.array([-3]), mul_shift=1) == [-8]
    assert _sdp([5], mul=np.array([-3]), mul_shift=1, relu=True) == [0]


def test_output_converter_offset_scale_shift_and_int8_saturation():
    # (-3 - 0) * 1 / 2 = -1.5 -> -2 ; (10 - 4) * 3 / 4 = 4.5 -> 5 ; 1000 -> 127 ; -1000 -> -128
    assert _sdp([-3], cvt_shift=1) == [-2]
    assert _sdp([10], cvt_offset=4, cvt_scale=3, cvt_shift=2) == [5]
    assert _sdp([1000, -1000]) == [127, -128]


def test_padding_positions_hold_pad_value():
    x = np.full((1, 1, 1, 1), 2, dtype=np.int8)
    w = np.ones((1, 1, 3, 3), dtype=np.int8)
    # One real tap (2) plus eight padded taps of -1: 2 - 8 = -6.
    assert conv2d_int8(x, w, pads=(1, 1, 1, 1), pad_value=-1).item() == -6


def test_fc_hand_computed():
    x = np.array([[1, 2, 3]], dtype=np.int8)
    w = np.array([[1, 1, 1], [-1, 0, 2]], dtype=np.int8)
    # acc [6, 5]; + bias<<1 [2, -2] = [8, 3]; * [3, 5] = [24, 15]; /4 = [6, 3.75->4]
    y = fc_int8(x, w, **{**NO_SDP, "bias": np.array([1, -1], np.int16), "bias_shift": 1,
                         "mul": np.array([3, 5], np.int16), "mul_shift": 2})
    assert y.tolist() == [[6, 4]]


def test_rejects_out_of_range_inputs():
    with pytest.raises(ValueError, match="x values must lie in"):
        accumulate(np.array([[[[200]]]]), np.ones((1, 1, 1, 1), np.int8), stride=1,
                   pads=(0, 0, 0, 0), dilation=1)
    with pytest.raises(ValueError, match="clip_truncate"):
        _sdp([1], clip_truncate=17)


@pytest.mark.parametrize("stride, pads, dilation, group", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 1), (1, 2, 0, 1), (1, 1), 1),
    ((1, 2), (2, 2, 2, 2), (2, 1), 1),
    ((1, 1), (1, 1, 1, 1), (1, 1), 2),
])
def test_accumulate_matches_onnxruntime(stride, pads, dilation, group):
    # float32 sums of int8 products are exact here (|sum| < 2**24), so ORT is an exact oracle.
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (2, 4, 7, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 4 // group, 3, 3)).astype(np.int8)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=list(stride), pads=list(pads),
                            dilations=list(dilation), group=group)
    graph = helper.make_graph(
        [node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w.astype(np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x.astype(np.float32)})
    got = accumulate(x, w, stride=stride, pads=pads, dilation=dilation, group=group)
    np.testing.assert_array_equal(got, want[0].astype(np.int64))


def test_clip_max_caps_after_relu_before_the_converter():
    # a: -5 -> relu 0; 40 stays; 300 -> min(300, 100) = 100; the converter then halves
    acc = np.array([-5, 40, 300]).reshape(1, 3)
    out = sdp_int8(acc, clip_truncate=0, bias=None, bias_shift=0, mul=None, mul_shift=0,
                   relu=True, cvt_offset=0, cvt_scale=1, cvt_shift=1, clip_max=100)
    assert out.tolist() == [[0, 20, 50]]
