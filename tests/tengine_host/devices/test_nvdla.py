"""The nvdla device: compiled subgraphs on the cmodel, checked layer by layer
against the independent int8 CPU reference (``accel.golden.int8_ref``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits

from accel.compiler import CompileError
from accel.golden import int8_ref
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate

LENET = Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx"


def reference(node, graph, plan, x_q: np.ndarray) -> np.ndarray:
    """The int8 CPU reference of one Conv/Gemm/MaxPool node on the DLA's own int8 input:
    geometry from the ONNX attributes, integer parameters from the compiler's plan."""
    a = node.attrs
    if node.op_type == "Gemm":
        q = plan.quant
        return int8_ref.fc_int8(x_q, q.weight.reshape(len(q.weight), -1), **q.reference_kwargs())
    if node.op_type == "MaxPool":
        return int8_ref.pool2d_int8(x_q, "max", a["kernel_shape"], stride=a["strides"],
                                    pads=a["pads"])
    q = plan.quant
    return int8_ref.conv2d_int8(x_q, q.weight, stride=a["strides"], dilation=a["dilations"],
                                pads=a["pads"], group=a.get("group", 1), **q.reference_kwargs())


def check_layers(ex: Executor, kinds=("Conv", "Gemm", "MaxPool")) -> int:
    """Compare every captured DLA layer with its reference; the number checked."""
    checked = 0
    for dev, sub, handle in ex.prepared:
        if dev.name != "nvdla":
            continue
        for node in sub.nodes:
            if node.op_type not in kinds:
                continue
            plan = handle.compiled.plans[node.name]
            want = reference(node, sub, plan, handle.captured[node.inputs[0]])
            np.testing.assert_array_equal(handle.captured[node.outputs[0]], want,
                                          err_msg=node.name)
            checked += 1
    return checked


def dla_handles(ex: Executor) -> list:
    return [handle for dev, _, handle in ex.prepared if dev.name == "nvdla"]


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[:, None], d.target


@pytest.fixture(scope="module")
def lenet(digits):
    x, _ = digits
    graph = load_model(LENET)
    table = calibrate(graph, [{"input": xi[None]} for xi in x[:1437:9]], progress=False)
    return graph, table


@pytest.mark.parametrize("preset", ["nv_small", "nv_medium_512", "nv_large"])
def test_lenet_layers_bit_exact_and_accurate(lenet, digits, preset):
    graph, table = lenet
    x, y = digits
    dla = get_device("nvdla", preset=preset, capture=True)
    hits, checked = 0, 0
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        # the whole network on the DLA, the softmax on the CPU
        assert [dev.name for dev, _ in ex.partition.parts] == ["nvdla", "cpu"]
        for xi, yi in zip(x[-24:], y[-24:], strict=True):
            probs = ex.run({"input": xi[None]})["probs"]
            hits += int(np.argmax(probs) == yi)
            checked += check_layers(ex)
    assert checked == 24 * 7           # 2 convs + 2 max pools + 3 FCs per image
    assert hits >= 21                   # fp32 gets 92% on the held-out digits


