"""split_variadic: Sum / Max / Min of three or more tensors become chains of two-input
nodes, Mean a Sum times 1 / n, a Sum of one its input; checked against onnxruntime."""

from __future__ import annotations

import pytest

from tengine_host.passes import split_variadic
from tests.tengine_host.passes.graphs import check, model, node, ops, unchanged

SHAPE = [1, 3, 4, 5]


def _branches(op, n, extra=()):
    """x -> n different unary branches -> op(branches)."""
    unary = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs"]
    nodes = [node(f"u{i}", unary[i], ["x"], [f"b{i}"]) for i in range(n)]
    nodes.append(node("v", op, [f"b{i}" for i in range(n)], ["y"]))
    return model([*nodes, *extra], [], SHAPE)


@pytest.mark.parametrize("op, n, want", [
    ("Sum", 3, ["Add", "Add"]), ("Sum", 5, ["Add"] * 4), ("Max", 3, ["Max", "Max"]),
    ("Min", 4, ["Min"] * 3), ("Mean", 2, ["Add", "Mul"]), ("Mean", 3, ["Add", "Add", "Mul"]),
])
def test_many_inputs_become_a_chain(op, n, want):
    g = check(_branches(op, n), split_variadic.apply)
    assert ops(g)[n:] == want and g.nodes[-1].outputs == ["y"]


def test_a_sum_of_one_is_its_input():
    g = check(_branches("Sum", 1), split_variadic.apply)
    assert ops(g) == ["Relu", "Identity"]


@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
def test_two_inputs_stay(op):
    unchanged(_branches(op, 2), split_variadic.apply)


def test_broadcast_inputs_stay():
    nodes = [node("r", "Relu", ["x"], ["a"]),
             node("m", "ReduceMean", ["x"], ["b"], axes=[2, 3], keepdims=1),
             node("s", "Sum", ["a", "b", "x"], ["y"])]
    unchanged(model(nodes, [], SHAPE), split_variadic.apply)
