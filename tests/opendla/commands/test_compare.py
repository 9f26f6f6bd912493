"""``opendla compare``: per-layer fp32 / int8 reference / DLA table, plot and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    x = (load_digits().images / 16.0).astype(np.float32)[:, None]
    d = tmp_path_factory.mktemp("compare")
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in x[:32]], progress=False)
    save_table(table, d / "calib.json")
    np.save(d / "x.npy", x[-3:])
    return d, x[-3:], table


def _ort_values(names: list[str], x: np.ndarray) -> dict[str, np.ndarray]:
    """fp32 values of intermediate tensors from onnxruntime (they become graph outputs)."""
    import onnxruntime as ort

    model = onnx.load(LENET)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    runs = [dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": s[None]}),
                     strict=True)) for s in x]
    return {n: np.stack([r[n] for r in runs]) for n in names}


def test_compare_table_json_and_plot(data, capsys):
    d, x, table = data
    plot = d / "layers.png"
    assert main(["compare", LENET, "--calib", str(d / "calib.json"), "--input",
                 str(d / "x.npy"), "--json", "--plot", str(plot), "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["samples"] == 3 and doc["bit_exact"] and doc["first_divergent"] is None
    layers = doc["layers"]
    # LeNet runs whole on the DLA: 2 conv+relu, 2 max pools, the flatten and 3 FCs
    assert [c["op_type"] for c in layers].count("Conv") == 2 and len(layers) == 8
    assert all(c["bit_exact"] and c["differing"] == 0 for c in layers)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the fp32 side against onnxruntime: |error| of the int8 values is at most half a
    # quantization step more than the fp32 error, and cosines are near 1 but not 1
    ort = _ort_values([c["tensor"] for c in layers], x)
    for c in layers:
        fp = ort[c["tensor"]].reshape(3, *c["shape"][1:])
        scale = table[c["tensor"]]["scale"]
        assert c["max_abs_int8_ref"] <= float(np.abs(fp).max()) + scale
        assert 0.999 < c["cosine_int8_ref"] < 1.0
        assert c["cosine_dla"] == pytest.approx(c["cosine_int8_ref"], abs=1e-12)
    (probs,) = doc["outputs"]
    assert probs["top1_agree_dla"] == 3 and probs["cosine_dla"] > 0.999

    capsys.readouterr()
    assert main(["compare", LENET, "--calib", str(d / "calib.json"), "--input",
                 str(d / "x.npy"), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "bit-exact: every DLA tensor equals the int8 CPU reference" in text
    assert "cos int8" in text and "top-1 agrees int8 3/3" in text


def test_cosine_and_error_match_a_plain_computation(data):
    """compare_run's statistics recomputed plainly from the values it compared."""
    from tengine_host.compare import compare_run
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.verify import run_both

    d, x, table = data
    graph = load_model(LENET)
    ort = None
    with Executor(graph, [get_device("nvdla", capture=True), get_device("cpu")], table) as ex:
        result = compare_run(ex, {"input": x[:1]})
        _, _, values = run_both(ex, {"input": x[:1]})
    ort = _ort_values([v.tensor for v in values], x[:1])
    for v in values:
        fp = ort[v.tensor].reshape(v.reference.shape).astype(np.float64)
        real = v.device.astype(np.float64) * v.scale
        cos = float(real.ravel() @ fp.ravel() / np.linalg.norm(real) / np.linalg.norm(fp))
        layer = result.layers[v.tensor]
        assert layer.cosine_dla == pytest.approx(cos, rel=1e-6)
        assert layer.max_abs_dla == pytest.approx(float(np.abs(real - fp).max()), abs=1e-5)


def test_a_wrong_dla_value_is_the_first_divergent_layer(data, capsys, monkeypatch):
    """A fault injected into one DLA tensor (as the hardware left it) is found and marked."""
    from tengine_host.devices.nvdla import NvdlaDevice

    d, _, _ = data
    target = "/0/features/features.4/Relu_output_0"
    original = NvdlaDevice.run

    def faulty(self, prepared, inputs):
        out = original(self, prepared, inputs)
        if target in prepared.captured:
            bad = prepared.captured[target].copy()
            bad.flat[5] = np.int8(bad.flat[5] ^ 0x10)
            prepared.captured[target] = bad
        return out

    monkeypatch.setattr(NvdlaDevice, "run", faulty)
    assert main(["compare", LENET, "--calib", str(d / "calib.json"), "--input",
                 str(d / "x.npy"), "--no-progress"]) == 1
    cap = capsys.readouterr()
    row = next(line for line in cap.out.splitlines() if "first divergent" in line)
    assert "features.4/Relu_output_0" in row and "NO (3/" in row
    assert cap.err.startswith("error: the DLA differs") and target in cap.err


def test_compare_errors(data, capsys):
    d, _, _ = data
    assert main(["compare", LENET, "--calib", str(d / "calib.json")]) == 2
    assert "no input" in capsys.readouterr().err
    assert main(["compare", LENET, "--calib", str(d / "calib.json"), "--input",
                 str(d / "x.npy"), "--plot", str(d)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_long_tensor_names_are_shown_whole_in_an_aligned_column():
    """Names longer than any fixed column (MobileNet's run past 36 characters) are
    printed in full, and the columns after them stay aligned."""
    from opendla.commands.compare import format_table

    long_name = "/features/features.16/conv/conv.2/Conv_output_0_and_then_some_more"
    layer = {"op_type": "Conv", "shape": [1, 8, 4, 4], "cosine_int8_ref": 0.99,
             "cosine_dla": 0.99, "max_abs_int8_ref": 0.1, "max_abs_dla": 0.1,
             "bit_exact": True, "differing": 0, "total": 128}
    doc = {"model": "m.onnx", "preset": "nv_small", "samples": 1, "bit_exact": True,
           "first_divergent": None, "outputs": [],
           "layers": [{**layer, "tensor": long_name}, {**layer, "tensor": "x"}]}
    lines = format_table(doc).splitlines()
    rows = [line for line in lines if " Conv " in line]
    assert long_name in rows[0]
    # the op column starts at the same place in both rows and in the header
    starts = {line.index(" Conv ") + 1 for line in rows} | {lines[2].index(" op ") + 1}
    assert len(starts) == 1


def test_intermediates_folded_into_a_table_are_named_as_not_compared(tmp_path, capsys):
    """Conv -> HardSwish -> scale -> offset -> Conv on nv_small: the three element-wise
    passes are one CDP table, so their first two outputs are never in DLA memory; the
    report says how many such tensors it leaves out, and the rest is bit-exact."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (8, 4, 3, 3)).astype(np.float32), "w0"),
             numpy_helper.from_array(rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(np.array([0.47], np.float32), "a"),
             numpy_helper.from_array(np.array([-0.3], np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], pads=[1] * 4),
             helper.make_node("HardSwish", ["c"], ["h"]),
             helper.make_node("Mul", ["h", "a"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["s"]),
             helper.make_node("Conv", ["s", "w1"], ["y"], pads=[1] * 4)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 10, 10])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    x = rng.normal(0, 1, (4, 1, 4, 10, 10)).astype(np.float32)
    save_table(calibrate(load_model(str(path)), [{"x": s} for s in x[:3]], progress=False),
               tmp_path / "calib.json")
    np.save(tmp_path / "x.npy", x[3])
    assert main(["compare", str(path), "--calib", str(tmp_path / "calib.json"), "--input",
                 str(tmp_path / "x.npy"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "3 DLA tensors, 1 sample(s) (2 more computed inside the pass after them" in out
    assert "bit-exact: every DLA tensor equals the int8 CPU reference" in out