def test_layer_check_detects_a_wrong_parameter(lenet, digits):
    """The comparison above can fail: one step of the X1 truncate changes the result."""
    graph, table = lenet
    x, _ = digits
    dla = get_device("nvdla", capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        ex.run({"input": x[-1][None]})
        (handle,), sub = dla_handles(ex), ex.prepared[0][1]
        conv = next(n for n in sub.nodes if n.op_type == "Conv")
        x_q, y_q = handle.captured[conv.inputs[0]], handle.captured[conv.outputs[0]]
    plan = handle.compiled.plans[conv.name]
    wrong = dataclasses.replace(plan, quant=dataclasses.replace(
        plan.quant, mul_shift=plan.quant.mul_shift + 1))
    assert np.array_equal(reference(conv, sub, plan, x_q), y_q)
    assert not np.array_equal(reference(conv, sub, wrong, x_q), y_q)


def _conv_model(group: int = 1) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(size=(4, 4 // group, 3, 3)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=group, pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_grouped_conv_runs_as_block_convs_bit_exact(tmp_path):
    """group=2 with 2 channels per group: one aligned block (dense block-diagonal) on
    nv_small; the output equals the grouped int8 reference."""
    path = tmp_path / "g.onnx"
    onnx.save(_conv_model(group=2), path)
    graph = load_model(path)
    assert get_device("nvdla").supports(graph.nodes[0], graph) == (True, "")
    x = np.random.default_rng(8).normal(size=(1, 4, 5, 5)).astype(np.float32)
    table = {"x": {"scale": float(np.abs(x).max() / 127)}, "y": {"scale": 0.05}}
    with Executor(graph, [get_device("nvdla", capture=True), get_device("cpu")], table) as ex:
        ex.run({"x": x})
        assert check_layers(ex) == 1


def test_unsupported_conv_falls_back_with_its_reason(tmp_path):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(size=(4, 4, 3, 3)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[9, 9])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 4, 20, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = tmp_path / "s.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    graph = load_model(path)
    ok, reason = get_device("nvdla").supports(graph.nodes[0], graph)
    assert not ok and reason == "strides (9, 9) outside 1..8"


def test_missing_calibration_entry_is_named(tmp_path):
    path = tmp_path / "c.onnx"
    onnx.save(_conv_model(), path)
    graph = load_model(path)
    with pytest.raises(CompileError, match="tensor 'x' has no entry in the calibration table"):
        get_device("nvdla").prerun(graph, {"y": {"scale": 0.1}})


def test_unknown_preset_and_backend_list_the_choices():
    with pytest.raises(ValueError, match="preset 'nv_huge' not in nv_small"):
        get_device("nvdla", preset="nv_huge")
    with pytest.raises(ValueError, match="backend 'fpga0' not in cmod"):
        get_device("nvdla", backend="fpga0")


def test_relu6_runs_on_the_dla_with_an_x2_minimum(tmp_path):
    """Conv + Clip(0, 6) fuses into one DLA layer; when the cap lies inside the int8
    range (output scale 6/100 here) the SDP's X2 minimum clips at round(6/s) = 100."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.normal(0, 0.5, size=(8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(0, 1, size=8).astype(np.float32), "b")
    lo = numpy_helper.from_array(np.array(0.0, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(6.0, np.float32), "hi")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    g = helper.make_graph(nodes, "relu6",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])],
                          [w, b, lo, hi])
    path = tmp_path / "relu6.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    graph = load_model(path)
    assert [(n.op_type, n.attrs.get("activation")) for n in graph.nodes] == [("Conv", "Clip")]
    x = rng.normal(0, 2, size=(1, 3, 6, 6)).astype(np.float32)
    table = {"x": {"scale": float(np.abs(x).max() / 127)}, "y": {"scale": 6.0 / 100}}
    dla = get_device("nvdla", capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        assert [dev.name for dev, _ in ex.partition.parts] == ["nvdla"]
        y = ex.run({"x": x})["y"]
        assert check_layers(ex) == 1
        (handle,) = dla_handles(ex)
        y_q = handle.captured["y"]
    assert handle.compiled.plans[graph.nodes[0].name].quant.clip_max == 100
    assert (y_q == 100).any() and y_q.max() == 100 and y_q.min() >= 0
    # the float result is the quantized ReLU6 of the float convolution
    assert np.abs(y).max() <= 6.0 + 1e-6


def test_a_layer_the_cbuf_cannot_hold_runs_on_the_cpu_with_the_reason(tmp_path):
    """One input row of 8192 x 64 channels needs 65536 CBUF entries, nv_small has 16384:
    the conv falls back with that reason, its neighbours stay on the DLA, the result is
    still the model's."""
    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array(rng.normal(0, .3, (64, 8, 1, 1)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, .1, (8, 64, 3, 3)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="wide_ok"),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="too_wide", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 2, 8192])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 8, 2, 8192])], [w1, w2])
    path = tmp_path / "wide.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
              path)
    graph = load_model(path)
    x = rng.normal(size=(1, 8, 2, 8192)).astype(np.float32)
    # min-max ranges: the bound below is on the largest error, which clipping ranges
    # (the default's, chosen for the mean error) trade away by design
    table = calibrate(graph, [{"x": x}], algorithm="minmax", progress=False)
    with Executor(graph, [get_device("nvdla"), get_device("cpu")], table) as ex:
        y = ex.run({"x": x})["y"]
        part = ex.partition
    assert [d.name for d, _ in part.parts] == ["nvdla", "cpu"]
    (fb,) = part.fallbacks
    assert fb.node == "too_wide" and "CBUF has 32 banks of 512 entries" in fb.reason
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    assert np.abs(y - want).max() <= 0.05 * np.abs(want).max()
