"""Cross-layer equalization: hand-computed scales, the fp32 function kept (against
onnxruntime on the original model), and the pairs it must leave alone."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.passes.edit import constant
from tengine_host.quant.equalize import equalize, spread
from tests.tengine_host.passes.graphs import const, model, node, rel_err

RNG = np.random.default_rng(11)


def _weights(node_, graph):
    w = constant(graph, node_.inputs[1])
    b = constant(graph, node_.inputs[2]) if len(node_.inputs) > 2 else None
    return w, b


def _with_ranges(shape, ranges, axis):
    """Random weights whose largest |w| along every index of ``axis`` is ``ranges``."""
    w = RNG.uniform(-1, 1, shape)
    moved = np.moveaxis(w, axis, 0).reshape(shape[axis], -1)
    moved[:, 0] = 1.0                       # one entry of each channel at exactly the range
    w = np.moveaxis(moved.reshape(np.moveaxis(w, axis, 0).shape), 0, axis)
    return w * np.asarray(ranges).reshape([-1 if i == axis else 1 for i in range(len(shape))])


def test_a_pair_gets_the_scales_computed_by_hand():
    # producer output-channel ranges r1 = (4, 1/4), consumer input-channel ranges
    # r2 = (1, 4): s = sqrt(r1 / r2) = (2, 1/4); every value is a power of two, so the
    # rescaled weights are exact.
    w1 = np.array([[4.0, -1.0], [0.25, 0.125]]).reshape(2, 2, 1, 1)
    b1 = np.array([2.0, 0.5])
    w2 = np.array([[1.0, -4.0], [0.5, 2.0]]).reshape(2, 2, 1, 1)
    m = model([node("c1", "Conv", ["x", "w1", "b1"], ["t"]), node("r", "Relu", ["t"], ["u"]),
               node("c2", "Conv", ["u", "w2"], ["y"])],
              [const("w1", w1), const("b1", b1), const("w2", w2)], [1, 2, 3, 3])
    g = load_model(m)
    out, report = equalize(g)
    c1, c2 = out.node("c1"), out.node("c2")
    assert c1.attrs["activation"] == "Relu"
    w1e, b1e = _weights(c1, out)
    np.testing.assert_array_equal(w1e.reshape(2, 2), [[2.0, -0.5], [1.0, 0.5]])
    np.testing.assert_array_equal(b1e, [1.0, 2.0])
    np.testing.assert_array_equal(_weights(c2, out)[0].reshape(2, 2), [[2.0, -1.0], [1.0, 0.5]])
    (pair,) = report.pairs
    assert (pair.producer, pair.consumer) == ("c1", "c2") and not report.skipped
    np.testing.assert_array_equal(pair.scale, [2.0, 0.25])
    np.testing.assert_array_equal(pair.producer_before, [4.0, 0.25])
    np.testing.assert_array_equal(pair.consumer_before, [1.0, 4.0])
    np.testing.assert_array_equal(pair.producer_after, [2.0, 1.0])
    np.testing.assert_array_equal(pair.consumer_after, [2.0, 1.0])
    assert spread(pair.consumer_before) == 4.0 and spread(pair.consumer_after) == 2.0
    # the input graph is left as it was
    np.testing.assert_array_equal(_weights(g.node("c1"), g)[0], w1.astype(np.float32))


def test_grouped_consumer_ranges_are_per_group():
    # c2 has 2 groups of 2 input and 2 output channels: input channel c of group g is
    # read by output rows 2g and 2g + 1 at column c % 2; r2 is the larger of the two.
    w1 = np.diag([8.0, 2.0, 1.0, 0.5]).reshape(4, 4, 1, 1)
    w2 = np.array([[2.0, 0.5], [-0.5, 0.125], [1.0, 4.0], [0.25, -8.0]]).reshape(4, 2, 1, 1)
    m = model([node("c1", "Conv", ["x", "w1"], ["t"]),
               node("c2", "Conv", ["t", "w2"], ["y"], group=2)],
              [const("w1", w1), const("w2", w2)], [1, 4, 2, 2])
    out, report = equalize(load_model(m))
    (pair,) = report.pairs
    r2 = np.array([2.0, 0.5, 1.0, 8.0])
    np.testing.assert_array_equal(pair.consumer_before, r2)
    np.testing.assert_allclose(pair.scale, np.sqrt(np.array([8.0, 2.0, 1.0, 0.5]) / r2))
    np.testing.assert_allclose(pair.consumer_after, np.sqrt([16.0, 1.0, 1.0, 4.0]))
    by_row = np.array([[2.0, 2.0], [2.0, 2.0], [1.0, 0.25], [1.0, 0.25]])  # s of each group
    np.testing.assert_allclose(_weights(out.node("c2"), out)[0].reshape(4, 2),
                               w2.reshape(4, 2) * by_row, rtol=1e-7)


def test_depthwise_chain_settles_where_each_channel_has_the_cube_root_of_its_ranges():
    # conv -> dw -> conv: scaling moves range along the chain but keeps the product
    # a_k * d_k * b_k of channel k's three ranges, and the fixed point has all three
    # equal, so each becomes the cube root of the product.
    a = np.array([8.0, 1.0, 1.0, 1.0])
    d = np.array([1.0, 27.0, 1.0, 2.0])
    b = np.array([1.0, 1.0, 0.125, 4.0])
    w1 = _with_ranges((4, 3, 3, 3), a, 0)
    wd = _with_ranges((4, 1, 3, 3), d, 0)
    w2 = _with_ranges((5, 4, 1, 1), b, 1)
    slope = np.array([0.1, -0.2, 0.3, 1.5]).reshape(4, 1, 1)
    m = model([node("c1", "Conv", ["x", "w1", "b1"], ["t"], pads=[1, 1, 1, 1]),
               node("p", "PRelu", ["t", "s"], ["u"]),
               node("dw", "Conv", ["u", "wd", "bd"], ["v"], group=4, pads=[1, 1, 1, 1]),
               node("l", "LeakyRelu", ["v"], ["z"], alpha=0.2),
               node("c2", "Conv", ["z", "w2"], ["y"])],
              [const("w1", w1), const("b1", RNG.standard_normal(4)), const("s", slope),
               const("wd", wd), const("bd", RNG.standard_normal(4)), const("w2", w2)],
              [1, 3, 6, 6])
    out, report = equalize(load_model(m))
    first, second = report.pairs
    assert [(p.producer, p.consumer) for p in report.pairs] == [("c1", "dw"), ("dw", "c2")]
    cube = np.cbrt(a * d * b)
    for ranges in (first.producer_after, first.consumer_after, second.producer_after,
                   second.consumer_after):
        np.testing.assert_allclose(ranges, cube, rtol=1e-3)
    np.testing.assert_allclose(first.scale, a / cube, rtol=1e-3)
    np.testing.assert_allclose(second.scale, cube / b, rtol=1e-3)
    assert 2 < report.sweeps < 20
    _same_function(m, out)


def _same_function(m, graph, seed=0):
    """The rewritten graph computes what onnxruntime computes on the original model.

    Tolerance: rescaling rounds each weight to float32 once more (relative 2**-24),
    and the sums over at most a few hundred products round in a different place;
    1e-5 of the output's largest value is ~170 float32 ulps of it."""
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    got = interpret(graph, {"x": x})
    for o, w in zip(m.graph.output, want, strict=True):
        assert rel_err(got[o.name], w) <= 1e-5, o.name


