"""global_reduce: a ReduceMean over the two spatial axes is a GlobalAveragePool (then a
Flatten when the axes are not kept), checked against onnxruntime before and after."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import global_reduce
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

SHAPE = [1, 3, 5, 4]


def _mean(axes, keepdims, opset=13, extra=(), outputs=("y",), op="ReduceMean"):
    if opset >= 18 or op == "ReduceSum":
        nodes = [node("m", op, ["x", "axes"], ["y"], keepdims=keepdims)]
        inits = [const("axes", np.array(axes, np.int64))]
    else:
        nodes = [node("m", op, ["x"], ["y"], axes=list(axes), keepdims=keepdims)]
        inits = []
    return model([*nodes, *extra], inits, SHAPE, outputs=outputs, opset=opset)


@pytest.mark.parametrize("axes", [(2, 3), (3, 2), (-1, -2), (2, -1)])
@pytest.mark.parametrize("opset", [13, 18])
def test_spatial_means_become_global_pools(axes, opset):
    g = check(_mean(axes, 1, opset), global_reduce.apply)
    assert ops(g) == ["GlobalAveragePool"] and g.tensors["y"].shape == (1, 3, 1, 1)


def test_without_kept_axes_a_flatten_follows_and_keeps_the_name():
    g = check(_mean((2, 3), 0), global_reduce.apply)
    assert ops(g) == ["GlobalAveragePool", "Flatten"]
    assert g.nodes[-1].outputs == ["y"] and g.tensors["y"].shape == (1, 3)
    # a reader of the mean still reads it
    m = _mean((2, 3), 0, extra=[node("s", "Sigmoid", ["y"], ["z"])], outputs=("z",))
    g = check(m, global_reduce.apply)
    assert ops(g) == ["GlobalAveragePool", "Flatten", "Sigmoid"]


@pytest.mark.parametrize("axes", [(1, 2, 3), (2,), (1,), (0, 2, 3)])
def test_other_reductions_stay(axes):
    unchanged(_mean(axes, 1), global_reduce.apply)
    unchanged(_mean(axes, 0), global_reduce.apply)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_a_spatial_sum_is_the_mean_times_the_map_size(keepdims):
    g = check(_mean((2, 3), keepdims, op="ReduceSum"), global_reduce.apply)
    want = ["GlobalAveragePool", "Mul"] if keepdims else ["GlobalAveragePool", "Flatten", "Mul"]
    assert ops(g) == want and g.nodes[-1].outputs == ["y"]
    assert g.tensors[g.nodes[-1].inputs[1]].data.reshape(-1).tolist() == [5 * 4]
