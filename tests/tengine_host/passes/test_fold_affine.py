"""fold_affine: Mul / Add / Sub / Div by a scalar or per-channel constant after a Conv/Gemm
fold into its weights and bias."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.frontend import load_onnx
from tengine_host.passes import fold_affine, fuse_activation, run_passes
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

RNG = np.random.default_rng(7)
K = 4


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_then(op, value, *, const_first=False, bias=True, extra=(), outputs=("y",),
               weight_scale=1.0, bias_offset=0.0):
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    operands = ["k", "c"] if const_first else ["c", "k"]
    nodes = [node("conv", "Conv", ins, ["c"], pads=[1, 1, 1, 1]),
             node("affine", op, operands, ["y"]), *extra]
    inits = [const("w", _w(K, 3, 3, 3) * np.float32(weight_scale)),
             const("b", _w(K) + np.float32(bias_offset)), const("k", value)]
    return model(nodes, inits, [1, 3, 5, 5], outputs=outputs)


def test_learnable_affine_block_folds_into_the_conv():
    """PP-OCRv4's Conv -> Mul(scale const first) -> Add(bias): one conv."""
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["c"], group=3),
             node("mul", "Mul", ["s", "c"], ["m"]), node("add", "Add", ["m", "t"], ["y"])]
    inits = [const("w", _w(3, 1, 3, 3)), const("b", _w(3)), const("s", np.float32([1.7])),
             const("t", np.float32([-0.4]))]
    g = check(model(nodes, inits, [1, 3, 6, 6]), fold_affine.apply)
    assert ops(g) == ["Conv"] and g.nodes[0].outputs == ["y"]
    assert set(g.tensors) == {"x", "y", *g.nodes[0].inputs[1:]}   # old constants dropped


@pytest.mark.parametrize("op", ["Mul", "Add", "Sub", "Div"])
@pytest.mark.parametrize("shape", [(), (1,), (K, 1, 1), (1, K, 1, 1)])
def test_scalar_and_per_channel_constants_fold(op, shape):
    value = RNG.uniform(0.5, 2.0, shape) * np.where(RNG.random(shape) < 0.5, -1, 1)
    g = check(_conv_then(op, value), fold_affine.apply)
    assert ops(g) == ["Conv"] and g.nodes[0].outputs == ["y"]


@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_mul_and_add_fold_with_the_constant_first(op):
    g = check(_conv_then(op, RNG.uniform(1, 2, (K, 1, 1)), const_first=True), fold_affine.apply)
    assert ops(g) == ["Conv"]


@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_sub_and_div_with_the_constant_first_stay(op):
    # small weights and a bias of about 5 keep the conv's outputs far from 0: 2.5 / c near
    # c = 0 would turn the conv's last-bit differences from onnxruntime into large ones
    # (with weights drawn in whatever order the tests run, one run saw 2.5e-5)
    unchanged(_conv_then(op, np.float32(2.5), const_first=True, weight_scale=0.1,
                         bias_offset=5.0), fold_affine.apply)


def test_a_bias_is_created_when_the_conv_has_none():
    g = check(_conv_then("Add", RNG.standard_normal((1, K, 1, 1)), bias=False), fold_affine.apply)
    assert len(g.nodes[0].inputs) == 3 and g.tensors[g.nodes[0].inputs[2]].shape == (K,)


@pytest.mark.parametrize("trans_b, bias, beta", [(0, False, 1.0), (1, True, 1.0),
                                                  (0, True, 0.5), (1, "row", 2.0)])
def test_gemm_folds_per_channel_and_scalar_constants(trans_b, bias, beta):
    w = _w(K, 6) if trans_b else _w(6, K)
    ins = ["x", "w"] + (["b"] if bias else [])
    nodes = [node("fc", "Gemm", ins, ["f"], transB=trans_b, beta=beta, alpha=0.7),
             node("mul", "Mul", ["f", "s"], ["m"]), node("sub", "Sub", ["m", "t"], ["d"]),
             node("div", "Div", ["d", "q"], ["y"])]
    inits = [const("w", w), const("b", _w(1, K) if bias == "row" else _w(K)),
             const("s", RNG.uniform(-2, 2, K)), const("t", RNG.uniform(-1, 1, (1, K))),
             const("q", np.float32(3.0))]
    g = check(model(nodes, inits, [2, 6]), fold_affine.apply)
    assert ops(g) == ["Gemm"] and g.nodes[0].attrs["beta"] == 1.0


