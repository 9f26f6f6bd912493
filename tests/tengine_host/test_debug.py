"""TG_DEBUG_* switches: environment parsing, graph print, time table, data dumps, reference
kernels (checked against onnxruntime, an independent implementation)."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.debug import DebugOptions, format_graph, ref_conv, ref_gemm
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes


def _model():
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((3, 36)).astype(np.float32), "fw")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", strides=[2, 1],
                              pads=[1, 0, 2, 1], dilations=[1, 2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1, alpha=0.5)]
    g = helper.make_graph(nodes, "dbg",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 5, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_env_switches():
    assert DebugOptions.from_env({}) == DebugOptions()
    opts = DebugOptions.from_env({"TG_DEBUG_GRAPH": "1", "TG_DEBUG_TIME": "0",
                                  "TG_DEBUG_DATA": "yes", "TG_DEBUG_REF": ""})
    assert (opts.graph, opts.time, opts.data, opts.ref) == (True, False, True, False)
    assert opts.merged(time=True, ref=False).time and opts.merged().graph


def test_reference_kernels_match_onnxruntime():
    model = _model()
    x = np.random.default_rng(3).standard_normal((2, 2, 5, 6)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    g = load_onnx(model)
    run_passes(g)
    with Executor(g, [get_device("cpu", reference=True)], debug=DebugOptions()) as ex:
        got = ex.run({"x": x})["y"]
        assert set(ex.prepared[0][2].overrides) == {"conv", "fc"}   # both ran the naive path
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # and directly: a 1x1 input with a 3x3 kernel padded by one is the centre weight alone
    y = ref_conv(np.full((1, 1, 1, 1), 2.0), np.arange(9.0).reshape(1, 1, 3, 3), None,
                 strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1))
    assert y.tolist() == [[[[8.0]]]]
    assert ref_gemm(np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]]), np.array([1.0]),
                    beta=2.0).tolist() == [[13.0]]


def test_graph_time_and_data(tmp_path):
    g = load_onnx(_model())
    run_passes(g)
    text = format_graph(g)
    assert "conv (Conv) [x:float32[2, 2, 5, 6], w:const float32[4, 2, 3, 3]" in text
    assert "-> [r:float32[2, 4, 3, 3]]" in text and "activation=Relu" in text
    log = io.StringIO()
    opts = DebugOptions(graph=True, time=True, data=True, data_dir=str(tmp_path / "out"))
    x = np.random.default_rng(4).standard_normal((2, 2, 5, 6)).astype(np.float32)
    with Executor(g, [get_device("cpu")], debug=opts, log=log) as ex:
        y = ex.run({"x": x})["y"]
    out = log.getvalue()
    assert out.startswith("graph 'dbg': 3 nodes")
    table = out.split("\n")
    assert any(line.startswith("fc ") and "Gemm" in line for line in table)
    assert any(line.startswith("total") for line in table)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["0000_conv.in0.x.npy", "0000_conv.in1.w.npy", "0000_conv.in2.b.npy",
                     "0000_conv.out0.r.npy", "0001_flat.in0.r.npy", "0001_flat.out0.f.npy",
                     "0002_fc.in0.f.npy", "0002_fc.in1.fw.npy", "0002_fc.out0.y.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "0002_fc.out0.y.npy"), y)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "0000_conv.in0.x.npy"), x)
    assert "TG_DEBUG_DATA: 9 tensors" in out


def test_env_variable_turns_reference_on(monkeypatch):
    monkeypatch.setenv("TG_DEBUG_REF", "1")
    assert get_device("cpu").reference
    monkeypatch.setenv("TG_DEBUG_REF", "0")
    assert not get_device("cpu").reference


def test_reference_rejects_unknown_fused_activation():
    with pytest.raises(ValueError, match="not 'Sigmoid'"):
        ref_gemm(np.ones((1, 1)), np.ones((1, 1)), activation="Sigmoid")
