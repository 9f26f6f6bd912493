"""fold_hardsigmoid: HardSigmoid(conv) becomes the conv with rescaled weights and bias and a
fused capped ReLU (Clip, max 1)."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import fold_hardsigmoid, fuse_activation, run_passes
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

RNG = np.random.default_rng(9)
K = 6
SCALE = 3.0     # conv outputs reach both saturated ends of the HardSigmoid


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_hs(alpha=0.2, beta=0.5, bias=True, extra=(), outputs=("y",), x_shape=(1, 4, 3, 3)):
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [node("conv", "Conv", ins, ["c"]),
             node("hs", "HardSigmoid", ["c"], ["y"], alpha=alpha, beta=beta), *extra]
    inits = [const("w", _w(K, 4, 1, 1)), const("b", _w(K))]
    return model(nodes, inits, list(x_shape), outputs=outputs)


@pytest.mark.parametrize("alpha, beta, bias", [(0.2, 0.5, True), (1 / 6, 0.5, False),
                                                (0.7, -0.1, True)])
def test_hard_sigmoid_folds_into_conv_as_capped_relu(alpha, beta, bias):
    g = check(_conv_hs(alpha, beta, bias), fold_hardsigmoid.apply, scale=SCALE)
    assert ops(g) == ["Conv"] and g.nodes[0].outputs == ["y"]
    a = g.nodes[0].attrs
    assert (a["activation"], a["activation_max"]) == ("Clip", 1.0)
    w = g.tensors[g.nodes[0].inputs[1]].data
    assert w.dtype == np.float32 and len(g.nodes[0].inputs) == 3
    assert set(g.tensors) == {"x", "y", *g.nodes[0].inputs[1:]}


def test_hard_sigmoid_folds_into_gemm():
    nodes = [node("fc", "Gemm", ["x", "w", "b"], ["f"], transB=1, alpha=0.5, beta=2.0),
             node("hs", "HardSigmoid", ["f"], ["y"], alpha=0.25, beta=0.4)]
    m = model(nodes, [const("w", _w(K, 5)), const("b", _w(K))], [3, 5])
    g = check(m, fold_hardsigmoid.apply, scale=SCALE)
    assert ops(g) == ["Gemm"] and g.nodes[0].attrs["activation"] == "Clip"


@pytest.mark.parametrize("alpha", [-0.2, 0.0])
def test_non_positive_alpha_stays(alpha):
    unchanged(_conv_hs(alpha=alpha), fold_hardsigmoid.apply)


def test_a_conv_read_twice_or_a_graph_output_stays():
    unchanged(_conv_hs(extra=[node("r", "Relu", ["c"], ["z"])], outputs=("y", "z")),
              fold_hardsigmoid.apply)
    unchanged(_conv_hs(outputs=("y", "c")), fold_hardsigmoid.apply)


def test_an_activation_already_fused_stays():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]), node("relu", "Relu", ["c"], ["r"]),
             node("hs", "HardSigmoid", ["r"], ["y"], alpha=0.2, beta=0.5)]
    m = model(nodes, [const("w", _w(K, 4, 1, 1))], [1, 4, 3, 3])
    g = unchanged(m, fold_hardsigmoid.apply, prepare=fuse_activation.apply)
    assert ops(g) == ["Conv", "HardSigmoid"]


def test_shared_weights_are_copied():
    w, b = _w(K, 4, 1, 1), _w(K)
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["c"]),
             node("hs", "HardSigmoid", ["c"], ["h"], alpha=0.2, beta=0.5),
             node("conv2", "Conv", ["x", "w", "b"], ["c2"]), node("mul", "Mul", ["c2", "h"], ["y"])]
    g = check(model(nodes, [const("w", w), const("b", b)], [1, 4, 3, 3]), fold_hardsigmoid.apply,
              scale=SCALE)
    np.testing.assert_array_equal(g.tensors["w"].data, w)
    np.testing.assert_array_equal(g.tensors["b"].data, b)
    assert g.node("conv2").inputs == ["x", "w", "b"]
    assert g.node("conv").inputs[1:] != ["w", "b"]


def test_squeeze_excite_gate_becomes_two_convs_and_a_mul():
    """MobileNetV3 / PP-OCR cls: GAP, Conv, Relu, Conv, Add 3, Clip 0..6, Div 6, Mul."""
    nodes = [node("gap", "GlobalAveragePool", ["x"], ["p"]),
             node("se1", "Conv", ["p", "w1", "b1"], ["s1"]), node("relu", "Relu", ["s1"], ["r"]),
             node("se2", "Conv", ["r", "w2", "b2"], ["s2"]),
             node("add3", "Add", ["s2", "three"], ["a"]),
             node("clip", "Clip", ["a", "lo", "hi"], ["g"]),
             node("div", "Div", ["g", "six"], ["gate"]), node("mul", "Mul", ["x", "gate"], ["y"])]
    inits = [const("w1", _w(2, 4, 1, 1)), const("b1", _w(2)), const("w2", _w(4, 2, 1, 1)),
             const("b2", _w(4)), const("three", np.float32(3)), const("lo", np.float32(0)),
             const("hi", np.float32(6)), const("six", np.float32(6))]
    g = check(model(nodes, inits, [1, 4, 5, 5]), lambda g: run_passes(g) > 0, scale=SCALE)
    assert ops(g) == ["GlobalAveragePool", "Conv", "Conv", "Mul"]
    assert [n.attrs.get("activation") for n in g.nodes[1:3]] == ["Relu", "Clip"]
    assert g.nodes[2].outputs == ["gate"] and g.nodes[2].attrs["activation_max"] == 1.0
