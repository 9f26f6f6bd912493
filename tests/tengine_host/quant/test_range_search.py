"""The ``auto`` range search: its error model against quantizing samples directly, and
the thresholds it picks against a brute-force search on the samples themselves."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.quant import calibrate
from tengine_host.quant.thresholds import AbsHistogram, mse_threshold, quantization_mse


def _quantize(x: np.ndarray, t: float) -> np.ndarray:
    """Symmetric int8 with threshold ``t``, written plainly: spacing t / 127, round half
    away from zero, clip to +-127 levels."""
    step = t / 127
    q = np.sign(x) * np.floor(np.abs(x) / step + 0.5)
    return np.clip(q, -127, 127) * step


def _histogram(x: np.ndarray) -> AbsHistogram:
    h = AbsHistogram(float(np.abs(x).max()))
    h.add(x)
    return h


@pytest.mark.parametrize("t", [0.5, 1.5, 3.0, 6.0])
def test_error_model_matches_quantizing_the_samples(t):
    x = np.random.default_rng(1).laplace(size=400_000)
    h = _histogram(x)
    direct = np.mean((x - _quantize(x, t)) ** 2)
    assert quantization_mse(h, np.array([t]))[0] == pytest.approx(direct, rel=0.01)


def test_exact_zeros_cost_nothing():
    x = np.concatenate([np.zeros(1000), np.linspace(-1, 1, 1001)])
    h = _histogram(x)
    with_zeros = quantization_mse(h, np.array([1.0]))[0] * h.total
    h.zeros = 0
    assert quantization_mse(h, np.array([1.0]))[0] * h.total == pytest.approx(with_zeros)


def _brute_force(x: np.ndarray) -> float:
    ts = np.abs(x).max() * np.linspace(0.02, 1.0, 400)
    return float(ts[np.argmin([np.mean((x - _quantize(x, t)) ** 2) for t in ts])])


@pytest.mark.parametrize("name, x", [
    # heavy tails (Student's t, 3 degrees of freedom)
    ("heavy tails", np.random.default_rng(2).standard_t(3, size=50_000)),
    # ten values ten standard deviations out of 50,000: their clipping error would cost
    # more than the resolution they take from the bulk, so the range keeps them
    ("far outliers", np.concatenate([np.random.default_rng(5).normal(size=50_000),
                                     np.full(5, 10.0), np.full(5, -9.0)])),
    # values spread evenly over the range: nothing is worth clipping
    ("uniform", np.random.default_rng(3).uniform(-4, 4, size=50_000)),
    # post-ReLU: half exact zeros, a long tail
    ("relu", np.maximum(np.random.default_rng(4).standard_exponential(50_000) - 0.7, 0)),
])
def test_threshold_is_the_brute_force_optimum(name, x):
    t = mse_threshold(_histogram(x))
    best = _brute_force(x)
    mse = np.mean((x - _quantize(x, t)) ** 2)
    assert mse <= 1.02 * np.mean((x - _quantize(x, best)) ** 2), (name, t, best)
    if name == "uniform":
        assert t > 0.97 * np.abs(x).max()      # the range is kept


def test_dead_tensors_keep_finite_positive_scales():
    from onnx import TensorProto, helper

    from tengine_host.frontend import load_onnx

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    samples = [{"x": -np.ones((1, 4), np.float32)}, {"x": -2 * np.ones((1, 4), np.float32)}]
    table = calibrate(graph, samples, progress=False)       # y is 0 everywhere
    assert table["y"]["scale"] == pytest.approx(1 / 127)
    assert all(np.isfinite(e["scale"]) and e["scale"] > 0 for e in table.values())


def test_candidates_fill_the_gaps_between_percentiles():
    from tengine_host.quant.range_search import GRID_PER_OCTAVE, candidates

    x = np.random.default_rng(6).standard_t(3, size=50_000)
    h = _histogram(x)
    ts = candidates(h)
    assert ts == sorted(set(ts)) and ts[-1] == pytest.approx(h.amax) and ts[0] > 0
    # no two neighbours further apart than a quarter octave, down to half the
    # smallest percentile candidate
    ratios = np.array(ts[1:]) / np.array(ts[:-1])
    assert ratios.max() <= 2 ** (1 / GRID_PER_OCTAVE) * (1 + 1e-9)


def _conv_then(activation: str, opset: int):
    """x [1, 1, 1, N] -> 1x1 Conv (weight 1, no bias) -> ``activation`` -> y."""
    from onnx import TensorProto, helper, numpy_helper

    from tengine_host.frontend import load_onnx

    n = 4004
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node(activation, ["c"], ["y"], name="act")]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, n])],
                          [w])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))
    x = np.random.default_rng(7).uniform(0, 1, (1, 1, 1, n)).astype(np.float32)
    x[0, 0, 0, :4] = -40.0          # four far negatives the activation turns into 0
    return graph, [{"x": x}]


@pytest.mark.parametrize("activation, opset", [("Sigmoid", 13), ("HardSwish", 14)])
def test_a_reader_is_measured_after_its_activation(monkeypatch, activation, opset):
    """Clipping x's -40s to -4 moves the convolution's output by 36 at four places, and
    the activation after it by under 0.02 (a sigmoid) or not at all (HardSwish): measured
    after the activation, x's range shrinks to a few units (a step ten times finer for
    the bulk in [0, 1]); measured at the convolution it keeps the -40s."""
    from tengine_host.quant import range_search

    graph, samples = _conv_then(activation, opset)
    conv = next(n for n in graph.nodes if n.op_type == "Conv")
    assert [n.op_type for n in range_search._measured_chain(graph, conv)] == ["Conv",
                                                                              activation]
    assert 127 * calibrate(graph, samples, progress=False)["x"]["scale"] < 5.0
    monkeypatch.setattr(range_search, "ACTIVATIONS", frozenset())
    assert 127 * calibrate(graph, samples, progress=False)["x"]["scale"] > 35.0
