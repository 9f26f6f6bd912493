"""Small ONNX graphs whose op under test reads (or writes) one-signed tensors, so that
:func:`tengine_host.quant.zero_point.assign_zero_points` gives them zero point -128.

Each case names the op type under test; the test checks that some node of that type
has a zero-pointed activation among its inputs and outputs (else it would test
nothing), then runs the graph on the cmodel against the int8 reference and fp32.
The graph input is one-signed too (the tests feed ``|N(0, 1)|``), so the first
layer reads a zero point as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from .op_cases import LUT_PRESETS, G


@dataclass(frozen=True)
class ZpCase:
    name: str
    op: str                        # op type under test (after the host's passes)
    build: Callable[[], onnx.ModelProto]
    cosine: float = 0.999          # DLA vs onnxruntime fp32, at least
    presets: tuple[str, ...] = ("nv_small",)


def _one(shape, f) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = G(2)
        return g.model([f(g, g.input(shape))])
    return build


def _relu(g: G, x: str, cin: int, cout: int, k: int = 1) -> str:
    """A ReLU'd convolution (one-signed; the host fuses the ReLU into the conv)."""
    return g.op("Relu", [g.conv(x, cin, cout, k)])


def _two(op: str, after: str | None = None):
    """``op`` of two one-signed tensors (tied: one scale, one zero point)."""
    def f(g: G, x: str) -> str:
        y = g.op(op, [_relu(g, x, 16, 32), _relu(g, x, 16, 32, 3)])
        return g.op(after, [y]) if after else y
    return f


def _on_relu(op: str, *consts, c: int = 32, **attrs):
    """``op`` on a one-signed tensor, with constant inputs made by ``consts(g)``."""
    def f(g: G, x: str) -> str:
        return g.op(op, [_relu(g, x, 16, c, 3), *(k(g) for k in consts)], **attrs)
    return f


def _conv_on_relu(k: int, group: int = 1, stride: int = 1):
    def f(g: G, x: str) -> str:
        return g.conv(_relu(g, x, 16, 32), 32, 32, k, stride=stride, group=group)
    return f


def _gemm_on_relu(g: G, x: str) -> str:
    y = g.op("Flatten", [_relu(g, x, 16, 16, 3)], axis=1)
    w = g.const(g.rng.normal(0, 0.03, (24, 16 * 12 * 10)))
    return g.op("Gemm", [y, w, g.const(g.rng.normal(0, .1, 24))], transB=1)


def _deconv_on_relu(g: G, x: str) -> str:
    w = g.const(g.rng.normal(0, 0.3, (32, 24, 2, 2)))
    return g.op("ConvTranspose", [_relu(g, x, 16, 32), w, g.const(g.rng.normal(0, .1, 24))],
                kernel_shape=[2, 2], strides=[2, 2])


def _deconv_phases_on_relu(g: G, x: str) -> str:
    """4x4 / stride 2 / padding 1: four 2x2 phase convolutions, each padded with z_in and
    each bias absorbing the zero point times its own taps' sums."""
    w = g.const(g.rng.normal(0, 0.15, (32, 24, 4, 4)))
    return g.op("ConvTranspose", [_relu(g, x, 16, 32), w, g.const(g.rng.normal(0, .1, 24))],
                kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])


def _residual(g: G, x: str) -> str:
    """A ReLU'd shortcut added to a signed branch, then ReLU (BlazeFace, ResNet): the
    shortcut has a zero point and half the step of the branch, so the sum adds at two
    scales."""
    y = _relu(g, x, 16, 32, 3)
    return g.op("Relu", [g.op("Add", [g.conv(y, 32, 32, 3), y])])


def _product(g: G, x: str) -> str:
    """A one-signed tensor times another (the operand stays symmetric)."""
    return g.op("Mul", [_relu(g, x, 16, 32), _relu(g, x, 16, 32, 3)])


def _product_signed_main(g: G, x: str) -> str:
    """A signed tensor times a one-signed one: the operand takes the zero point."""
    return g.op("Mul", [g.conv(x, 16, 32, 1), _relu(g, x, 16, 32, 3)])


def _se(signed: bool):
    """A squeeze-excite block; its input ReLU'd (the main input takes the zero point) or
    signed (the gate does, as after MobileNetV3's HardSwish)."""
    def f(g: G, x: str) -> str:
        y = g.conv(x, 16, 32, 3) if signed else _relu(g, x, 16, 32, 3)
        gate = g.op("HardSigmoid", [g.conv(g.op("GlobalAveragePool", [y]), 32, 32, 1)],
                    alpha=0.2, beta=0.5)
        return g.op("Mul", [y, gate])
    return f


def _concat_relus(axis: int, sizes=(32, 32)):
    def f(g: G, x: str) -> str:
        parts = [_relu(g, x, 16, c, 1 + 2 * (i % 2)) for i, c in enumerate(sizes)]
        return g.op("Concat", parts, axis=axis)
    return f


def _split_relu(g: G, x: str) -> str:
    a, b = g.op("Split", [_relu(g, x, 16, 64), g.const(np.array([32, 32]))], n_out=2, axis=1)
    return g.op("Add", [a, b])


def _clip(lo: float, hi: float):
    def f(g: G, x: str) -> str:
        return g.op("Clip", [_relu(g, x, 16, 32, 3), g.const(lo), g.const(hi)])
    return f


def _bn(g: G, x: str) -> str:
    k = [g.const(g.rng.uniform(0.5, 1.5, 32)), g.const(g.rng.normal(0, .2, 32)),
         g.const(g.rng.normal(0, .2, 32)), g.const(g.rng.uniform(0.5, 1.5, 32))]
    return g.op("BatchNormalization", [_relu(g, x, 16, 32, 3), *k])


