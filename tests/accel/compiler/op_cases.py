"""Small ONNX graphs, one per lowering feature of the op table (shared by the op tests).

Each case builds a model with ``onnx.helper`` and seeded weights; the tests
compile it for a preset, run it on the cmodel and compare (a) every DLA tensor
with the int8 CPU reference and (b) the result with onnxruntime's fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 14
LUT_PRESETS = ("nv_large", "nv_small_256_full")


class G:
    """A tiny graph builder: every method returns its output name."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def input(self, shape: tuple[int, ...], name: str = "x") -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def const(self, value) -> str:
        """A constant: integer arrays stay int64 (shapes, pads), the rest float32."""
        name = self._name("c")
        v = np.asarray(value)
        v = v.astype(np.int64 if v.dtype.kind in "iu" else np.float32)
        self.inits.append(numpy_helper.from_array(v, name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str:
        name = self._name(op_type.lower())
        outs = [f"{name}_y{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = True) -> str:
        w = self.rng.normal(0, np.sqrt(2.0 / (cin // group * k * k)), (cout, cin // group, k, k))
        ins = [x, self.const(w)]
        if bias:
            ins.append(self.const(self.rng.normal(0, 0.1, cout)))
        p = k // 2 if pad is None else pad
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[p] * 4, group=group)

    def model(self, outputs: list[str]) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "case", self.inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outputs], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
        done = onnx.shape_inference.infer_shapes(m, data_prop=True).graph
        inferred = {vi.name: vi for vi in (*done.value_info, *done.output)}
        for out in m.graph.output:
            vi = inferred.get(out.name)
            if vi is not None and vi.type.tensor_type.HasField("shape"):
                out.CopyFrom(vi)
        onnx.checker.check_model(m)
        return m


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], onnx.ModelProto]
    cosine: float = 0.999          # DLA vs onnxruntime fp32, at least
    lsb: float | None = None       # max |DLA - fp32| in output LSBs, when bounded per element
    presets: tuple[str, ...] = ("nv_small", "nv_large")


def _one(shape, f) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        g = G(1)
        return g.model([f(g, g.input(shape))])
    return build


def _add_two(op: str, act: bool = False):
    def f(g: G, x: str) -> str:
        a = g.conv(x, 16, 32, 1)
        b = g.conv(x, 16, 32, 3)
        y = g.op(op, [a, b])
        return g.op("Relu", [y]) if act else y
    return f


def _se(g: G, x: str) -> str:
    gate = g.op("HardSigmoid", [g.conv(g.op("GlobalAveragePool", [x]), 32, 32, 1)],
                alpha=0.2, beta=0.5)
    return g.op("Mul", [x, gate])


def _after_add(op: str, **attrs):
    """The op on a sum, so it cannot fuse into a convolution."""
    def f(g: G, x: str) -> str:
        s = g.op("Add", [g.conv(x, 16, 32, 1), g.conv(x, 16, 32, 1)])
        extra = []
        if op == "PRelu":
            extra = [g.const(g.rng.uniform(0.05, 0.3, (32, 1, 1)))]
        if op == "BatchNormalization":
            extra = [g.const(g.rng.uniform(0.5, 1.5, 32)), g.const(g.rng.normal(0, .2, 32)),
                     g.const(g.rng.normal(0, .2, 32)), g.const(g.rng.uniform(0.5, 1.5, 32))]
        if op == "Clip":
            extra = [g.const(-1.0), g.const(2.0)]
        return g.op(op, [s, *extra], **attrs)
    return f


def _silu(g: G, x: str) -> str:
    """YOLOX's SiLU as exported: Mul(x, Sigmoid(x)) after a conv (one Swish on the host)."""
    y = g.conv(x, 16, 32, 3)
    return g.op("Mul", [y, g.op("Sigmoid", [y])])


def _mish(g: G, x: str) -> str:
    y = g.conv(x, 16, 32, 3)
    return g.op("Mul", [y, g.op("Tanh", [g.op("Softplus", [y])])])


def _gelu(g: G, x: str) -> str:
    """GELU as BERT-style exporters write it: x * 0.5 * (1 + erf(x / sqrt 2))."""
    y = g.conv(x, 16, 32, 3)
    e = g.op("Erf", [g.op("Div", [y, g.const(np.sqrt(2.0))])])
    return g.op("Mul", [g.op("Mul", [y, g.const(0.5)]), g.op("Add", [e, g.const(1.0)])])


def _concat(axis: int, with_input: bool = False):
    def f(g: G, x: str) -> str:
        a = g.op("Relu", [g.conv(x, 32, 32, 1)])
        b = g.conv(x, 32, 32, 3)
        parts = [a, b, x] if with_input else [a, b]
        return g.conv(g.op("Concat", parts, axis=axis), 96 if with_input and axis == 1 else
                      (64 if axis == 1 else 32), 32, 1)
    return f


def _split(g: G, x: str) -> str:
    a, b = g.op("Split", [g.conv(x, 32, 64, 1), g.const(np.array([32, 32]))], n_out=2, axis=1)
    return g.op("Add", [g.conv(a, 32, 32, 1), b])


def _slice_rows(g: G, x: str) -> str:
    y = g.conv(x, 32, 32, 1)
    return g.op("Slice", [y, g.const(np.array([2])), g.const(np.array([9])),
                          g.const(np.array([2]))])


def _pad(pads, channels: int = 32, value: float | None = None):
    def f(g: G, x: str) -> str:
        y = g.op("Relu", [g.conv(x, 32, channels, 3)])
        args = [y, g.const(np.array(pads, np.int64))]
        if value is not None:
            args.append(g.const(np.array(value, np.float32)))
        return g.op("Pad", args, mode="constant")
    return f


def _split_unaligned(g: G, x: str) -> str:
    """40 channels split 12 + 28: the second piece starts inside an atom on every preset."""
    a, b = g.op("Split", [g.conv(x, 32, 40, 1), g.const(np.array([12, 28]))], n_out=2, axis=1)
    return g.op("Add", [g.conv(a, 12, 16, 1), g.conv(b, 28, 16, 3)])


def _slice(starts, ends, axes, steps, cin: int = 32, cout: int = 48):
    def f(g: G, x: str) -> str:
        y = g.op("Relu", [g.conv(x, cin, cout, 3)])
        return g.op("Slice", [y] + [g.const(np.array(v)) for v in (starts, ends, axes, steps)])
    return f


def _focus(g: G, x: str) -> str:
    """YOLOv5 / YOLOX's Focus stem on the image: four pixel phases stacked on channels."""
    phases = [g.op("Slice", [x] + [g.const(np.array(v)) for v in ([dy, dx], [10**9] * 2,
                                                                   [2, 3], [2, 2])])
              for dx in (0, 1) for dy in (0, 1)]
    return g.conv(g.op("Concat", phases, axis=1), 12, 16, 3)


def _slice_channels(start: int, end: int):
    def f(g: G, x: str) -> str:
        y = g.op("Relu", [g.conv(x, 32, 48, 3)])
        return g.op("Slice", [y, g.const(np.array([start])), g.const(np.array([end])),
                              g.const(np.array([1]))])
    return f


def _resize(scales, mode="nearest", coord="asymmetric"):
    def f(g: G, x: str) -> str:
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = "floor"
        y = g.conv(x, 32, 32, 1)
        return g.op("Resize", [y, g.const(np.zeros(0)), g.const(np.array(scales, np.float32))],
                    **attrs)
    return f


def _deconv(g: G, x: str) -> str:
    w = g.const(g.rng.normal(0, 0.3, (32, 24, 2, 2)))
    return g.op("Relu", [g.op("ConvTranspose", [g.conv(x, 32, 32, 1), w,
                                                g.const(g.rng.normal(0, .1, 24))],
                              kernel_shape=[2, 2], strides=[2, 2])])


def _deconv_overlapping(k: int, stride: int, pads: int, out_pad: int = 0, relu_in=False):
    """A transposed convolution whose windows overlap or are padded: its output phases as
    convolutions (``relu_in``: its input one-signed, with a zero point)."""
    def f(g: G, x: str) -> str:
        y = g.conv(x, 32, 24, 1)
        if relu_in:
            y = g.op("Relu", [y])
        w = g.const(g.rng.normal(0, 0.15, (24, 16, k, k)))
        return g.op("ConvTranspose", [y, w, g.const(g.rng.normal(0, .1, 16))],
                    kernel_shape=[k, k], strides=[stride, stride], pads=[pads] * 4,
                    output_padding=[out_pad, out_pad])
    return f


def _pool(op: str, c: int = 32, **attrs):
    def f(g: G, x: str) -> str:
        return g.op(op, [g.op("Relu", [g.conv(x, c, c, 3)])], **attrs)
    return f


def _flatten_fc(g: G, x: str) -> str:
    y = g.op("Flatten", [g.op("MaxPool", [g.conv(x, 32, 16, 3)], kernel_shape=[2, 2],
                              strides=[2, 2])], axis=1)
    w = g.const(g.rng.normal(0, 0.05, (40, 16 * 6 * 5)))
    return g.op("Gemm", [y, w, g.const(g.rng.normal(0, .1, 40))], transB=1)


def _spatial_mean_fc(g: G, x: str) -> str:
    """PyTorch's ``x.mean([2, 3])`` head: ReduceMean over H and W without kept axes."""
    y = g.op("ReduceMean", [g.op("Relu", [g.conv(x, 32, 24, 3)])], axes=[2, 3], keepdims=0)
    return g.op("Gemm", [y, g.const(g.rng.normal(0, 0.2, (10, 24))),
                         g.const(g.rng.normal(0, .1, 10))], transB=1)


def _channel_shuffle(g: G, x: str) -> str:
    """ShuffleNet's shuffle of 2 groups between two convolutions."""
    _, c, h, w = 1, 32, 8, 8
    y = g.op("Relu", [g.conv(x, c, c, 3)])
    y = g.op("Reshape", [y, g.const([1, 2, c // 2, h, w])])
    y = g.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = g.op("Reshape", [y, g.const([1, c, h, w])])
    return g.conv(y, c, 16, 1)


def _aspp(g: G, x: str) -> str:
    """DeepLabV3's ASPP on an 8 x 8 map: a 3x3 convolution dilated by 36 (only its centre
    tap reads the map) and the image-pooling branch broadcast back by a bilinear Resize."""
    y = g.op("Relu", [g.conv(x, 32, 32, 1)])
    w = g.const(g.rng.normal(0, 0.1, (32, 32, 3, 3)))
    far = g.op("Relu", [g.op("Conv", [y, w], kernel_shape=[3, 3], dilations=[36, 36],
                             pads=[36, 36, 36, 36])])
    pooled = g.op("Relu", [g.conv(g.op("GlobalAveragePool", [y]), 32, 32, 1)])
    back = g.op("Resize", [pooled, g.const(np.zeros(0)), g.const(np.zeros(0)),
                           g.const([1, 32, 8, 8])], mode="linear",
                coordinate_transformation_mode="half_pixel")
    return g.conv(g.op("Concat", [far, back], axis=1), 64, 16, 1)


def _const_op(op: str, value):
    def f(g: G, x: str) -> str:
        return g.op(op, [g.conv(x, 32, 32, 1), g.const(value)])
    return f


CASES = [
    # convolution tiling (sizes chosen against nv_small's 32 x 4 KiB CBUF)
    Case("conv_rows_streamed", _one((1, 64, 48, 48), lambda g, x: g.conv(x, 64, 96, 3)),
         presets=("nv_small",)),
    Case("conv_rows_weights_reused", _one((1, 16, 96, 96), lambda g, x: g.conv(x, 16, 16, 3)),
         presets=("nv_small",)),
    Case("conv_kernel_slices", _one((1, 256, 8, 8), lambda g, x: g.conv(x, 256, 256, 3))),
    Case("conv_stride_dilation", _one((1, 19, 21, 17), lambda g, x: g.op(
        "Conv", [x, g.const(g.rng.normal(0, .2, (36, 19, 3, 2)))], kernel_shape=[3, 2],
        strides=[2, 1], dilations=[2, 1], pads=[2, 0, 1, 1]))),
    Case("depthwise_stride2", _one((1, 24, 20, 18), lambda g, x: g.conv(x, 24, 24, 3, 2,
                                                                        group=24))),
    Case("grouped_4", _one((1, 32, 12, 12), lambda g, x: g.conv(x, 32, 64, 3, group=4))),
    Case("flatten_fc", _one((1, 32, 13, 11), _flatten_fc)),
    Case("fc_streamed", _one((1, 2048), lambda g, x: g.op(
        "Gemm", [x, g.const(g.rng.normal(0, 0.02, (1000, 2048)))], transB=1)),
         presets=("nv_small",)),
    # more features than a cube has channels (8192): the vector read as a line of atoms,
    # cut into strips of channel slots
    Case("fc_wider_than_a_cube", _one((1, 9000), lambda g, x: g.op("Relu", [g.op(
        "Gemm", [x, g.const(g.rng.normal(0, 0.02, (24, 9000)).astype(np.float32)),
                 g.const(g.rng.normal(0, .1, 24))], transB=1)]))),
    # more weight bytes than the cmodel's element limit for other arrays (AlexNet's FC6
    # has 37.7 M): one fetch of 33.6 MB
    Case("fc_past_the_element_limit", _one((1, 128, 6, 6), lambda g, x: g.op(
        "Gemm", [g.op("Flatten", [x], axis=1),
                 g.const(g.rng.normal(0, 0.015, (7300, 4608)).astype(np.float32))],
        transB=1)), presets=("nv_small",)),
    # element-wise
    Case("add_relu", _one((1, 16, 12, 10), _add_two("Add", True))),
    Case("add_prelu", _one((1, 16, 12, 10), lambda g, x: g.op("PRelu", [
        _add_two("Add")(g, x), g.const(g.rng.uniform(0.05, 0.3, (32, 1, 1)))]))),
    Case("add_leaky_relu", _one((1, 16, 12, 10), lambda g, x: g.op(
        "LeakyRelu", [_add_two("Add")(g, x)], alpha=0.2))),
    Case("sub", _one((1, 16, 12, 10), _add_two("Sub"))),
    Case("sum_of_three", _one((1, 16, 12, 10), lambda g, x: g.op("Sum", [
        g.conv(x, 16, 32, 1), g.conv(x, 16, 32, 3), g.op("Relu", [g.conv(x, 16, 32, 1)])]))),
    Case("max", _one((1, 16, 12, 10), _add_two("Max"))),
    Case("min", _one((1, 16, 12, 10), _add_two("Min"))),
    Case("mul", _one((1, 16, 12, 10), _add_two("Mul"))),
    Case("squeeze_excite", _one((1, 32, 9, 7), _se)),
    Case("add_scalar", _one((1, 32, 6, 6), _const_op("Add", 0.7))),
    Case("mul_channel", _one((1, 32, 6, 6), _const_op("Mul", np.linspace(-2, 2, 32).reshape(
        32, 1, 1)))),
    Case("div_scalar", _one((1, 32, 6, 6), _const_op("Div", 3.0))),
    # activations that did not fuse
    Case("relu", _one((1, 16, 8, 8), _after_add("Relu"))),
    Case("clip", _one((1, 16, 8, 8), _after_add("Clip"))),
    Case("prelu", _one((1, 16, 8, 8), _after_add("PRelu"))),
    Case("leaky_relu", _one((1, 16, 8, 8), _after_add("LeakyRelu", alpha=0.1))),
    Case("batchnorm", _one((1, 16, 8, 8), _after_add("BatchNormalization"))),
    Case("hard_sigmoid", _one((1, 16, 8, 8), _after_add("HardSigmoid", alpha=0.2, beta=0.5))),
    Case("hard_swish", _one((1, 16, 8, 8), _after_add("HardSwish"))),
    # lookup tables (presets with the SDP's Y stage and LUT)
    Case("sigmoid", _one((1, 16, 8, 8), _after_add("Sigmoid")), presets=LUT_PRESETS),
    Case("tanh", _one((1, 16, 8, 8), _after_add("Tanh")), presets=LUT_PRESETS),
    Case("silu", _one((1, 16, 8, 8), _silu), presets=LUT_PRESETS),
    Case("gelu_erf", _one((1, 16, 8, 8), _gelu), presets=LUT_PRESETS, cosine=0.998),
    # YOLOv4's Mish spelled out (one table after the host pass), every preset (nv_small: CDP)
    Case("mish_spelled", _one((1, 16, 8, 8), _mish)),
    # a softplus, a tanh and a product of two tensors: not Mish (two convolutions)
    Case("softplus_tanh_product", _one((1, 16, 8, 8), lambda g, x: g.op("Mul", [
        g.conv(x, 16, 32, 3), g.op("Tanh", [g.op("Softplus", [g.conv(x, 16, 32, 3)])])]))),
    Case("elu", _one((1, 16, 8, 8), _after_add("Elu", alpha=0.5))),
    # pooling
    Case("maxpool_ceil", _one((1, 32, 13, 13), _pool("MaxPool", kernel_shape=[3, 3],
                                                     strides=[2, 2], ceil_mode=1))),
    Case("maxpool_same", _one((1, 32, 10, 9), _pool("MaxPool", kernel_shape=[3, 3],
                                                    strides=[1, 1], pads=[1, 1, 1, 1]))),
    Case("maxpool_13_chain", _one((1, 32, 14, 14), _pool("MaxPool", kernel_shape=[13, 13],
                                                         strides=[1, 1], pads=[6, 6, 6, 6]))),
    Case("maxpool_split_width", _one((1, 8, 3, 600), _pool("MaxPool", 8, kernel_shape=[3, 3],
                                                           strides=[1, 1], pads=[1, 1, 1, 1])),
         presets=("nv_small",)),
    Case("avgpool_pads", _one((1, 32, 9, 9), _pool("AveragePool", kernel_shape=[3, 3],
                                                   strides=[2, 2], pads=[1, 1, 1, 1],
                                                   count_include_pad=1))),
    Case("gap_7", _one((1, 32, 7, 7), _pool("GlobalAveragePool"))),
    Case("gap_13_conv", _one((1, 32, 13, 13), _pool("GlobalAveragePool"))),
    Case("gap_12x40_reviewed", _one((1, 32, 12, 40), _pool("GlobalAveragePool"))),
    Case("gap_40_passes", _one((1, 32, 40, 40), _pool("GlobalAveragePool"))),
    Case("gmp_20", _one((1, 32, 20, 20), _pool("GlobalMaxPool"))),
    # nv_large's CBUF holds no 32 x 32 summing kernel of 32-lane atoms: PDP passes, rescaled
    Case("gap_32_rescaled", _one((1, 40, 32, 32), _pool("GlobalAveragePool", 40))),
    Case("spatial_mean_fc", _one((1, 32, 9, 7), _spatial_mean_fc)),
    Case("spatial_sum", _one((1, 32, 9, 7), lambda g, x: g.op("ReduceSum", [
        g.op("Relu", [g.conv(x, 32, 24, 3)]), g.const(np.array([2, 3]))], keepdims=1))),
    # data movement
    Case("concat_channels", _one((1, 32, 8, 8), _concat(1))),
    Case("concat_with_input", _one((1, 32, 8, 8), _concat(1, with_input=True))),
    Case("concat_unaligned", _one((1, 32, 8, 8), lambda g, x: g.conv(g.op("Concat", [
        g.conv(x, 32, 12, 1), g.op("Relu", [g.conv(x, 32, 20, 3)]), g.conv(x, 32, 5, 1),
        g.conv(x, 32, 40, 1)], axis=1), 77, 16, 1))),
    # the same pieces on a 72x72 map: merged surface by surface (ops/concat.merge_chains)
    Case("concat_unaligned_by_surface", _one((1, 8, 72, 72), lambda g, x: g.conv(g.op(
        "Concat", [g.conv(x, 8, 12, 1), g.op("Relu", [g.conv(x, 8, 20, 3)]),
                   g.conv(x, 8, 5, 1), g.conv(x, 8, 40, 1)], axis=1), 77, 8, 1))),
    Case("concat_rows", _one((1, 32, 8, 8), _concat(2))),
    Case("concat_cols", _one((1, 32, 8, 8), _concat(3))),
    Case("split_channels", _one((1, 32, 8, 8), _split)),
    Case("slice_rows", _one((1, 32, 12, 8), _slice_rows)),
    Case("pad_channels", _one((1, 32, 6, 6), _pad([0, 0, 0, 0, 0, 32, 0, 0]))),
    # 20 channels + 12: nv_small copies two atoms and moves the third's 4 channels,
    # nv_large moves all 20 into its one atom
    Case("pad_channels_unaligned", _one((1, 32, 6, 6), _pad([0, 0, 0, 0, 0, 12, 0, 0], 20))),
    # 3 before, 9 after, rows and columns too, and a constant that is not the zero point
    Case("pad_channels_offset_value", _one((1, 32, 6, 6), _pad([0, 3, 1, 0, 0, 9, 0, 2], 20,
                                                              0.25))),
    Case("split_channels_unaligned", _one((1, 32, 8, 8), _split_unaligned)),
    Case("slice_channels_unaligned", _one((1, 32, 8, 8), _slice_channels(20, 37))),
    Case("focus", _one((1, 3, 16, 14), _focus)),
    # rows 1, 4, 7, 10 and columns 2, 4, 6, 8 (odd width, first column past the step)
    Case("slice_steps", _one((1, 32, 11, 9), _slice([1, 2], [11, 9], [2, 3], [3, 2]))),
    Case("slice_steps_channels", _one((1, 32, 11, 9), _slice([8, 0, 1], [24, 10, 8], [1, 2, 3],
                                                             [1, 2, 3])), presets=("nv_small",)),
    Case("slice_rows_and_cols", _one((1, 32, 11, 9), _slice([2, 1], [9, -1], [2, 3], [1, 1]))),
    Case("pad_spatial", _one((1, 32, 6, 6), _pad([0, 0, 1, 2, 0, 0, 1, 0]))),
    # CycleGAN's ReflectionPad2d(3) before a 7x7 convolution, and edge (replicate) padding
    Case("pad_reflect", _one((1, 32, 6, 5), lambda g, x: g.conv(g.op("Pad", [
        g.op("Relu", [g.conv(x, 32, 16, 1)]), g.const(np.array([0, 0, 3, 2, 0, 0, 1, 3]))],
        mode="reflect"), 16, 8, 3, pad=0))),
    Case("pad_edge", _one((1, 32, 6, 5), lambda g, x: g.conv(g.op("Pad", [
        g.conv(x, 32, 16, 1), g.const(np.array([0, 0, 2, 0, 0, 0, 4, 1]))], mode="edge"),
        16, 8, 3, pad=0))),
    Case("resize_nearest_2x", _one((1, 32, 6, 5), _resize([1, 1, 2, 2]))),
    Case("resize_nearest_3x2", _one((1, 32, 6, 5), _resize([1, 1, 3, 2]))),
    Case("resize_bilinear_2x", _one((1, 32, 6, 5), _resize([1, 1, 2, 2], "linear",
                                                            "half_pixel"))),
    # segmentation heads' 4x, and factors that differ per axis (one of them 1)
    Case("resize_bilinear_4x", _one((1, 32, 6, 5), _resize([1, 1, 4, 4], "linear",
                                                            "half_pixel"))),
    Case("resize_bilinear_4x2", _one((1, 32, 6, 5), _resize([1, 1, 4, 2], "linear",
                                                             "pytorch_half_pixel"))),
    Case("resize_bilinear_1x2", _one((1, 32, 6, 5), _resize([1, 1, 1, 2], "linear",
                                                             "half_pixel"))),
    Case("convtranspose_2x2", _one((1, 32, 7, 6), _deconv)),
    # CenterNet's / U-Net decoders' 4x4 stride 2 padding 1, its input after a ReLU
    Case("convtranspose_4x4_s2_p1", _one((1, 32, 7, 6), _deconv_overlapping(4, 2, 1,
                                                                            relu_in=True))),
    Case("convtranspose_3x3_s2_p1_op1", _one((1, 32, 7, 6), _deconv_overlapping(3, 2, 1, 1))),
    # an odd output (2H + 1): one phase a row and a column shorter than the other
    Case("convtranspose_3x3_s2", _one((1, 32, 5, 6), _deconv_overlapping(3, 2, 0))),
    Case("convtranspose_3x3_s1_p1", _one((1, 32, 7, 6), _deconv_overlapping(3, 1, 1))),
    Case("channel_shuffle", _one((1, 32, 8, 8), _channel_shuffle)),
    # super-resolution's pixel shuffle (PyTorch's PixelShuffle: DepthToSpace CRD) and a
    # SpaceToDepth stem, as 0/1 (transposed) convolutions
    Case("pixel_shuffle", _one((1, 32, 6, 5), lambda g, x: g.conv(g.op(
        "DepthToSpace", [g.op("Relu", [g.conv(x, 32, 32, 3)])], blocksize=2, mode="CRD"),
        8, 8, 3))),
    Case("space_to_depth", _one((1, 3, 12, 10), lambda g, x: g.conv(g.op(
        "SpaceToDepth", [x], blocksize=2), 12, 16, 3))),
    Case("aspp_dilated_and_pooled", _one((1, 32, 8, 8), _aspp)),
]
