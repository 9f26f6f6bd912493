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
