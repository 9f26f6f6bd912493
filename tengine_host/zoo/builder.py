"""A small ``onnx.helper`` graph builder with seeded random weights (He-normal convs,
plausible BatchNorm statistics), so zoo models are reproducible without torch."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class NetBuilder:
    """Accumulates nodes and initializers; every method returns its output tensor name.

    Parameters
    ----------
    name : str
        Graph name.
    seed : int
        Seed of the weight generator.
    """

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.channels: dict[str, int] = {}
        self._count: dict[str, int] = {}

    def _name(self, kind: str) -> str:
        i = self._count.get(kind, 0)
        self._count[kind] = i + 1
        return f"{kind}{i}"

    def const(self, value: np.ndarray, kind: str = "c") -> str:
        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], channels: int | None = None, n_out: int = 1,
             **attrs) -> str:
        name = self._name(op.lower())
        outs = [f"{name}_out{i}" if i else name + "_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        if channels is not None:
            for o in outs:
                self.channels[o] = channels
        elif inputs and inputs[0] in self.channels:
            for o in outs:
                self.channels[o] = self.channels[inputs[0]]
        return outs[0]

    # -- layers --------------------------------------------------------------------
    def conv(self, x: str, cout: int, k: int = 3, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = True, dilation: int = 1) -> str:
        cin = self.channels[x]
        fan_in = cin // group * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        ins = [x, self.const(w.astype(np.float32), "w")]
        if bias:
            ins.append(self.const((self.rng.standard_normal(cout) * 0.05).astype(np.float32),
                                  "b"))
        p = (k // 2) * dilation if pad is None else pad
        return self.node("Conv", ins, cout, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[p, p, p, p], group=group, dilations=[dilation, dilation])

    def bn(self, x: str) -> str:
        c = self.channels[x]
        r = self.rng
        params = [r.uniform(0.5, 1.5, c), r.standard_normal(c) * 0.1,
                  r.standard_normal(c) * 0.1, r.uniform(0.5, 1.5, c)]
        return self.node("BatchNormalization",
                         [x, *(self.const(p.astype(np.float32), "bn") for p in params)],
                         epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def silu(self, x: str) -> str:
        """``x * sigmoid(x)``, as exporters write it."""
        return self.node("Mul", [x, self.node("Sigmoid", [x])])

    def relu6(self, x: str) -> str:
        lo = self.const(np.array(0.0, np.float32), "lo")
        hi = self.const(np.array(6.0, np.float32), "hi")
        return self.node("Clip", [x, lo, hi])

    def conv_bn(self, x: str, cout: int, k: int = 3, stride: int = 1, group: int = 1,
                act: str | None = "relu") -> str:
        y = self.bn(self.conv(x, cout, k, stride, group=group, bias=False))
        return {"relu": self.relu, "relu6": self.relu6, "silu": self.silu,
                None: lambda t: t}[act](y)

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0, ceil_mode: int = 0) -> str:
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, ceil_mode=ceil_mode)

    def add(self, a: str, b: str) -> str:
        return self.node("Add", [a, b])

    def concat(self, xs: list[str]) -> str:
        return self.node("Concat", xs, sum(self.channels[x] for x in xs), axis=1)

    def resize2x(self, x: str, mode: str = "nearest",
                 coord: str = "asymmetric") -> str:
        roi = self.const(np.zeros(0, np.float32), "roi")
        scales = self.const(np.array([1, 1, 2, 2], np.float32), "scales")
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = "floor"
        return self.node("Resize", [x, roi, scales], **attrs)

    def classifier(self, x: str, classes: int, softmax: bool = False) -> str:
        y = self.node("Flatten", [self.node("GlobalAveragePool", [x])], axis=1)
        c = self.channels[x]
        w = (self.rng.standard_normal((classes, c)) / np.sqrt(c)).astype(np.float32)
        b = (self.rng.standard_normal(classes) * 0.01).astype(np.float32)
        y = self.node("Gemm", [y, self.const(w, "fc_w"), self.const(b, "fc_b")], classes,
                      transB=1)
        return self.node("Softmax", [y], axis=1) if softmax else y

    # -- model ---------------------------------------------------------------------
    def input(self, name: str, shape: tuple[int, ...]) -> str:
        self._input = helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
        self.channels[name] = shape[1]
        return name

    def model(self, outputs: list[str]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, [self._input],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="opendla-zoo", ir_version=8)
        # Output shapes come from onnx's own shape inference, then the checker validates.
        done = onnx.shape_inference.infer_shapes(m).graph
        inferred = {vi.name: vi for vi in (*done.value_info, *done.output)}
        for out in m.graph.output:
            if out.name in inferred:
                out.CopyFrom(inferred[out.name])
        onnx.checker.check_model(m, full_check=True)
        return m
