"""assign_zero_points: which tensors take which zero point (and scale), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from accel.ir import Graph, Node, Tensor
from tengine_host.quant.rules import apply_dla_rules
from tengine_host.quant.table import QuantTable
from tengine_host.quant.zero_point import assign_zero_points, asymmetric_entry, flat_ends

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


@pytest.mark.parametrize("lo, hi, want", [
    (-1.27, 12.7, (13.97 / 255, -105)),     # -128 + 1.27 / 0.05478 = -104.8
    (-1.27, 50.0, (13.97 / 255, -105)),     # beyond the threshold 12.7: clipped there
    (-0.3, 6.35, (6.65 / 255, -116)),       # -128 + 0.3 / 0.02608 = -116.5 -> -116
    (-10.0, 12.7, None),                    # 22.7 / 255 is not 1.25 x finer than 0.1
    (-50.0, 12.7, None),                    # both ends at the threshold
    (0.0, 12.7, None),                      # one-signed: zero point -128 instead
])
def test_asymmetric_entry_spans_the_range_within_the_threshold(lo, hi, want):
    got = asymmetric_entry({"scale": 0.1, "min": lo, "max": hi})
    if want is None:
        assert got is None
    else:
        assert got[0] == pytest.approx(want[0], rel=1e-12) and got[1] == want[1]


def test_mostly_one_signed_tensors_take_an_asymmetric_zero_point_where_the_dla_allows():
    """A leaky ReLU output read by a convolution takes one; the input of a HardSwish and
    the inputs of a product of two tensors may only take 0 or -2**k: on [-1.27, 12.7]
    -64 spans [-64 s, 191 s] with s = 12.7 / 191 = 0.0665, 1.5x finer than 0.1 (-32:
    12.7 / 159 = 0.0799, -16: 0.0888, only 1.13x; -128 leaves no code below 0), and of a
    product's two inputs the main one keeps it, the other stays symmetric."""
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in ("x", "l", "c", "h", "l2", "m")}
    t["w"] = Tensor("w", (8, 8, 1, 1), F32, np.ones((8, 8, 1, 1), np.float32))
    nodes = [Node("leaky", "LeakyRelu", ["x"], ["l"], {"alpha": 0.1}),
             Node("conv", "Conv", ["l", "w"], ["c"], {"kernel_shape": [1, 1]}),
             Node("hswish", "HardSwish", ["c"], ["h"]),
             Node("leaky2", "LeakyRelu", ["x"], ["l2"], {"alpha": 0.1}),
             Node("mul", "Mul", ["h", "l2"], ["m"])]
    graph = Graph("g", nodes, t, ["x"], ["m"])
    table = QuantTable({n: {"scale": 0.1, "min": -1.27, "max": 12.7} for n in t if n != "w"})
    out = assign_zero_points(graph, table)
    assert out.zero_point("l") == -105 and out.scale("l") == pytest.approx(13.97 / 255)
    assert {n: out.zero_point(n) for n in ("c", "l2", "h")} == {"c": -64, "l2": 0, "h": -64}
    assert out.scale("c") == pytest.approx(12.7 / 191) and out.scale("l2") == 0.1
    assert out.zero_point("x") == -105       # the graph input: leaky ReLUs read it
    assert assign_zero_points(graph, table, asymmetric=False).zero_point("l") == 0


