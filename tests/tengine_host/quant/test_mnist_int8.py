"""The committed MNIST LeNet-5 loses at most 0.5 points of top-1 when run int8,
on the CPU int8 reference path and on the simulated NVDLA (cmodel).

Data: ../shared/data/mnist_5k.csv.gz, sorted by label; per digit the first 400
images are the training set (calibration samples come from there) and the
last 100 the test set, as in scripts/train_lenet_mnist.py.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tests.conftest import shared_path

MODEL = Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_mnist.onnx"
MAX_DROP = 0.005
CALIBRATION_SAMPLES = 200


@pytest.fixture(scope="module")
def mnist():
    with gzip.open(shared_path("data", "mnist_5k.csv.gz"), "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.int64)
    x = (rows[:, :784].astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y = rows[:, 784]
    train = np.zeros(len(y), dtype=bool)
    for digit in range(10):
        train[np.flatnonzero(y == digit)[:400]] = True
    assert train.sum() == 4000
    return x[train], x[~train], y[~train]


@pytest.fixture(scope="module")
def fp32(mnist):
    _, x_test, y_test = mnist
    graph = load_model(MODEL, input_shapes={"input": x_test.shape})
    with Executor(graph, [get_device("cpu")]) as ex:
        probs = ex.run({"input": x_test})["probs"]
    # our fp32 engine agrees with onnxruntime before int8 is judged against it
    ort_probs = ort.InferenceSession(str(MODEL)).run(None, {"input": x_test})[0]
    np.testing.assert_allclose(probs, ort_probs, atol=1e-5)
    acc = float(np.mean(probs.argmax(1) == y_test))
    assert acc > 0.95, f"fp32 top-1 {acc:.3f}: the committed model is not trained"
    return acc


def _table(mnist, algorithm):
    x_train = mnist[0]
    pick = np.random.default_rng(0).choice(len(x_train), CALIBRATION_SAMPLES, replace=False)
    graph = load_model(MODEL)
    return calibrate(graph, [{"input": x_train[i][None]} for i in pick], algorithm=algorithm,
                     progress=False)


@pytest.mark.parametrize("algorithm", ["minmax", "kl"])
def test_cpu_int8_accuracy(mnist, fp32, algorithm):
    _, x_test, y_test = mnist
    graph = load_model(MODEL, input_shapes={"input": x_test.shape})
    with Executor(graph, [get_device("cpu", precision="int8")], _table(mnist, algorithm)) as ex:
        probs = ex.run({"input": x_test})["probs"]
    acc = float(np.mean(probs.argmax(1) == y_test))
    print(f"MNIST top-1: fp32 {fp32:.3f}, cpu int8 ({algorithm}) {acc:.3f}")
    assert acc >= fp32 - MAX_DROP


def test_nvdla_int8_accuracy_and_agreement_with_cpu_int8(mnist, fp32):
    _, x_test, y_test = mnist
    table = _table(mnist, "minmax")
    graph = load_model(MODEL, input_shapes={"input": x_test.shape})
    with Executor(graph, [get_device("cpu", precision="int8")], table) as ex:
        cpu = ex.run({"input": x_test})["probs"]
    graph = load_model(MODEL, input_shapes={"input": x_test.shape})
    with Executor(graph, [get_device("nvdla"), get_device("cpu")], table) as ex:
        assert [dev.name for dev, _ in ex.partition.parts] == ["nvdla", "cpu"]
        # convs, max pools, flatten, FCs on the DLA, the softmax on the CPU
        assert ex.partition.ops == {"nvdla": 8, "cpu": 1}
        dla = ex.run({"input": x_test})["probs"]
    acc = float(np.mean(dla.argmax(1) == y_test))
    print(f"MNIST top-1: fp32 {fp32:.3f}, nvdla int8 {acc:.3f}")
    assert acc >= fp32 - MAX_DROP
    # the CPU int8 path is the accelerator's golden: same integers, same probabilities
    np.testing.assert_allclose(dla, cpu, rtol=1e-6, atol=1e-7)