def test_fp32_function_is_unchanged_through_every_kind_of_pair():
    # ranges spread over two decades per channel, so the scales are far from 1 and a
    # scale applied to the wrong channel or axis would change the outputs
    def spread_w(*shape):
        w = RNG.standard_normal(shape)
        return w * 10.0 ** RNG.uniform(-1, 1, (shape[0],) + (1,) * (len(shape) - 1))

    nodes = [node("c1", "Conv", ["x", "w1", "b1"], ["t1"], pads=[1, 1, 1, 1]),
             node("r1", "Relu", ["t1"], ["u1"]),
             node("g2", "Conv", ["u1", "w2", "b2"], ["t2"], group=2, strides=[2, 2],
                  pads=[0, 0, 1, 1]),
             node("p2", "PRelu", ["t2", "s2"], ["u2"]),
             node("dw", "Conv", ["u2", "w3", "b3"], ["t3"], group=8, pads=[1, 1, 1, 1]),
             node("c4", "Conv", ["t3", "w4", "b4"], ["t4"]),
             node("l4", "LeakyRelu", ["t4"], ["u4"], alpha=0.05),
             node("gap", "GlobalAveragePool", ["u4"], ["pool"]),
             node("flat", "Flatten", ["pool"], ["f"]),
             node("fc1", "Gemm", ["f", "w5", "b5"], ["t5"], transB=1, alpha=0.5, beta=2.0),
             node("r5", "Relu", ["t5"], ["u5"]),
             node("fc2", "Gemm", ["u5", "w6", "b6"], ["y"])]
    inits = [const("w1", spread_w(6, 3, 3, 3)), const("b1", RNG.standard_normal(6)),
             const("w2", spread_w(8, 3, 3, 3)), const("b2", RNG.standard_normal(8)),
             const("s2", RNG.uniform(-0.5, 0.5, (8, 1, 1))),
             const("w3", spread_w(8, 1, 3, 3)), const("b3", RNG.standard_normal(8)),
             const("w4", spread_w(10, 8, 1, 1)), const("b4", RNG.standard_normal(10)),
             const("w5", spread_w(7, 10)), const("b5", RNG.standard_normal(7)),
             const("w6", RNG.standard_normal((7, 4))), const("b6", RNG.standard_normal(4))]
    m = model(nodes, inits, [2, 3, 9, 9])
    out, report = equalize(load_model(m))
    assert [(p.producer, p.consumer) for p in report.pairs] == [
        ("c1", "g2"), ("g2", "dw"), ("dw", "c4"), ("fc1", "fc2")]
    assert all(p.scale.max() / p.scale.min() > 3 for p in report.pairs)
    _same_function(m, out)