def test_zero_point_groups_tied_by_scale_take_one_step_and_their_own_zero_points():
    """A concat of two leaky ReLU outputs is one zero-point group; added to another leaky
    ReLU's output it is tied to that one by scale too.  Both take the step spanning
    both ranges, [-1.27, 12.7]: 13.97 / 255 = 0.054784; the concat's zero point maps
    its low end -1.27 to -128 (-128 + 23.18 -> -105), the other's maps -0.5
    (-128 + 9.13 -> -119).  The sum adds them at one scale."""
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in ("x", "l1", "l2")}
    t.update({n: Tensor(n, (1, 16, 4, 4), F32) for n in ("c", "z", "s")})
    leaky = {"alpha": 0.1}
    cat = [Node("leaky1", "LeakyRelu", ["x"], ["l1"], leaky),
           Node("leaky2", "LeakyRelu", ["x"], ["l2"], leaky),
           Node("cat", "Concat", ["l1", "l2"], ["c"], {"axis": 1})]
    table = QuantTable({n: {"scale": 0.1, "min": -1.27, "max": 12.7} for n in t})
    table["z"]["min"] = -0.5
    alone = assign_zero_points(Graph("g", cat, t, ["x"], ["c"]), table)
    assert {alone.zero_point(n) for n in ("l1", "l2", "c")} == {-105}
    added = Graph("g", [*cat, Node("leaky3", "LeakyRelu", ["c"], ["z"], leaky),
                        Node("add", "Add", ["c", "z"], ["s"])], t, ["x"], ["s"])
    out = assign_zero_points(added, table)
    assert {n: out.zero_point(n) for n in ("l1", "l2", "c", "z")} == \
        {"l1": -105, "l2": -105, "c": -105, "z": -119}
    for n in ("l1", "l2", "c", "z"):
        assert out.scale(n) == pytest.approx(13.97 / 255, rel=1e-12), n


def test_a_scale_group_with_a_member_that_may_not_take_one_stays_symmetric():
    """The same sum with its second input read by a HardSwish (zero point 0 or -2**k
    only): the whole scale group keeps the symmetric step."""
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in ("x", "l1", "z", "s", "h")}
    leaky = {"alpha": 0.1}
    graph = Graph("g", [Node("leaky1", "LeakyRelu", ["x"], ["l1"], leaky),
                        Node("leaky3", "LeakyRelu", ["x"], ["z"], leaky),
                        Node("hswish", "HardSwish", ["z"], ["h"]),
                        Node("add", "Add", ["l1", "z"], ["s"])], t, ["x"], ["s", "h"])
    table = QuantTable({n: {"scale": 0.1, "min": -1.27, "max": 12.7} for n in t})
    out = assign_zero_points(graph, table)
    assert {n: (out.zero_point(n), out.scale(n)) for n in ("l1", "z")} == \
        {"l1": (0, 0.1), "z": (0, 0.1)}


def test_a_scale_group_member_without_an_entry_is_left_alone():
    """A sum whose second input has no table entry: the first still takes its step."""
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in ("x", "l1", "z", "s")}
    leaky = {"alpha": 0.1}
    graph = Graph("g", [Node("leaky1", "LeakyRelu", ["x"], ["l1"], leaky),
                        Node("leaky3", "LeakyRelu", ["x"], ["z"], leaky),
                        Node("add", "Add", ["l1", "z"], ["s"])], t, ["x"], ["s"])
    out = assign_zero_points(graph, QuantTable({"l1": {"scale": 0.1, "min": -1.27,
                                                       "max": 12.7}}))
    assert out.zero_point("l1") == -105 and out.scale("l1") == pytest.approx(13.97 / 255)
    assert "z" not in out


def _activation_after_conv(op: str, attrs: dict | None = None, *, to_output: bool = False):
    """x -> Conv (1x1, 8 -> 8) -> c -> ``op`` -> y -> Conv -> out (or, ``to_output``,
    y -> Concat with x -> out: the activation writes a model output through a mover)."""
    t = {n: Tensor(n, (1, 8, 4, 4), F32) for n in ("x", "c", "y")}
    t["w"] = Tensor("w", (8, 8, 1, 1), F32, np.ones((8, 8, 1, 1), np.float32))
    t["out"] = Tensor("out", (1, 16 if to_output else 8, 4, 4), F32)
    tail = (Node("cat", "Concat", ["y", "x"], ["out"], {"axis": 1}) if to_output else
            Node("conv2", "Conv", ["y", "w"], ["out"], {"kernel_shape": [1, 1]}))
    nodes = [Node("conv", "Conv", ["x", "w"], ["c"], {"kernel_shape": [1, 1]}),
             Node("act", op, ["c"], ["y"], attrs or {}), tail]
    return Graph("g", nodes, t, ["x"], ["out"])


