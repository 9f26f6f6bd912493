"""The DLA scale rules: pooling passes its input scale through, concat shares one
scale, eltwise inputs are reconciled."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from accel.ir import Graph, Node, Tensor
from tengine_host.frontend import load_onnx
from tengine_host.quant import calibrate
from tengine_host.quant.rules import apply_dla_rules, scale_groups


def _graph():
    f32 = np.dtype(np.float32)
    t = {n: Tensor(n, (1, 2, 4, 4), f32) for n in ("x", "a", "p", "b", "c", "s", "m")}
    t["k"] = Tensor("k", (1, 2, 4, 4), f32, np.ones((1, 2, 4, 4), np.float32))
    nodes = [Node("relu", "Relu", ["x"], ["a"]),
             Node("pool", "AveragePool", ["a"], ["p"]),
             Node("relu2", "Relu", ["x"], ["b"]),
             Node("cat", "Concat", ["p", "b"], ["c"]),
             Node("add", "Add", ["c", "x"], ["s"]),
             Node("addk", "Add", ["s", "k"], ["m"])]   # a constant operand ties nothing
    return Graph("g", nodes, t, ["x"], ["m"])


def test_groups_follow_the_rules():
    groups = scale_groups(_graph())
    # pool: a~p; concat: p~b~c; add: c~x  ->  one group; s and m stay free
    assert groups == [["a", "b", "c", "p", "x"]]


def test_every_member_takes_the_largest_scale():
    table = {n: {"scale": s, "min": 0.0, "max": s * 127} for n, s in
             (("x", 0.1), ("a", 0.05), ("p", 0.02), ("b", 0.3), ("c", 0.3), ("s", 0.7),
              ("m", 0.9))}
    out = apply_dla_rules(_graph(), table)
    assert {n: e["scale"] for n, e in out.items()} == {
        "x": 0.3, "a": 0.3, "p": 0.3, "b": 0.3, "c": 0.3, "s": 0.7, "m": 0.9}
    assert out["p"]["max"] == pytest.approx(0.02 * 127)   # observed range kept
    assert table["p"]["scale"] == 0.02                     # input not modified


def test_calibrate_applies_the_pool_rule_and_kl():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 0], x[0, 0, 3, 3] = -6.0, 2.0
    t = calibrate(graph, [{"x": x}], progress=False)
    # relu output max 2 and pool output max 2, but the pool must reuse its input's scale
    assert t["y"]["scale"] == t["r"]["scale"] == pytest.approx(2 / 127)
    # (auto may clip x's -6: the ReLU reading it makes every negative value 0)
    assert calibrate(graph, [{"x": x}], algorithm="minmax", progress=False)["x"]["scale"] \
        == pytest.approx(6 / 127)
    raw = calibrate(graph, [{"x": x}], progress=False, dla_rules=False)
    assert raw == t  # here min-max already agrees; the rule then changes nothing
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, 1, 4, 4)).astype(np.float32)} for _ in range(4)]
    for algo in ("kl", "percentile"):
        t = calibrate(graph, samples, algorithm=algo, progress=False)
        assert set(t) == {"x", "r", "y"} and t["y"]["scale"] == t["r"]["scale"]
        assert all(0 < e["scale"] <= max(-e["min"], e["max"]) / 127 + 1e-12 for e in t.values())
    with pytest.raises(ValueError, match="'entropy' not in auto, minmax, kl, percentile"):
        calibrate(graph, samples, algorithm="entropy")