def _resize(scales, mode="nearest", coord="asymmetric"):
    def f(g: G, x: str) -> str:
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = "floor"
        return g.op("Resize", [_relu(g, x, 16, 32), g.const(np.zeros(0)),
                               g.const(np.array(scales, np.float32))], **attrs)
    return f


def _c(value) -> Callable[[G], str]:
    return lambda g: g.const(value)


SHAPE = (1, 16, 12, 10)

CASES = [
    # convolutions reading a zero point: bias absorption, border padding with z_in
    ZpCase("conv3x3_pad", "Conv", _one(SHAPE, _conv_on_relu(3))),
    ZpCase("conv5x5_stride2", "Conv", _one(SHAPE, _conv_on_relu(5, stride=2))),
    ZpCase("depthwise", "Conv", _one(SHAPE, _conv_on_relu(3, group=32)), presets=(
        "nv_small", "nv_large")),
    ZpCase("grouped", "Conv", _one(SHAPE, _conv_on_relu(3, group=4))),
    ZpCase("gemm", "Gemm", _one(SHAPE, _gemm_on_relu)),
    ZpCase("convtranspose", "ConvTranspose", _one(SHAPE, _deconv_on_relu)),
    ZpCase("convtranspose_phases", "ConvTranspose", _one(SHAPE, _deconv_phases_on_relu),
           presets=("nv_small", "nv_large")),
    # element-wise
    ZpCase("add", "Add", _one(SHAPE, _two("Add"))),
    ZpCase("add_relu", "Add", _one(SHAPE, _two("Add", "Relu"))),
    ZpCase("add_residual", "Add", _one(SHAPE, _residual), presets=("nv_small", "nv_large")),
    ZpCase("sub", "Sub", _one(SHAPE, _two("Sub"))),
    ZpCase("sub_relu", "Sub", _one(SHAPE, _two("Sub", "Relu"))),
    ZpCase("max", "Max", _one(SHAPE, _two("Max"))),
    ZpCase("min", "Min", _one(SHAPE, _two("Min"))),
    ZpCase("mul", "Mul", _one(SHAPE, _product)),
    ZpCase("mul_operand", "Mul", _one(SHAPE, _product_signed_main)),
    ZpCase("squeeze_excite", "Mul", _one(SHAPE, _se(False))),
    ZpCase("squeeze_excite_gate", "Mul", _one(SHAPE, _se(True))),
    ZpCase("add_scalar", "Add", _one(SHAPE, _on_relu("Add", _c(-0.3)))),
    ZpCase("mul_channel", "Mul", _one(SHAPE, _on_relu("Mul", _c(np.linspace(
        -2, 2, 32).reshape(32, 1, 1))))),
    # activations
    ZpCase("relu6", "Clip", _one(SHAPE, lambda g, x: g.op("Clip", [
        _two("Add")(g, x), g.const(0.0), g.const(1.0)]))),
    ZpCase("clip_floor", "Clip", _one(SHAPE, _clip(0.3, 1.2))),
    ZpCase("clip_floor_only", "Clip", _one(SHAPE, _clip(0.2, np.inf))),
    ZpCase("leaky_relu", "LeakyRelu", _one(SHAPE, _on_relu("LeakyRelu", alpha=0.1))),
    ZpCase("batchnorm", "BatchNormalization", _one(SHAPE, _bn)),
    ZpCase("hard_sigmoid", "HardSigmoid", _one(SHAPE, _on_relu(
        "HardSigmoid", alpha=0.2, beta=0.1))),
    ZpCase("hard_swish", "HardSwish", _one(SHAPE, _on_relu("HardSwish"))),
    ZpCase("sigmoid", "Sigmoid", _one(SHAPE, _on_relu("Sigmoid")), presets=LUT_PRESETS[:1]),
    ZpCase("tanh", "Tanh", _one(SHAPE, _on_relu("Tanh")), presets=LUT_PRESETS[:1]),
    # pooling
    ZpCase("maxpool_pads", "MaxPool", _one(SHAPE, _on_relu(
        "MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))),
    ZpCase("avgpool_pads", "AveragePool", _one(SHAPE, _on_relu(
        "AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
        count_include_pad=1)), presets=("nv_small", "nv_large")),
    ZpCase("gap_conv", "GlobalAveragePool", _one(SHAPE, _on_relu("GlobalAveragePool"))),
    ZpCase("gap_passes", "GlobalAveragePool", _one((1, 16, 40, 40), _on_relu(
        "GlobalAveragePool"))),
    # data movement
    ZpCase("concat_channels", "Concat", _one(SHAPE, _concat_relus(1))),
    ZpCase("concat_unaligned", "Concat", _one(SHAPE, _concat_relus(1, (12, 20, 5)))),
    ZpCase("concat_rows", "Concat", _one(SHAPE, _concat_relus(2))),
    ZpCase("split", "Split", _one(SHAPE, _split_relu)),
    ZpCase("pad_spatial", "Pad", _one(SHAPE, _on_relu("Pad", _c(np.array(
        [0, 0, 1, 2, 0, 0, 1, 0], np.int64)), mode="constant"))),
    ZpCase("pad_channels", "Pad", _one(SHAPE, _on_relu("Pad", _c(np.array(
        [0, 0, 0, 0, 0, 32, 0, 0], np.int64)), mode="constant"))),
    ZpCase("resize_nearest", "Resize", _one(SHAPE, _resize([1, 1, 2, 2]))),
    ZpCase("resize_bilinear", "Resize", _one(SHAPE, _resize([1, 1, 2, 2], "linear",
                                                              "half_pixel"))),
    ZpCase("resize_bilinear_4x", "Resize", _one(SHAPE, _resize([1, 1, 4, 4], "linear",
                                                                 "half_pixel"))),
]
