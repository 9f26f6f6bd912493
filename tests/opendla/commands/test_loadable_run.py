"""Self-describing loadables on the command line: ``compile`` writes the manifest,
``inspect`` shows it, ``run`` quantizes float inputs with it, dequantizes outputs,
and refuses a wrong preset or altered blobs; NVIDIA's loadables still run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from accel.loadable.io import read_loadable, write_loadable
from accel.loadable.manifest import MANIFEST_BLOB
from accel.loadable.model import Blob
from opendla.cli import main
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table
from tests.conftest import shared_path

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")
LOGITS = "/0/classifier/classifier.5/Gemm_output_0"     # the DLA part's output (softmax: CPU)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    digits = (load_digits().images / 16.0).astype(np.float32)[:, None]
    root = tmp_path_factory.mktemp("loadable")
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in digits[:32]],
                      progress=False)
    save_table(table, root / "calib.json")
    x = digits[-4:]
    np.save(root / "x.npy", x)
    assert main(["compile", LENET, "--calib", str(root / "calib.json"), "-o", str(root),
                 "--json"]) == 0
    return root, root / "lenet5_digits_0.nvdla", x, json.loads((root / "calib.json").read_text())


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _hand_quantize(x: np.ndarray, scale: float) -> np.ndarray:
    """int8 codes by the rule in NVDLA_FACTS: round half away from zero, saturate."""
    y = np.asarray(x, np.float64) / scale
    return np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -128, 127).astype(np.int8)


def test_inspect_shows_the_manifest_with_the_calibration_scales(compiled, capsys):
    root, path, _, table = compiled
    assert main(["inspect", str(path), "--json", "--no-ops"]) == 0
    man = json.loads(capsys.readouterr().out)["manifest"]
    assert man["preset"] == "nv_small" and man["checksums_ok"]
    # the scales are the calibration table's (the JSON file, read independently)
    assert [(t["name"], t["scale"], t["zero_point"]) for t in man["inputs"]] == \
        [("input", table["input"]["scale"], 0)]
    assert [(t["name"], t["shape"], t["scale"]) for t in man["outputs"]] == \
        [(LOGITS, [1, 10], table[LOGITS]["scale"])]
    names = {b.name for b in read_loadable(path.read_bytes()).blobs} - {MANIFEST_BLOB}
    assert set(man["sha256"]) == names
    assert main(["inspect", str(path), "--no-ops"]) == 0
    text = capsys.readouterr().out
    assert f"manifest: preset nv_small, {len(names)} blob checksums (SHA-256) match" in text
    assert f"scale {table['input']['scale']:.9g} zero point 0" in text


def test_float_input_is_quantized_with_the_recorded_scale(compiled, capsys, tmp_path):
    """float in = the same outputs as the int8 codes quantized here by hand; --dequantize
    gives (q - 0) * the table's output scale; softmax of that equals the int8 CPU
    reference of the whole ONNX model (its softmax runs on the CPU in fp32)."""
    root, path, x, table = compiled
    np.save(tmp_path / "q.npy", _hand_quantize(x, table["input"]["scale"]))
    assert _run(capsys, str(path), "--input", str(tmp_path / "q.npy"), "--save-outputs",
                str(tmp_path / "int8"))[0] == 0
    assert _run(capsys, str(path), "--input", str(root / "x.npy"), "--save-outputs",
                str(tmp_path / "float"))[0] == 0
    name = LOGITS.replace("/", "_") + ".npy"
    q = np.load(tmp_path / "int8" / name)
    assert q.dtype == np.int8 and q.shape == (4, 10, 1, 1)
    np.testing.assert_array_equal(np.load(tmp_path / "float" / name), q)

    code, out, _ = _run(capsys, str(path), "--input", str(root / "x.npy"), "--dequantize",
                        "--save-outputs", str(tmp_path / "deq"))
    assert code == 0 and "top-5" in out            # [N, 10] floats: a class list
    deq = np.load(tmp_path / "deq" / name)
    assert deq.dtype == np.float32 and deq.shape == (4, 10)
    np.testing.assert_array_equal(deq, (q.reshape(4, 10).astype(np.float64)
                                        * table[LOGITS]["scale"]).astype(np.float32))

    assert _run(capsys, LENET, "--input", str(root / "x.npy"), "--precision", "int8",
                "--calib", str(root / "calib.json"), "--save-outputs",
                str(tmp_path / "ref"))[0] == 0
    (ref_file,) = (tmp_path / "ref").iterdir()
    z = deq.astype(np.float64) - deq.max(axis=1, keepdims=True)
    softmax = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax, np.load(ref_file), rtol=1e-5, atol=1e-7)


def test_wrong_preset_and_altered_weights_are_refused(compiled, capsys, tmp_path):
    root, path, _, _ = compiled
    code, _, err = _run(capsys, str(path), "--input", str(root / "x.npy"), "--preset",
                        "nv_large")
    assert code == 2 and "--preset nv_large" in err and "compiled for nv_small" in err

    ld = read_loadable(path.read_bytes())
    weights = max((b for b in ld.blobs if not b.name.startswith("task-")
                   and b.name != MANIFEST_BLOB), key=lambda b: len(b.data))
    data = bytearray(weights.data)
    data[len(data) // 2] ^= 0x40
    ld.blobs[ld.blobs.index(weights)] = Blob(weights.name, bytes(data), weights.interface,
                                             weights.sub_interface, weights.version)
    bad = tmp_path / "altered.nvdla"
    bad.write_bytes(write_loadable(ld))
    code, _, err = _run(capsys, str(bad), "--input", str(root / "x.npy"))
    assert code == 2 and f"blob {weights.name!r} has SHA-256" in err, err
    assert main(["inspect", str(bad), "--no-ops"]) == 0
    assert f"DO NOT MATCH for {weights.name}" in capsys.readouterr().out

    code, _, err = _run(capsys, LENET, "--input", str(root / "x.npy"), "--dequantize")
    assert code == 2 and "--dequantize applies to loadables" in err


def test_nvidia_loadable_without_manifest_runs_and_refuses_floats(capsys, tmp_path):
    path = shared_path("nvdla", "loadables", "flatbufs", "kmd", "SDP", "SDP_X1_L0_0_small_fbuf")
    assert main(["inspect", str(path), "--no-ops"]) == 0
    assert "manifest: none" in capsys.readouterr().out
    code, out, _ = _run(capsys, str(path), "--save-outputs", str(tmp_path))
    assert code == 0 and "no manifest" in out
    src = np.frombuffer(read_loadable(path.read_bytes()).blob("m4_SDPSrc_i4").data, np.int8)
    (saved,) = tmp_path.iterdir()
    assert np.array_equal(np.sort(np.load(saved).reshape(-1)), np.sort(np.maximum(src, 0)))
    code, _, err = _run(capsys, str(path), "--dequantize")
    assert code == 2 and "records none (no opendla manifest)" in err
