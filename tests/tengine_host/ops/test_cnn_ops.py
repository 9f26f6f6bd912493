"""Conv fast paths, ConvTranspose, pooling, Resize, Pad, Slice, Split, LRN, ... against
onnxruntime on one-node models (the exhaustive onnx node tests are in the
conformance tier)."""

from __future__ import annotations

import numpy as np
import pytest


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("c, hw, stride, dil, bias", [
    (8, 9, 1, 1, True), (8, 10, 2, 1, False), (6, 11, 1, 2, True), (300, 5, 1, 1, True),
    (4, 40, 2, 1, True)])
def test_depthwise_conv(against_ort, rng, c, hw, stride, dil, bias):
    consts = {"w": _f32(rng, c, 1, 3, 3)}
    if bias:
        consts["b"] = _f32(rng, c)
    got, want = against_ort("Conv", {"x": _f32(rng, 1, c, hw, hw)}, consts,
                            {"group": c, "strides": [stride, stride], "pads": [1, 0, 2, 1],
                             "dilations": [dil, dil]})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs, wshape", [
    ({"group": 2, "pads": [1, 1, 1, 1]}, (6, 2, 3, 3)),              # grouped
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, (5, 4, 4, 4)),   # SAME_LOWER
    ({}, (5, 4, 1, 1)),                                              # pointwise fast path
    ({"strides": [2, 2]}, (5, 4, 1, 1)),                             # strided 1x1
])
def test_conv_variants(against_ort, rng, attrs, wshape):
    got, want = against_ort("Conv", {"x": _f32(rng, 2, 4, 9, 8)}, {"w": _f32(rng, *wshape)},
                            attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_1d_and_3d(against_ort, rng):
    got, want = against_ort("Conv", {"x": _f32(rng, 1, 3, 12)}, {"w": _f32(rng, 4, 3, 3)},
                            {"pads": [2, 0], "dilations": [2]})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got, want = against_ort("Conv", {"x": _f32(rng, 1, 2, 5, 6, 4)},
                            {"w": _f32(rng, 3, 2, 2, 3, 2)}, {"strides": [1, 2, 1]})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 0]},
    {"group": 2, "dilations": [2, 1]},
    {"strides": [2, 3], "output_shape": [10, 14]},
])
def test_conv_transpose(against_ort, rng, attrs):
    got, want = against_ort("ConvTranspose", {"x": _f32(rng, 1, 4, 5, 5)},
                            {"w": _f32(rng, 4, 3, 3, 3), "b": _f32(rng, 3 * attrs.get("group", 1))},
                            attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1,
     "ceil_mode": 1},
    {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"},
])
def test_average_pool(against_ort, rng, attrs):
    got, want = against_ort("AveragePool", {"x": _f32(rng, 1, 2, 7, 8)}, attrs=attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_maxpool_ceil_and_global_pools(against_ort, rng):
    x = _f32(rng, 1, 3, 7, 7)
    got, want = against_ort("MaxPool", {"x": x}, attrs={"kernel_shape": [3, 3],
                                                         "strides": [2, 2], "ceil_mode": 1})
    np.testing.assert_array_equal(got, want)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        got, want = against_ort(op, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("attrs, scales", [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, [1, 1, 2, 2]),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, [1, 1, 2, 3]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 1.6, 0.5]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 1, 0.6, 2]),
    ({"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
      "nearest_mode": "round_prefer_ceil"}, [1, 1, 3, 0.5]),
])
def test_resize(against_ort, rng, attrs, scales):
    got, want = against_ort("Resize", {"x": _f32(rng, 1, 2, 5, 6)},
                            {"roi": np.zeros(0, np.float32),
                             "scales": np.array(scales, np.float32)}, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes_any_axis(against_ort, rng, mode):
    got, want = against_ort("Pad", {"x": _f32(rng, 2, 3, 4)},
                            {"pads": np.array([1, 0, 2, 0, 2, 1], np.int64)},
                            {"mode": mode})
    np.testing.assert_array_equal(got, want)


def test_slice_negative_steps_and_split(against_ort, rng):
    x = _f32(rng, 5, 6, 7)
    got, want = against_ort("Slice", {"x": x}, {
        "starts": np.array([-1, 1], np.int64), "ends": np.array([-100, 5], np.int64),
        "axes": np.array([2, 0], np.int64), "steps": np.array([-2, 3], np.int64)})
    np.testing.assert_array_equal(got, want)
    got, want = against_ort("Split", {"x": x}, {"s": np.array([2, 4], np.int64)},
                            {"axis": 1}, n_out=2)
    np.testing.assert_array_equal(got, want)


def test_elementwise_and_activation_ops(against_ort, rng):
    a, b = _f32(rng, 2, 3, 4), np.abs(_f32(rng, 3, 1)) + 0.5
    for op in ("Sub", "Mul", "Div", "Pow", "Max", "Min"):
        got, want = against_ort(op, {"a": a}, {"b": b})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op)
    for op, attrs in (("Sigmoid", {}), ("Tanh", {}), ("HardSigmoid", {"alpha": 0.3}),
                      ("HardSwish", {}), ("LeakyRelu", {"alpha": 0.2}), ("Erf", {}),
                      ("Exp", {})):
        got, want = against_ort(op, {"x": a * 3}, attrs=attrs, opset=14)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op)
    got, want = against_ort("PRelu", {"x": a}, {"s": _f32(rng, 3, 1)})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got, want = against_ort("Clip", {"x": a * 3}, {"lo": np.array(-1, np.float32),
                                                   "hi": np.array(2, np.float32)})
    np.testing.assert_array_equal(got, want)


def test_lrn_batchnorm_reduce(against_ort, rng):
    x = _f32(rng, 2, 7, 3, 3)
    got, want = against_ort("LRN", {"x": x}, attrs={"size": 5, "alpha": 0.01, "beta": 0.7,
                                                    "bias": 1.5})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    c = 7
    got, want = against_ort("BatchNormalization", {"x": x}, {
        "s": _f32(rng, c), "b": _f32(rng, c), "m": _f32(rng, c),
        "v": np.abs(_f32(rng, c)) + 0.1}, {"epsilon": 1e-3})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got, want = against_ort("ReduceMean", {"x": x}, attrs={"axes": [1, -1], "keepdims": 0},
                            opset=13)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got, want = against_ort("ReduceSum", {"x": x}, {"axes": np.array([2], np.int64)})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sigmoid_is_the_split_formula_exactly(rng):
    """Bit for bit ``1 / (1 + e)`` for x >= 0 and ``e / (1 + e)`` below, e = exp(-|x|) (the
    form that never overflows), written plainly, at the float32 extremes, signed zeros,
    subnormals and NaN too."""
    from tengine_host.ops.sigmoid import sigmoid
    x = np.concatenate([rng.normal(0, 8, 1000).astype(np.float32), np.array(
        [0.0, -0.0, 88.7, -88.7, -104.0, 1e-30, -1e-45, np.inf, -np.inf, np.nan],
        np.float32)])
    e = np.exp(-np.abs(x))
    want = np.array([1 / (1 + ei) if xi >= 0 else ei / (1 + ei)
                     for xi, ei in zip(x, e, strict=True)], np.float32)
    got = sigmoid(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
