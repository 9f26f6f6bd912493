"""fuse_prelu: PRelu / LeakyRelu into the Conv/Gemm feeding them; the fused forms run
through apply_activation and through the debug reference kernels."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.debug import reference_override
from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.ops.registry import apply_activation
from tengine_host.passes import fuse_activation, fuse_prelu, run_passes
from tests.tengine_host.passes.graphs import check, const, model, node, ops, rel_err, unchanged

RNG = np.random.default_rng(5)
K = 4


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_prelu(slope, extra=(), outputs=("y",)):
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("prelu", "PRelu", ["c", "s"], ["y"]), *extra]
    inits = [const("w", _w(K, 3, 3, 3)), const("b", _w(K)), const("s", slope)]
    return model(nodes, inits, [1, 3, 5, 5], outputs=outputs)


@pytest.mark.parametrize("shape", [(), (1,), (K, 1, 1), (1, K, 1, 1)])
def test_prelu_with_per_channel_or_scalar_slope_fuses_into_conv(shape):
    slope = RNG.uniform(0.05, 0.5, shape).astype(np.float32)
    g = check(_conv_prelu(slope), fuse_prelu.apply)
    assert ops(g) == ["Conv"] and g.nodes[0].outputs == ["y"]
    a = g.nodes[0].attrs
    assert a["activation"] == "PRelu"
    assert a["activation_slope"].dtype == np.float32 and a["activation_slope"].shape == (K,)
    np.testing.assert_array_equal(a["activation_slope"], np.broadcast_to(slope.reshape(-1), K))
    assert "s" not in g.tensors and "c" not in g.tensors


def test_prelu_and_leaky_relu_fuse_into_gemm():
    nodes = [node("fc", "Gemm", ["x", "w", "b"], ["f"], transB=1),
             node("prelu", "PRelu", ["f", "s"], ["p"]),
             node("fc2", "Gemm", ["p", "w2"], ["f2"]),
             node("leaky", "LeakyRelu", ["f2"], ["y"], alpha=0.2)]
    inits = [const("w", _w(K, 6)), const("b", _w(K)), const("s", RNG.uniform(0, 1, K)),
             const("w2", _w(K, 3))]
    g = check(model(nodes, inits, [2, 6]), fuse_prelu.apply)
    assert ops(g) == ["Gemm", "Gemm"]
    assert g.nodes[0].attrs["activation"] == "PRelu" and g.nodes[0].outputs == ["p"]
    assert g.nodes[1].attrs["activation"] == "LeakyRelu" and g.nodes[1].outputs == ["y"]
    assert g.nodes[1].attrs["activation_alpha"] == pytest.approx(0.2)


def test_leaky_relu_fuses_into_conv_and_the_reference_kernels_agree():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"], strides=[2, 2]),
             node("leaky", "LeakyRelu", ["c"], ["l"], alpha=0.1),
             node("conv2", "Conv", ["l", "w2", "b2"], ["c2"]),
             node("prelu", "PRelu", ["c2", "s"], ["p"]),
             node("conv3", "Conv", ["p", "w3"], ["c3"]),
             node("clip", "Clip", ["c3", "lo", "hi"], ["y"])]
    inits = [const("w", _w(K, 3, 3, 3)), const("w2", _w(5, K, 1, 1)), const("b2", _w(5)),
             const("s", RNG.uniform(0, 1, (5, 1, 1))), const("w3", _w(3, 5, 1, 1)),
             const("lo", np.float32(0)), const("hi", np.float32(0.5))]
    m = model(nodes, inits, [1, 3, 7, 7])
    g = check(m, fuse_prelu.apply)
    run_passes(g)
    assert [(n.op_type, n.attrs["activation"]) for n in g.nodes] == [
        ("Conv", "LeakyRelu"), ("Conv", "PRelu"), ("Conv", "Clip")]
    # TG_DEBUG_REF's naive float64 kernels apply every fused activation too
    x = {"x": RNG.standard_normal((1, 3, 7, 7)).astype(np.float32)}
    overrides = {n.name: reference_override(n) for n in g.nodes}
    got = interpret(g, x, overrides=overrides)["y"]
    want = ort.InferenceSession(m.SerializeToString()).run(None, x)[0]
    assert rel_err(got, want) <= 1e-5


def test_prelu_whose_slope_varies_along_another_axis_stays():
    # [1, K, 5, 5] varies spatially; [5] aligns with W (numpy broadcasting), not with K
    unchanged(_conv_prelu(RNG.uniform(0, 1, (1, K, 5, 5))), fuse_prelu.apply)
    unchanged(_conv_prelu(RNG.uniform(0, 1, 5)), fuse_prelu.apply)


def test_prelu_with_a_computed_slope_stays():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]),
             node("gap", "GlobalAveragePool", ["x"], ["g"]),
             node("sig", "Sigmoid", ["g"], ["s"]),
             node("prelu", "PRelu", ["c", "s"], ["y"])]
    m = model(nodes, [const("w", _w(3, 3, 1, 1))], [1, 3, 4, 4])
    unchanged(m, fuse_prelu.apply)


def test_prelu_after_a_conv_read_twice_or_a_graph_output_stays():
    second = node("add", "Add", ["c", "y"], ["z"])
    unchanged(_conv_prelu(np.float32(0.25), extra=[second], outputs=("z",)), fuse_prelu.apply)
    unchanged(_conv_prelu(np.float32(0.25), outputs=("y", "c")), fuse_prelu.apply)


def test_prelu_after_an_activation_already_fused_stays():
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]), node("relu", "Relu", ["c"], ["r"]),
             node("prelu", "PRelu", ["r", "s"], ["y"])]
    m = model(nodes, [const("w", _w(K, 3, 1, 1)), const("s", np.float32(0.3))], [1, 3, 4, 4])
    g = unchanged(m, fuse_prelu.apply, prepare=fuse_activation.apply)
    assert ops(g) == ["Conv", "PRelu"] and g.nodes[0].attrs["activation"] == "Relu"


def test_prelu_after_add_fuses_and_a_shared_slope_survives():
    """face_landmark's residual PReLUs follow an Add: they fuse into the sum (one SDP pass);
    both take the slopes of the constant they shared."""
    nodes = [node("conv", "Conv", ["x", "w"], ["c"]), node("p1", "PRelu", ["c", "s"], ["p"]),
             node("add", "Add", ["p", "x"], ["a"]), node("p2", "PRelu", ["a", "s"], ["y"])]
    slope = RNG.uniform(0, 1, (1, 3, 1, 1))
    m = model(nodes, [const("w", _w(3, 3, 1, 1)), const("s", slope)], [1, 3, 4, 4])
    g = check(m, fuse_prelu.apply)
    assert ops(g) == ["Conv", "Add"] and [n.attrs["activation"] for n in g.nodes] == [
        "PRelu", "PRelu"]
    assert g.nodes[1].outputs == ["y"]
    for n in g.nodes:
        np.testing.assert_array_equal(n.attrs["activation_slope"],
                                      slope.reshape(3).astype(np.float32))


def test_apply_activation_prelu_and_leaky_relu():
    y = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    want = np.where(y >= 0, y, y * slope.reshape(1, 3, 1))
    np.testing.assert_array_equal(apply_activation(y.copy(), "PRelu", activation_slope=slope),
                                  want)
    np.testing.assert_array_equal(
        apply_activation(y.copy(), "PRelu", activation_slope=np.float32(0.5)),
        np.where(y >= 0, y, y * np.float32(0.5)))
    np.testing.assert_array_equal(apply_activation(y.copy(), "LeakyRelu", activation_alpha=0.2),
                                  np.where(y >= 0, y, y * np.float32(0.2)))
    np.testing.assert_array_equal(apply_activation(y.copy(), "Clip", 0.5), np.clip(y, 0, 0.5))
    with pytest.raises(ValueError, match="needs activation_slope"):
        apply_activation(y.copy(), "PRelu")
    with pytest.raises(ValueError, match="2 slopes"):
        apply_activation(y.copy(), "PRelu", activation_slope=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="not in Relu, Clip, PRelu, LeakyRelu"):
        apply_activation(y.copy(), "Sigmoid")


def test_face_landmark_style_block_through_the_default_pipeline():
    """Conv -> PRelu fuses; the graph keeps agreeing with onnxruntime."""
    m = _conv_prelu(RNG.uniform(0, 1, (1, K, 1, 1)))
    g = load_onnx(m)
    run_passes(g)
    assert ops(g) == ["Conv"] and g.nodes[0].attrs["activation"] == "PRelu"