def test_a_tensor_only_a_saturating_activation_reads_spans_the_part_it_tells_apart():
    """The part of a convolution's output [-10, 10] its reader's output still changes on,
    to a quarter of the reader's zero-point step (127/255 of its scale):

    * ReLU: flat below 0 (and within a quarter step of the top, 0.0098 below it):
      one-signed, zero point -128 and half the step;
    * HardSigmoid (0.2 x + 0.5, output scale 1/127): flat below -2.5 + 0.00098 / 0.2
      and above 2.5 - that: +-2.495 at 1/255 of the range, zero point about 0;
    * SiLU with an output scale of 10/127 (quarter step 0.0098) on [-20, 10]:
      |x sigmoid(x)| <= 0.0098 below about -6.4 (-6.3 * 0.00183 = -0.0115,
      -6.5 * 0.0015 = -0.0098)."""
    def table(out_scale):
        return QuantTable({"x": {"scale": 0.1, "min": -10.0, "max": 10.0},
                           "c": {"scale": 10 / 127, "min": -10.0, "max": 10.0},
                           "y": {"scale": out_scale, "min": 0.0, "max": 10.0},
                           "out": {"scale": 0.1, "min": -10.0, "max": 10.0}})

    grid = 20 / 4096                # the points the readers are evaluated at
    quarter = 0.25 * 127 / 255 * 10 / 127
    relu = _activation_after_conv("Relu")
    (lo, hi), = flat_ends(relu, table(10 / 127)).values()
    # (any function is within a quarter step of its top value that close to the top)
    assert lo == 0.0 and hi == pytest.approx(10 - quarter, abs=grid)
    out = assign_zero_points(relu, table(10 / 127))
    assert out.zero_point("c") == -128 and out.scale("c") == pytest.approx(10 / 255)

    hsig = _activation_after_conv("HardSigmoid", {"alpha": 0.2, "beta": 0.5})
    (lo, hi), = flat_ends(hsig, table(1 / 127)).values()
    assert lo == pytest.approx(-2.4951, abs=grid) and hi == pytest.approx(2.4951, abs=grid)
    out = assign_zero_points(hsig, table(1 / 127))
    assert out.scale("c") == pytest.approx(4.99 / 255, rel=0.01)
    assert out.zero_point("c") in (-1, 0)

    silu = _activation_after_conv("Swish", {"alpha": 1.0})
    wide = table(10 / 127)
    wide["c"] = {"scale": 20 / 127, "min": -20.0, "max": 10.0}
    (lo, hi), = flat_ends(silu, wide).values()
    assert -6.6 < lo < -6.2 and hi == pytest.approx(10 - quarter, abs=30 / 4096)
    # on [-10, 10] the part, 16.4 wide, is not 1.25 times narrower: the range stays
    assert flat_ends(silu, table(10 / 127)) == {}


def test_flat_ends_leave_what_the_activation_does_not_decide_alone():
    # the activation writes a model output (through a concat): its fp32 detail matters
    sig = _activation_after_conv("Sigmoid", to_output=True)
    table = QuantTable({"c": {"scale": 10 / 127, "min": -10.0, "max": 10.0},
                        "y": {"scale": 1 / 127, "min": 0.0, "max": 1.0}})
    assert flat_ends(sig, table) == {}
    # a leaky ReLU is not flat anywhere: its bottom tenth is not worth a clipped end
    leaky = _activation_after_conv("LeakyRelu", {"alpha": 0.1})
    table = QuantTable({"c": {"scale": 10 / 127, "min": -10.0, "max": 10.0},
                        "y": {"scale": 10 / 127, "min": -1.0, "max": 10.0}})
    assert flat_ends(leaky, table) == {}
    # a tensor a convolution reads too keeps its range
    relu = _activation_after_conv("Relu")
    relu.nodes.append(Node("conv3", "Conv", ["c", "w"], ["z"], {"kernel_shape": [1, 1]}))
    relu.tensors["z"] = Tensor("z", (1, 8, 4, 4), F32)
    table["y"] = {"scale": 10 / 127, "min": 0.0, "max": 10.0}
    assert flat_ends(relu, table) == {}