def _skipped(m):
    g = load_model(m)
    out, report = equalize(g)
    assert not report.pairs
    for n in g.nodes:       # every weight and bias left as it was
        assert out.node(n.name).inputs == n.inputs
    return report.skipped


def test_relu6_is_skipped_with_the_reason():
    m = model([node("c1", "Conv", ["x", "w1"], ["t"]), node("clip", "Clip", ["t", "lo", "hi"],
                                                                ["u"]),
               node("c2", "Conv", ["u", "w2"], ["y"])],
              [const("w1", RNG.standard_normal((4, 2, 1, 1))), const("lo", np.float32(0)),
               const("hi", np.float32(6)), const("w2", RNG.standard_normal((3, 4, 1, 1)))],
              [1, 2, 3, 3])
    (skip,) = _skipped(m)
    assert (skip.producer, skip.consumer) == ("c1", "c2")
    assert "Clip(0, 6.0)" in skip.reason and "6.0/s_k" in skip.reason


def test_a_tensor_with_two_readers_or_that_is_a_graph_output_is_skipped():
    w = [const(f"w{i}", RNG.standard_normal((4, 4, 1, 1))) for i in range(4)]
    two = model([node("c1", "Conv", ["x", "w0"], ["t"]), node("c2", "Conv", ["t", "w1"], ["y"]),
                 node("c3", "Conv", ["t", "w2"], ["z"])], w[:3], [1, 4, 2, 2],
                outputs=("y", "z"))
    skips = _skipped(two)
    assert [(s.producer, s.consumer) for s in skips] == [("c1", "c2"), ("c1", "c3")]
    assert all("'t' has 2 readers (c2, c3)" in s.reason for s in skips)
    out = model([node("c1", "Conv", ["x", "w0"], ["t"]), node("c2", "Conv", ["t", "w1"], ["y"])],
                w[:2], [1, 4, 2, 2], outputs=("t", "y"))
    (skip,) = _skipped(out)
    assert "'t' is a graph output" in skip.reason


def test_iterations_must_be_positive():
    m = model([node("c1", "Conv", ["x", "w"], ["y"])], [const("w", np.ones((1, 1, 1, 1)))],
              [1, 1, 1, 1])
    with pytest.raises(ValueError, match="iterations must be at least 1, got 0"):
        equalize(load_model(m), iterations=0)


def test_a_gemm_bias_that_varies_along_rows_is_skipped():
    m = model([node("fc1", "Gemm", ["x", "w1", "c1"], ["t"], transB=1),
               node("fc2", "Gemm", ["t", "w2"], ["y"], transB=1)],
              [const("w1", RNG.standard_normal((3, 4))), const("c1", RNG.standard_normal((2, 3))),
               const("w2", RNG.standard_normal((2, 3)))], [2, 4])
    (skip,) = _skipped(m)
    assert skip.reason == "fc1: bias 'c1' of shape (2, 3) is not one value per channel"
