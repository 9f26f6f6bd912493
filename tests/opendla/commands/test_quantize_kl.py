"""Calibration that cannot silently ruin a model: KL on a real network with real
text lines, NaN/Inf refused, a warning when thresholds clip heavily."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from tests.conftest import shared_path
from tests.opendla.commands.test_eval import _orientation_set

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")
PREP = ["-w", "127.5", "-s", str(1 / 127.5)]


def test_kl_keeps_a_real_classifier_accurate(tmp_path, capsys):
    """PaddleOCR's MobileNetV3 direction classifier: TensorRT's literal KL put its int8
    top-1 at chance (50%, scales down to 0.12x min-max); now KL's scales stay near
    min-max and the int8 path agrees with fp32 on (nearly) every text line."""
    model = str(shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx"))
    data = _orientation_set(tmp_path / "lines", 16)
    tables = {}
    for algo in ("minmax", "kl"):
        tables[algo] = tmp_path / f"{algo}.json"
        # the model's input is dynamic: -g fixes it, no --input-shape needed; the weights
        # stay as they are so that the two tables' ranges describe the same tensors
        assert main(["quantize", model, "-i", str(data / "0"), "-g", "3,48,192", *PREP,
                     "-a", algo, "-o", str(tables[algo]), "--equalize", "off",
                     "--bias-correction", "off", "--zero-points", "off", "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err
    mm, kl = (json.loads(tables[a].read_text()) for a in ("minmax", "kl"))
    ratios = np.array([kl[t]["scale"] / mm[t]["scale"] for t in mm])
    assert np.median(ratios) > 0.75 and ratios.min() > 0.25, ratios
    assert main(["eval", model, "--data", str(data), "--calib", str(tables["kl"]), *PREP,
                 "-g", "3,48,192", "--device", "cpu", "--workers", "0", "--json",
                 "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["samples"] == 32 and doc["agreement"] >= 0.9
    assert doc["top1"]["int8_cpu"] >= doc["top1"]["fp32"] - 0.07


def test_nan_calibration_input_is_refused(tmp_path, capsys):
    x = (load_digits().images[:4] / 16.0).astype(np.float32)[:, None]
    x[2, 0, 3, 3] = np.nan
    np.savez(tmp_path / "nan.npz", input=x)
    np.savez(tmp_path / "allnan.npz", input=np.full_like(x, np.nan))
    for name in ("nan.npz", "allnan.npz"):
        out = tmp_path / "c.json"
        assert main(["quantize", LENET, "-i", str(tmp_path / name), "-o", str(out),
                     "-a", "kl", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: input 'input' (sample ") and "NaN/Inf" in err
        assert err.count("\n") == 1 and not out.exists()


def test_heavy_clipping_warns_and_light_does_not(tmp_path, capsys):
    x = (load_digits().images[:64] / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x)
    base = ["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "--no-progress"]
    assert main([*base, "-o", str(tmp_path / "p.json"), "-a", "percentile",
                 "--percentile", "90"]) == 0
    err = capsys.readouterr().err.splitlines()
    # 10 % of every tensor beyond its threshold: the tensors are named, and the input (in
    # [0, 1], a tenth of it past the 90th percentile) is said to saturate
    assert any(w.startswith("warning: percentile thresholds clip more than 1% of the values")
               for w in err), err
    assert any(w.startswith("warning: input 'input':") and "saturate int8" in w
               for w in err), err
    for algo in ("minmax", "kl"):
        assert main([*base, "-o", str(tmp_path / f"{algo}.json"), "-a", algo]) == 0
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize("extra, message", [
    (["-a", "percentile", "--percentile", "0"], "--percentile 0 must be in (0, 100]"),
    (["--percentile", "99"], "--percentile applies to -a percentile only (-a is auto)"),
    (["-w", "1,2,3"], "give one value"),
    (["-c", "1", "-y", "8,8"], "exclude each other"),
])
def test_options_are_checked_before_calibrating(tmp_path, capsys, extra, message):
    from PIL import Image

    Image.fromarray(np.full((8, 8), 128, np.uint8), "L").save(tmp_path / "a.png")
    assert main(["quantize", LENET, "-i", str(tmp_path), "-o", str(tmp_path / "c.json"),
                 *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
