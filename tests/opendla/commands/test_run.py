"""``opendla run``: loadables, .npz and image inputs, labels, timing options, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table
from tests.conftest import shared_path

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[:, None], d.target


@pytest.fixture(scope="module")
def calib(tmp_path_factory, digits) -> Path:
    x, _ = digits
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in x[:32]], progress=False)
    path = tmp_path_factory.mktemp("calib") / "lenet.json"
    save_table(table, path)
    return path


@pytest.fixture(scope="module")
def loadable(tmp_path_factory, calib) -> Path:
    out = tmp_path_factory.mktemp("loadable")
    assert main(["compile", LENET, "--calib", str(calib), "-o", str(out)]) == 0
    (path,) = out.glob("*.nvdla")
    return path


def test_loadable_output_equals_the_int8_reference(tmp_path, digits, calib, loadable, capsys):
    """The compiled loadable run from int8 arrays gives the plain-numpy int8 reference's
    output of the same DLA subgraph (tengine_host's op references, not the cmodel)."""
    from tengine_host.quant import load_table

    x, _ = digits
    samples = x[-4:]
    graph = load_model(LENET)
    nvdla = get_device("nvdla", capture=True)
    with Executor(graph, [nvdla, get_device("cpu")], load_table(calib)) as ex:
        (dev, sub, handle), *_ = [p for p in ex.prepared if p[0] is nvdla]
        out_name = handle.compiled.outputs[0].name
        q = np.concatenate([dev.quantize_inputs(handle.compiled, {"input": s[None]})["input"]
                            for s in samples])
        want = np.concatenate([dev.reference(handle, {"input": s[None]})[out_name]
                               for s in samples])
    capsys.readouterr()
    np.save(tmp_path / "q.npy", q.reshape(4, 1, 8, 8))
    rc = main(["run", str(loadable), "--input", str(tmp_path / "q.npy"),
               "--save-outputs", str(tmp_path / "out"), "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"] == [{"name": "input", "shape": [1, 1, 8, 8]}]
    assert doc["time"]["batch"] == 4 and doc["cycles"] > 0
    (saved,) = (tmp_path / "out").glob("*.npy")
    got = np.load(saved)
    assert got.dtype == np.int8 and got.shape == (4, 10, 1, 1)
    np.testing.assert_array_equal(got.reshape(4, 10), want.reshape(4, 10))


def test_nvidia_loadable_without_inputs_runs(tmp_path, capsys):
    """NVIDIA's SDP_X1_L0_0 is ReLU of its own source blob: output == max(blob, 0)."""
    from accel.config import get_preset
    from accel.layout import cube_layout, unpack_feature
    from accel.loadable.io import read_loadable

    path = shared_path("nvdla", "loadables", "flatbufs", "kmd", "SDP", "SDP_X1_L0_0_small_fbuf")
    assert main(["run", str(path), "--save-outputs", str(tmp_path)]) == 0
    assert "no bound input" in capsys.readouterr().out
    (saved,) = tmp_path.glob("*.npy")
    src = np.frombuffer(read_loadable(path.read_bytes()).blob("m4_SDPSrc_i4").data, np.uint8)
    cube = unpack_feature(src, cube_layout(get_preset("nv_small"), 32, 8, 8))
    np.testing.assert_array_equal(np.load(saved)[0], np.maximum(cube, 0))


def test_npz_images_labels_and_repeat(tmp_path, digits, capsys):
    from PIL import Image

    x, y = digits
    np.savez(tmp_path / "x.npz", input=x[-3:])
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(f"digit-{i}" for i in range(10)) + "\n")
    assert main(["run", LENET, "--input", str(tmp_path / "x.npz"), "--labels", str(labels),
                 "--repeat", "3", "--warmup", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time"]["repeat"] == 3 and doc["time"]["batch"] == 3
    assert doc["time"]["min_ms"] <= doc["time"]["median_ms"]
    (probs,) = doc["outputs"]
    assert [row[0] for row in probs["top_k_labels"]] == [f"digit-{t}" for t in y[-3:]]

    # the same digits as 8-bit grey PNGs (pixel = 16 * value), scaled back by -s 1/16
    paths = []
    for i, img in enumerate(x[-3:, 0]):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(np.round(img * 16).astype(np.uint8), "L").save(paths[-1])
    args = ["run", LENET, "-s", "0.0625", "--json"]
    for p in paths:
        args += ["--image", str(p)]
    assert main(args) == 0
    by_image = json.loads(capsys.readouterr().out)["outputs"][0]["top_k"]
    assert [r[0][0] for r in by_image] == [r[0][0] for r in probs["top_k"]]

    assert main(["run", LENET, "--image", str(paths[0]), "--labels", str(labels)]) == 0
    text = capsys.readouterr().out
    assert f"digit-{y[-3]}" in text and "time:" in text


def test_trace_regs_prints_register_writes_on_stderr(tmp_path, loadable, capsys):
    np.save(tmp_path / "q.npy", np.zeros((1, 1, 8, 8), np.int8))
    assert main(["run", str(loadable), "--input", str(tmp_path / "q.npy"), "--trace-regs"]) == 0
    cap = capsys.readouterr()
    assert "reg_write(" in cap.err and "reg_write(" not in cap.out
    assert "NVDLA_CDMA" in cap.err


def _error(capsys, args: list[str]) -> str:
    assert main(args) == 2
    cap = capsys.readouterr()
    assert cap.err.startswith("error: ") and "Traceback" not in cap.err
    return cap.err


def test_bad_inputs_are_clean_errors(tmp_path, digits, calib, loadable, capsys):
    x, _ = digits
    np.save(tmp_path / "empty.npy", np.zeros((0, 1, 8, 8), np.float32))
    assert "holds no sample" in _error(capsys, ["run", LENET, "--input",
                                                 str(tmp_path / "empty.npy")])
    np.save(tmp_path / "x.npy", x[:1])
    (tmp_path / "afile").write_text("")
    assert "is a file" in _error(capsys, ["run", LENET, "--input", str(tmp_path / "x.npy"),
                                          "--save-outputs", str(tmp_path / "afile")])
    nan = x[:1].copy()
    nan[0, 0, 3, 3] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    err = _error(capsys, ["run", LENET, "--input", str(tmp_path / "nan.npy"), "--device", "nvdla",
                          "--calib", str(calib)])
    assert "NaN/Inf" in err and "'input'" in err
    assert "needs --calib" in _error(capsys, ["run", LENET, "--input", str(tmp_path / "x.npy"),
                                              "--device", "nvdla"])
    # a loadable takes int8 codes, or floats it quantizes with its manifest's scale
    np.save(tmp_path / "codes.npy", np.zeros((1, 1, 8, 8), np.int32))
    assert "give int8 codes or float values" in _error(capsys, ["run", str(loadable), "--input",
                                                                str(tmp_path / "codes.npy")])
    assert "NaN/Inf" in _error(capsys, ["run", str(loadable), "--input",
                                        str(tmp_path / "nan.npy")])
    np.save(tmp_path / "five_d.npy", x[:1][None])
    err = _error(capsys, ["run", str(loadable), "--input", str(tmp_path / "five_d.npy")])
    assert err.strip().endswith("the loadable takes [N, 1, 8, 8]"), err    # said once
    assert "apply to ONNX models" in _error(capsys, ["run", str(loadable), "--calib", str(calib)])
    assert "does not exist" in _error(capsys, ["run", str(tmp_path / "no.onnx"), "--input",
                                               str(tmp_path / "x.npy")])
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage")
    assert "not a valid ONNX" in _error(capsys, ["run", str(tmp_path / "junk.onnx"), "--input",
                                                 str(tmp_path / "x.npy")])
    assert "--repeat 0" in _error(capsys, ["run", LENET, "--input", str(tmp_path / "x.npy"),
                                           "--repeat", "0"])
    np.savez(tmp_path / "other.npz", pixels=x[:1], more=x[:1])
    assert "none is named after a model input" in _error(
        capsys, ["run", LENET, "--input", str(tmp_path / "other.npz")])
    assert "-w 1,2" in _error(capsys, ["run", LENET, "--image", str(tmp_path / "x.npy"),
                                       "-w", "1,2"])


def test_inputs_that_would_lose_values_or_be_dropped_are_refused(tmp_path, digits, capsys):
    x, _ = digits
    np.save(tmp_path / "x.npy", x[:1])
    (tmp_path / "afile").write_text("")
    assert "--debug-data" in _error(capsys, ["run", LENET, "--input", str(tmp_path / "x.npy"),
                                             "--debug-data", str(tmp_path / "afile")])
    # a bare .npz feeds inputs by name: an array no input takes is not silently dropped
    np.savez(tmp_path / "extra.npz", input=x[:1], labels=np.zeros(1))
    err = _error(capsys, ["run", LENET, "--input", str(tmp_path / "extra.npz")])
    assert "labels are not model inputs (input)" in err
    assert main(["run", LENET, "--input", f"input={tmp_path / 'extra.npz'}"]) == 0  # picked
    capsys.readouterr()
    # float64 past float32's range would become inf
    np.save(tmp_path / "huge.npy", x[:1].astype(np.float64) * 1e300)
    err = _error(capsys, ["run", LENET, "--input", str(tmp_path / "huge.npy")])
    assert "beyond float32's range" in err and "'input'" in err


def test_integer_inputs_outside_the_model_type_are_refused():
    from types import SimpleNamespace

    from opendla.commands.run import check_dtypes
    from opendla.errors import UsageError

    graph = SimpleNamespace(tensors={"ids": SimpleNamespace(dtype="int32")})
    fits = np.array([[-(2 ** 31), 2 ** 31 - 1]], np.int64)
    assert check_dtypes(graph, {"ids": fits})["ids"].dtype == np.int32
    with pytest.raises(UsageError, match=r"from 0 to 4294967296; the model's int32 input "
                                         r"takes -2147483648 to 2147483647"):
        check_dtypes(graph, {"ids": np.array([[0, 2 ** 32]], np.int64)})   # would wrap to 0


def test_a_node_the_data_cannot_fix_is_reported_once(tmp_path, capsys):
    """A DepthToSpace whose channels are no multiple of blocksize**2: the model's own
    error, once (the retry with the data's shapes meets the same one)."""
    from onnx import TensorProto, helper, save

    g = helper.make_graph([helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s",
                                            blocksize=2)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, 6, 4, 4), np.float32))
    err = _error(capsys, ["run", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy")])
    assert err.count("channels are a multiple of 4") == 1 and "fix them" not in err, err
