"""``opendla quantize`` then ``opendla run`` on the demo model, through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from opendla.cli import main

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


def test_quantize_then_run_int8(tmp_path, capsys):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x[:100])
    np.save(tmp_path / "x.npy", x[-1:])
    calib = tmp_path / "cal.json"
    assert main(["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "-o", str(calib)]) == 0
    cap = capsys.readouterr()
    assert "100/100" in cap.err and "over 100 samples" in cap.out
    table = json.loads(calib.read_text())
    assert table["input"]["max"] == float(x[:100].max()) and "probs" in table

    rc = main(["run", LENET, "--input", f"input={tmp_path / 'x.npy'}", "--precision", "int8",
               "--calib", str(calib), "--save-outputs", str(tmp_path / "out"), "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    (probs,) = summary["outputs"]
    assert probs["shape"] == [1, 10] and len(probs["top_k"][0]) == 5
    saved = np.load(tmp_path / "out" / "probs.npy")
    assert probs["top_k"][0][0][0] == int(saved.argmax())
    assert probs["top_k"][0][0][0] == d.target[-1]  # the last digit, a held-out one


def test_run_errors_are_reported_not_raised(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", LENET, "--input", f"nope={tmp_path / 'x.npy'}"]) == 2
    assert "--input name 'nope' not in input" in capsys.readouterr().err
    assert main(["run", LENET, "--input", str(tmp_path / "x.npy"), "--precision", "int8"]) == 2
    assert "needs --calib" in capsys.readouterr().err
    assert main(["run", LENET, "--input", str(tmp_path / "x.npy"), "--device", "tpu"]) == 2
    assert "device 'tpu' not in cpu, nvdla" in capsys.readouterr().err


def test_quantize_image_folder_needs_dims(tmp_path, capsys):
    from PIL import Image

    Image.fromarray(np.full((8, 8), 128, np.uint8), "L").save(tmp_path / "a.png")
    out = tmp_path / "c.json"
    assert main(["quantize", LENET, "-i", str(tmp_path), "-o", str(out)]) == 2
    assert "needs -g C,H,W" in capsys.readouterr().err
    assert main(["quantize", LENET, "-i", str(tmp_path), "-o", str(out), "-g", "1,8,8",
                 "-s", "0.0625", "--no-progress"]) == 0
    # one image of 128 * 1/16 = 8.0 everywhere
    assert json.loads(out.read_text())["input"]["min"] == 8.0
