"""The demo model end to end: our fp32 engine against onnxruntime, and int8 accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_digits

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate

LENET = Path(__file__).resolve().parents[2] / "tengine_host" / "models" / "lenet5_digits.onnx"
TEST_COUNT = 360  # the training script holds out the last 360 digits


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[:, None], d.target


def _predict(graph, devices, x, table=None):
    with Executor(graph, devices, table) as ex:
        return np.concatenate([ex.run({"input": xi[None]})["probs"] for xi in x])


def test_fp32_matches_onnxruntime(digits):
    x, _ = digits
    sess = ort.InferenceSession(str(LENET), providers=["CPUExecutionProvider"])
    want = np.concatenate([sess.run(None, {"input": xi[None]})[0] for xi in x[-64:]])
    got = _predict(load_model(LENET), [get_device("cpu")], x[-64:])
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_int8_keeps_accuracy_on_held_out_digits(digits):
    x, y = digits
    g = load_model(LENET)
    table = calibrate(g, [{"input": xi[None]} for xi in x[:-TEST_COUNT:8]], progress=False)
    fp32 = _predict(g, [get_device("cpu")], x[-TEST_COUNT:]).argmax(1)
    int8 = _predict(g, [get_device("cpu", precision="int8")], x[-TEST_COUNT:], table).argmax(1)
    assert np.mean(fp32 == y[-TEST_COUNT:]) > 0.88
    assert np.mean(int8 == fp32) >= 0.97, "int8 top-1 disagrees with fp32 on over 3% of digits"
