"""assign_zero_points: which tensors take zero point -128 (and scale 127 s / 255), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from accel.ir import Graph, Node, Tensor
from tengine_host.quant.rules import apply_dla_rules
from tengine_host.quant.table import QuantTable
from tengine_host.quant.zero_point import assign_zero_points

F32 = np.dtype(np.float32)


def _graph() -> Graph:
    """x (signed) feeds: a pooled ReLU (tied pair), a ReLU concatenated with x itself, a
    sigmoid added to the pooled ReLU (a tied sum of one-signed tensors), a product of
    that sum and a HardSigmoid gate (one-signed both), and a product of x and another
    gate, and a residual sum of x and a ReLU of it."""
    names = ("x", "r1", "p1", "r2", "c", "s", "a", "h", "m", "h2", "m2", "r3", "res")
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in names}
    t["c"] = Tensor("c", (1, 16, 4, 4), F32)
    pool = {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0]}
    nodes = [Node("relu1", "Relu", ["x"], ["r1"]),
             Node("pool", "MaxPool", ["r1"], ["p1"], pool),
             Node("relu2", "Relu", ["x"], ["r2"]),
             Node("cat", "Concat", ["r2", "x"], ["c"], {"axis": 1}),
             Node("sig", "Sigmoid", ["x"], ["s"]),
             Node("add", "Add", ["s", "p1"], ["a"]),
             Node("hsig", "HardSigmoid", ["x"], ["h"], {"alpha": 0.2, "beta": 0.5}),
             Node("mul", "Mul", ["a", "h"], ["m"]),
             Node("hsig2", "HardSigmoid", ["x"], ["h2"], {"alpha": 0.2, "beta": 0.5}),
             Node("mul2", "Mul", ["x", "h2"], ["m2"]),
             Node("relu3", "Relu", ["x"], ["r3"]),
             Node("res", "Add", ["x", "r3"], ["res"])]
    return Graph("g", nodes, t, ["x"], ["c", "m", "m2", "res"])


def _table() -> QuantTable:
    ranges = {"x": (-3.0, 2.0), "r1": (0.0, 2.0), "p1": (0.0, 2.0), "r2": (0.0, 2.0),
              "c": (-3.0, 2.0), "s": (0.05, 0.9), "a": (0.1, 2.5), "h": (0.0, 1.0),
              "m": (0.0, 2.4), "h2": (0.0, 1.0), "m2": (-3.0, 2.0), "r3": (0.0, 2.0),
              "res": (-3.0, 4.0)}
    return QuantTable({n: {"scale": max(abs(lo), hi) / 127, "min": lo, "max": hi}
                       for n, (lo, hi) in ranges.items()})


def test_one_signed_tensors_take_zero_point_minus_128_where_the_dla_allows():
    graph = _graph()
    sym = apply_dla_rules(graph, _table())
    out = assign_zero_points(graph, sym)
    got = {n: out.zero_point(n) for n in out}
    assert got == {
        "x": 0, "c": 0, "r2": 0,       # concatenated with the signed x: one group, symmetric
        "r1": -128, "p1": -128, "s": -128,   # pool and sum ties, every member one-signed
        "a": -128, "m": -128,          # outputs whose ranges are one-signed
        "h": 0,                        # a product takes one zero point: its main input's
        "h2": -128, "m2": 0,           # ... or its operand's, when the main is signed
        "r3": -128, "res": 0,          # a sum's inputs need not share one (x: 0)
    }
    for n in out:
        want = sym[n]["scale"] * (127 / 255 if got[n] else 1)
        assert out[n]["scale"] == pytest.approx(want, rel=1e-15), n
        assert (out[n]["min"], out[n]["max"]) == (sym[n]["min"], sym[n]["max"])
    # the tied sum's members share scale and zero point (the largest threshold, 2.0);
    # the residual's ReLU keeps x's threshold (3.0, tied by the sum) at half x's step
    assert out["s"]["scale"] == out["p1"]["scale"] == out["r1"]["scale"] == \
        pytest.approx(2.0 / 255)
    assert out["r3"]["scale"] == pytest.approx(3.0 / 255) and out["x"]["scale"] == 3.0 / 127
    assert "zero_point" not in sym["r1"]        # the input table is not modified


def test_the_threshold_is_kept_and_the_step_halves():
    """A ReLU output calibrated to [0, 2.54]: symmetric codes 0..127 at 0.02, with the zero
    point codes -128..127 at 0.00996: 2.54 is still the largest code, 0 is code -128."""
    graph = _graph()
    out = assign_zero_points(graph, QuantTable({"r2": {"scale": 0.02, "min": 0.0,
                                                       "max": 2.54}}))
    s, z = out.scale("r2"), out.zero_point("r2")
    assert (127 - z) * s == pytest.approx(2.54) and z == -128


def test_hard_sigmoid_keeps_saturating_at_one():
    graph = _graph()
    out = assign_zero_points(graph, apply_dla_rules(graph, _table()))
    # h is an operand beside a zero-pointed main input; alone, the fixed 1/127 becomes
    # 1/255 with zero point -128
    alone = Graph("h", [graph.node("hsig")], graph.tensors, ["x"], ["h"])
    solo = assign_zero_points(alone, apply_dla_rules(alone, _table()))
    assert out.zero_point("h") == 0 and out.scale("h") == pytest.approx(1 / 127)
    assert solo.zero_point("h") == -128 and solo.scale("h") == pytest.approx(1 / 255)
    assert round(1 / solo.scale("h")) + solo.zero_point("h") == 127


def test_entries_without_a_range_and_tables_with_zero_points():
    graph = _graph()
    out = assign_zero_points(graph, QuantTable({"r2": {"scale": 0.1}, "s": {"scale": 0.01,
                                                                             "min": 0.0}}))
    assert out.zero_point("r2") == 0 and out.zero_point("s") == -128
    with pytest.raises(ValueError, match="symmetric table; 1 entries already have a zero "
                                         "point \\('s'\\)"):
        assign_zero_points(graph, out)
