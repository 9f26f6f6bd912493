from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.devices import DEVICES, Device, get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate


def test_get_device_lists_names_on_error():
    assert isinstance(get_device("cpu"), Device)
    with pytest.raises(ValueError, match=r"device 'tpu' not in cpu, nvdla"):
        get_device("tpu")
    assert list(DEVICES)[:2] == ["cpu", "nvdla"]
    with pytest.raises(ValueError, match="precision 'fp16' not in fp32, int8"):
        get_device("cpu", precision="fp16")


def _conv_relu_fc():
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * .3).astype(np.float32),
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((5, 64)) * .2).astype(np.float32), "fw"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "fb")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    run_passes(graph)
    return graph


def test_int8_mode_outputs_are_quantized_and_close_to_fp32():
    g = _conv_relu_fc()
    rng = np.random.default_rng(6)
    samples = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(20)]
    table = calibrate(g, samples, progress=False)
    with Executor(g, [get_device("cpu")]) as ex:
        ref = ex.run(samples[0])["y"]
    with Executor(g, [get_device("cpu", precision="int8")], table) as ex:
        got = ex.run(samples[0])["y"]
    step = table["y"]["scale"]
    q = got / step
    np.testing.assert_allclose(q, np.round(q), atol=1e-3)  # on the int8 grid of the output
    assert np.abs(got - ref).max() < 4 * step, "int8 drifted more than 4 output steps from fp32"
    assert g.nodes[0].attrs["activation"] == "Relu" and (got.size == 5)


def test_int8_without_table_or_entry_is_a_clear_error():
    g = _conv_relu_fc()
    with pytest.raises(ValueError, match="needs a calibration table"):
        Executor(g, [get_device("cpu", precision="int8")]).prerun()
    with pytest.raises(ValueError, match="'x' has no entry in the calibration table"):
        Executor(g, [get_device("cpu", precision="int8")], {}).prerun()


def test_int8_pooling_and_add_run_the_dla_arithmetic():
    # x -> MaxPool -> AveragePool(3x3, pads, count_include_pad) --\
    #   \-----------------------------------------------> Add(... , Relu(x) pooled) -> y
    nodes = [helper.make_node("MaxPool", ["x"], ["m"], name="max", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("AveragePool", ["m"], ["a"], name="avg", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], count_include_pad=1),
             helper.make_node("AveragePool", ["x"], ["b"], name="avg2", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    g = helper.make_graph(nodes, "pools",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    run_passes(graph)
    rng = np.random.default_rng(8)
    samples = [{"x": rng.standard_normal((1, 2, 6, 6)).astype(np.float32)} for _ in range(8)]
    table = calibrate(graph, samples, progress=False)
    s = table["x"]["scale"]
    # DLA rules: pooling keeps its input's scale, and the Add's inputs share one
    assert table["m"]["scale"] == table["a"]["scale"] == table["b"]["scale"] == s
    with Executor(graph, [get_device("cpu", precision="int8")], table) as ex:
        assert set(ex.prepared[0][2].overrides) == {"max", "avg", "avg2", "add"}
        env = ex.run(samples[0])
    with Executor(graph, [get_device("cpu")]) as ex:
        ref = ex.run(samples[0])["y"]
    step = table["y"]["scale"]
    q = env["y"] / step
    np.testing.assert_allclose(q, np.round(q), atol=1e-3)     # on the output's int8 grid
    # input rounding (<= 1/2 step of s per value, averaged) + two PDP roundings + the
    # Add's output rounding: a few steps at most
    assert np.abs(env["y"] - ref).max() <= 2 * s + step


def test_int8_max_pool_equals_fp32_pool_of_the_quantized_input():
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="max", kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "mp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    x = np.random.default_rng(9).standard_normal((1, 3, 7, 7)).astype(np.float32)
    table = calibrate(graph, [{"x": x}], progress=False)
    s = table["x"]["scale"]
    xq = (np.clip(np.sign(x / s) * np.floor(np.abs(x / s) + 0.5), -128, 127) * s
          ).astype(np.float32)
    with Executor(graph, [get_device("cpu")]) as ex:
        want = ex.run({"x": xq})["y"]         # the fp32 op on the dequantized input
    with Executor(graph, [get_device("cpu", precision="int8")], table) as ex:
        got = ex.run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
