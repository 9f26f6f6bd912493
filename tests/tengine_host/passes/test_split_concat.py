"""split_concat: a Split of what Concats joined becomes the joins of the pieces (each
branch apart), checked against onnxruntime before and after."""

from __future__ import annotations

import numpy as np

from tengine_host.passes import split_concat
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

RNG = np.random.default_rng(3)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _head(box: int = 4, cls: int = 3, split=(4, 3), extra=(), outputs=("boxes", "scores")):
    """A YOLOv8-like head on two levels: per level a box and a class convolution,
    concatenated on channels and flattened; the levels concatenated along the anchors;
    the channels split back into box and class logits (then a sigmoid)."""
    nodes, inits, levels = [], [], []
    for i, stride in enumerate((1, 2)):
        nodes += [node(f"box{i}", "Conv", ["x", f"wb{i}"], [f"b{i}"], strides=[stride] * 2),
                  node(f"cls{i}", "Conv", ["x", f"wc{i}"], [f"c{i}"], strides=[stride] * 2),
                  node(f"cat{i}", "Concat", [f"b{i}", f"c{i}"], [f"bc{i}"], axis=1),
                  node(f"flat{i}", "Reshape", [f"bc{i}", "shape"], [f"f{i}"])]
        inits += [const(f"wb{i}", _w(box, 2, 1, 1)), const(f"wc{i}", _w(cls, 2, 1, 1))]
        levels.append(f"f{i}")
    nodes += [node("levels", "Concat", levels, ["all"], axis=2),
              node("split", "Split", ["all", "sizes"], ["boxes", "logits"], axis=1),
              node("sig", "Sigmoid", ["logits"], ["scores"]), *extra]
    inits += [const("shape", np.array([1, box + cls, -1], np.int64)),
              const("sizes", np.array(split, np.int64))]
    return model(nodes, inits, [1, 2, 4, 4], outputs=outputs)


def test_a_detection_heads_split_goes_and_each_branch_is_joined_apart():
    g = check(_head(), split_concat.apply)
    assert "Split" not in ops(g)
    # boxes and logits are each a Concat of two Reshapes of their own convolutions
    for out, conv in (("boxes", "box"), ("logits", "cls")):
        join = g.producer(out)
        assert join.op_type == "Concat" and join.attrs["axis"] == 2
        flats = [g.producer(t) for t in join.inputs]
        assert [f.op_type for f in flats] == ["Reshape", "Reshape"]
        assert [g.producer(f.inputs[0]).name for f in flats] == [f"{conv}0", f"{conv}1"]
    assert g.tensors["logits"].shape == (1, 3, 20) and g.tensors["boxes"].shape == (1, 4, 20)
    assert not any(n.name.startswith("cat") or n.name == "levels" for n in g.nodes)


def test_a_split_of_a_concat_on_its_own_axis_reads_the_inputs():
    nodes = [node("a", "Relu", ["x"], ["p"]), node("b", "Sigmoid", ["x"], ["q"]),
             node("cat", "Concat", ["p", "q"], ["pq"], axis=1),
             node("split", "Split", ["pq"], ["u", "v"], axis=1, split=[2, 2]),
             node("add", "Add", ["u", "v"], ["y"])]
    g = check(model(nodes, [], [1, 2, 3, 3], opset=11), split_concat.apply)
    assert sorted(ops(g)) == ["Add", "Relu", "Sigmoid"]
    assert g.node("add").inputs == ["p", "q"]


def test_splits_it_cannot_take_apart_stay():
    # a boundary inside a branch (5 + 2 cuts the 4 box channels' neighbour)
    unchanged(_head(split=(5, 2)), split_concat.apply)
    # the joined tensor is read by another node too: it is still needed whole
    unchanged(_head(extra=[node("keep", "Relu", ["all"], ["whole"])],
                    outputs=("boxes", "scores", "whole")), split_concat.apply)
    # a piece that is a Concat's input itself cannot take a graph output's name
    nodes = [node("a", "Relu", ["x"], ["p"]), node("b", "Sigmoid", ["x"], ["q"]),
             node("cat", "Concat", ["p", "q"], ["pq"], axis=1),
             node("split", "Split", ["pq"], ["y", "v"], axis=1, split=[2, 2]),
             node("exp", "Exp", ["v"], ["z"])]
    unchanged(model(nodes, [], [1, 2, 3, 3], outputs=("y", "z"), opset=11), split_concat.apply)