def test_a_fused_relu_on_the_add_moves_to_the_conv():
    relu = node("relu", "Relu", ["y"], ["z"])
    m = _conv_then("Add", RNG.standard_normal((K, 1, 1)), extra=[relu], outputs=("z",))
    g = check(m, fold_affine.apply, prepare=fuse_activation.apply)
    assert ops(g) == ["Conv"] and g.nodes[0].attrs["activation"] == "Relu"
    assert g.nodes[0].outputs == ["z"]


def test_a_conv_read_twice_or_a_graph_output_stays():
    second = node("other", "Relu", ["c"], ["z"])
    unchanged(_conv_then("Mul", np.float32(2), extra=[second], outputs=("y", "z")),
              fold_affine.apply)
    unchanged(_conv_then("Mul", np.float32(2), outputs=("y", "c")), fold_affine.apply)


def test_a_non_constant_operand_stays():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]), node("mul", "Mul", ["c", "x"], ["y"])]
    unchanged(model(nodes, [const("w", _w(3, 3, 1, 1))], [1, 3, 4, 4]), fold_affine.apply)


def test_never_across_an_activation():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]), node("relu", "Relu", ["c"], ["r"]),
             node("mul", "Mul", ["r", "k"], ["y"])]
    m = model(nodes, [const("w", _w(K, 3, 1, 1)), const("k", np.float32(-2))], [1, 3, 4, 4])
    g = unchanged(m, fold_affine.apply, prepare=fuse_activation.apply)
    assert ops(g) == ["Conv", "Mul"] and g.nodes[0].attrs["activation"] == "Relu"


def test_constants_that_are_not_per_channel_stay():
    # varies spatially / aligns with W (numpy broadcasting) / broadcasts the output larger
    unchanged(_conv_then("Mul", RNG.standard_normal((1, K, 5, 5))), fold_affine.apply)
    unchanged(_conv_then("Add", RNG.standard_normal(5)), fold_affine.apply)
    unchanged(_conv_then("Add", RNG.standard_normal((2, K, 1, 1))), fold_affine.apply)


def test_division_by_zero_or_weights_overflowing_float32_stay():
    value = np.array([1, 0, 2, 3], np.float32).reshape(K, 1, 1)
    g = load_onnx(_conv_then("Div", value))
    assert not fold_affine.apply(g)
    g = load_onnx(_conv_then("Div", np.float32(1e-39)))     # 1 / c overflows float32
    assert not fold_affine.apply(g) and ops(g) == ["Conv", "Div"]


def test_shared_constants_are_copied_and_new_names_are_unique():
    """Two convs share W and b; a tensor already has the name the fold would pick."""
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["c"]),
             node("mul", "Mul", ["c", "k"], ["m"]),
             node("conv2", "Conv", ["x", "w", "b"], ["c2"]),
             node("conv3", "Conv", ["x", "conv_mul_weight"], ["c3"]),
             node("mul2", "Mul", ["c2", "c3"], ["p"]),
             node("mul3", "Mul", ["p", "k"], ["q"]),            # shares k, not foldable
             node("sum", "Add", ["m", "q"], ["y"])]
    w, b, other = _w(K, 3, 1, 1), _w(K), _w(K, 3, 1, 1)
    inits = [const("w", w), const("b", b), const("k", np.float32(3)),
             const("conv_mul_weight", other)]
    g = check(model(nodes, inits, [1, 3, 4, 4]), fold_affine.apply)
    conv = g.node("conv")
    assert conv.inputs[1] not in ("w", "conv_mul_weight") and conv.outputs == ["m"]
    np.testing.assert_array_equal(g.tensors["w"].data, w)
    np.testing.assert_array_equal(g.tensors["b"].data, b)
    np.testing.assert_array_equal(g.tensors["conv_mul_weight"].data, other)
    assert g.is_constant("k") and g.node("conv2").inputs == ["x", "w", "b"]


def test_batchnorm_affine_and_relu_become_one_conv_in_the_default_pipeline():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]),
             node("bn", "BatchNormalization", ["c", "g", "beta", "mu", "var"], ["n"]),
             node("mul", "Mul", ["n", "s"], ["m"]), node("add", "Add", ["t", "m"], ["a"]),
             node("relu", "Relu", ["a"], ["y"])]
    inits = [const("w", _w(K, 3, 3, 3)), const("g", RNG.uniform(0.5, 2, K)),
             const("beta", _w(K)), const("mu", _w(K)), const("var", RNG.uniform(0.5, 2, K)),
             const("s", np.float32([0.8])), const("t", np.float32([0.1]))]
    g = check(model(nodes, inits, [1, 3, 6, 6]), lambda g: run_passes(g) > 0)
    assert ops(g) == ["Conv"] and g.nodes[0].attrs["activation"] == "Relu"
