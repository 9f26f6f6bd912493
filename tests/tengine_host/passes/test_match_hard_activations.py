"""match_hard_activations: spelled-out HardSigmoid / HardSwish become one op."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import match_hard_activations, run_passes
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

RNG = np.random.default_rng(3)
SHAPE = [1, 3, 4, 5]
SCALE = 4.0     # inputs spread over both knees of relu6(x + 3)


def _inits(three=3.0, lo=0.0, hi=6.0, six=6.0):
    return [const("three", np.float32(three)), const("lo", np.float32(lo)),
            const("hi", np.float32(hi)), const("six", np.float32(six)),
            const("sixth", np.float32(1 / 6))]


def _gate(x="x", add_order=0):
    """relu6(x + 3) as Add -> Clip, output ``g``."""
    ins = [x, "three"] if add_order == 0 else ["three", x]
    return [node("add3", "Add", ins, ["a"]), node("clip", "Clip", ["a", "lo", "hi"], ["g"])]


def _match(m):
    return check(m, match_hard_activations.apply, scale=SCALE)


@pytest.mark.parametrize("add_order", [0, 1])
@pytest.mark.parametrize("scale", ["div", "mul", "mul_first"])
def test_relu6_shifted_over_six_is_hard_sigmoid(add_order, scale):
    last = {"div": node("div", "Div", ["g", "six"], ["y"]),
            "mul": node("mul", "Mul", ["g", "sixth"], ["y"]),
            "mul_first": node("mul", "Mul", ["sixth", "g"], ["y"])}[scale]
    g = _match(model([*_gate(add_order=add_order), last], _inits(), SHAPE))
    assert ops(g) == ["HardSigmoid"] and g.nodes[0].inputs == ["x"]
    assert g.nodes[0].outputs == ["y"]
    assert g.nodes[0].attrs == {"alpha": pytest.approx(1 / 6), "beta": 0.5}
    assert set(g.tensors) == {"x", "y"}


def test_clip_bounds_as_attributes_match_too():
    nodes = [node("add3", "Add", ["x", "three"], ["a"]),
             node("clip", "Clip", ["a"], ["g"], min=0.0, max=6.0),
             node("div", "Div", ["g", "six"], ["y"])]
    g = _match(model(nodes, _inits(), SHAPE, opset=10))
    assert ops(g) == ["HardSigmoid"]


@pytest.mark.parametrize("mul_order", [0, 1])
@pytest.mark.parametrize("scale", ["div", "mul"])
def test_ppocr_hard_swish(mul_order, scale):
    """paddle2onnx: Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)."""
    mul_in = ["x", "g"] if mul_order == 0 else ["g", "x"]
    last = (node("div", "Div", ["p", "six"], ["y"]) if scale == "div"
            else node("mul6", "Mul", ["sixth", "p"], ["y"]))
    nodes = [*_gate(add_order=1 - mul_order), node("mul", "Mul", mul_in, ["p"]), last]
    g = _match(model(nodes, _inits(), SHAPE))
    assert ops(g) == ["HardSwish"] and g.nodes[0].inputs == ["x"] and g.nodes[0].outputs == ["y"]
    assert set(g.tensors) == {"x", "y"}


@pytest.mark.parametrize("order", [0, 1])
def test_x_times_hard_sigmoid_of_x_is_hard_swish(order):
    hs = node("hs", "HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5)
    mul = node("mul", "Mul", ["x", "h"] if order == 0 else ["h", "x"], ["y"])
    g = _match(model([hs, mul], [], SHAPE))
    assert ops(g) == ["HardSwish"] and g.nodes[0].outputs == ["y"]


def test_x_times_spelled_out_hard_sigmoid_is_hard_swish():
    nodes = [*_gate(), node("div", "Div", ["g", "six"], ["h"]),
             node("mul", "Mul", ["h", "x"], ["y"])]
    g = _match(model(nodes, _inits(), SHAPE))
    assert ops(g) == ["HardSwish"]


def test_ppocr_det_block_becomes_conv_and_hard_swish():
    """t = affine(conv(x)); y = Div(Mul(t, Clip(Add(t, 3), 0, 6)), 6) -> Conv, HardSwish."""
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("scale", "Mul", ["s", "c"], ["sc"]), node("shift", "Add", ["sc", "t"], ["t0"]),
             *_gate("t0"), node("mul", "Mul", ["t0", "g"], ["p"]),
             node("div", "Div", ["p", "six"], ["y"])]
    inits = [const("w", RNG.standard_normal((4, 3, 3, 3))), const("b", RNG.standard_normal(4)),
             const("s", np.float32([1.3])), const("t", np.float32([0.2])), *_inits()]
    g = check(model(nodes, inits, SHAPE), lambda g: run_passes(g) > 0)
    assert ops(g) == ["Conv", "HardSwish"] and g.nodes[1].outputs == ["y"]
    assert g.nodes[0].attrs.get("activation") is None


@pytest.mark.parametrize("kw", [{"three": 2.9}, {"lo": -0.1}, {"hi": 5.9}, {"six": 5.0},
                                {"hi": 6.0001}])
def test_other_constants_stay(kw):
    nodes = [*_gate(), node("div", "Div", ["g", "six"], ["y"])]
    unchanged(model(nodes, _inits(**kw), SHAPE), match_hard_activations.apply)
    nodes = [*_gate(), node("mul", "Mul", ["x", "g"], ["p"]), node("div", "Div", ["p", "six"],
                                                                    ["y"])]
    unchanged(model(nodes, _inits(**kw), SHAPE), match_hard_activations.apply)


def test_hard_sigmoid_with_other_alpha_is_no_hard_swish():
    hs = node("hs", "HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5)
    unchanged(model([hs, node("mul", "Mul", ["x", "h"], ["y"])], [], SHAPE),
              match_hard_activations.apply)


def test_gate_of_another_tensor_is_no_hard_swish():
    nodes = [node("sig", "Sigmoid", ["x"], ["n"]), *_gate("n"),
             node("mul", "Mul", ["x", "g"], ["p"]), node("div", "Div", ["p", "six"], ["y"])]
    unchanged(model(nodes, _inits(), SHAPE), match_hard_activations.apply)


def test_intermediates_read_elsewhere_or_graph_outputs_stay():
    nodes = [*_gate(), node("div", "Div", ["g", "six"], ["y"]),
             node("sig", "Sigmoid", ["a"], ["z"])]
    unchanged(model(nodes, _inits(), SHAPE, outputs=("y", "z")), match_hard_activations.apply)
    nodes = [*_gate(), node("div", "Div", ["g", "six"], ["y"])]
    unchanged(model(nodes, _inits(), SHAPE, outputs=("y", "g")), match_hard_activations.apply)
    nodes = [*_gate(), node("mul", "Mul", ["x", "g"], ["p"]),
             node("div", "Div", ["p", "six"], ["y"])]
    unchanged(model(nodes, _inits(), SHAPE, outputs=("y", "p")), match_hard_activations.apply)


def test_a_non_constant_shift_stays():
    nodes = [node("add3", "Add", ["x", "x"], ["a"]), node("clip", "Clip", ["a", "lo", "hi"], ["g"]),
             node("div", "Div", ["g", "six"], ["y"])]
    unchanged(model(nodes, _inits(), SHAPE), match_hard_activations.apply)
