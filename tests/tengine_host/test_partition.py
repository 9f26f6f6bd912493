"""Partitioning with a stand-in accelerator that runs Conv only."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.devices import CpuDevice
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.partition import partition


class ConvOnly(CpuDevice):
    """Runs Conv nodes (in fp32, through the CPU engine) and declines the rest."""

    def __init__(self):
        super().__init__()
        self.name = "convdev"

    def supports(self, node, graph):
        return (True, "") if node.op_type == "Conv" else (False, f"{node.op_type} is not Conv")


def _diamond():
    # c1 -> c2 ----------> add
    #   \-> pool -> c3 --/      c1, c2, c3 cannot share one subgraph: pool sits between c1 and c3.
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((2, 2, 3, 3)).astype(np.float32), f"w{i}")
             for i in range(3)]
    pads = [1, 1, 1, 1]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c1"], name="c1", pads=pads),
             helper.make_node("Conv", ["c1", "w1"], ["c2"], name="c2", pads=pads),
             helper.make_node("MaxPool", ["c1"], ["p"], name="pool", kernel_shape=[3, 3],
                              pads=pads),
             helper.make_node("Conv", ["p", "w2"], ["c3"], name="c3", pads=pads),
             helper.make_node("Add", ["c2", "c3"], ["y"], name="add")]
    g = helper.make_graph(nodes, "diamond",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def test_convex_ordered_subgraphs_and_report():
    g = _diamond()
    part = partition(g, [ConvOnly(), CpuDevice()])
    names = [(dev.name, [n.name for n in sub.nodes]) for dev, sub in part.parts]
    # Hand-derived: four is the minimum (c1..c3 cannot form one convex group).
    assert names == [("convdev", ["c1", "c2"]), ("cpu", ["pool"]), ("convdev", ["c3"]),
                     ("cpu", ["add"])]
    assert part.parts[0][1].outputs == ["c1", "c2"] and part.parts[1][1].inputs == ["c1"]
    assert part.parts[3][1].inputs == ["c2", "c3"] and part.parts[3][1].outputs == ["y"]
    # MACs by hand: each conv is 2 out ch * 5*5 pixels * 2 in ch * 3*3 = 900.
    assert part.macs == {"convdev": 2700, "cpu": 0} and part.ops == {"convdev": 3, "cpu": 2}
    assert [(f.node, f.reason) for f in part.fallbacks] == [("pool", "MaxPool is not Conv"),
                                                            ("add", "Add is not Conv")]
    text = part.report()
    assert "4 subgraph(s)" in text and "fallback: pool (MaxPool) -> cpu" in text


def test_partitioned_run_equals_single_device_run():
    g = _diamond()
    x = {"x": np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)}
    with Executor(g, [CpuDevice()]) as ex:
        whole = ex.run(x)["y"]
    with Executor(g, [ConvOnly(), CpuDevice()]) as ex:
        split = ex.run(x)["y"]
        assert len(ex.subgraph_times) == 4 and set(ex.node_times) == {"c1", "c2", "pool",
                                                                       "c3", "add"}
    np.testing.assert_array_equal(split, whole)


def test_unsupported_everywhere_names_node_and_reasons():
    with pytest.raises(ValueError, match=r"no device runs node 'pool' \(MaxPool\): convdev: "):
        partition(_diamond(), [ConvOnly()])
