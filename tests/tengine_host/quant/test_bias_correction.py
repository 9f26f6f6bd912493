"""Bias correction: with int8 weights and fp32 activations, the corrected layer's mean
output per channel over the calibration data is fp32's, checked by plain loops
written here; a layer whose weights quantize exactly keeps its bias."""

from __future__ import annotations

import numpy as np
import pytest

from accel.compiler.quantize import quantize_weights
from tengine_host.model import load_model
from tengine_host.passes.edit import constant
from tengine_host.quant.bias_correction import correct_bias, tap_selector, tap_sums
from tests.tengine_host.passes.graphs import const, model, node

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws the same numbers whichever tests ran before it in this process (the
    suite's workers take tests in any order)."""
    global RNG
    RNG = np.random.default_rng(3)


def coarse(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3-level-per-sign quantizer: errors large enough to see in any mean."""
    w = np.asarray(w, np.float64)
    scale = np.abs(w.reshape(len(w), -1)).max(axis=1) / 3
    return np.round(w / scale.reshape(-1, *[1] * (w.ndim - 1))), scale


def dequantized(quantizer, w: np.ndarray) -> np.ndarray:
    q, s = quantizer(w)
    return q * s.reshape(-1, *[1] * (w.ndim - 1))


def plain_conv(x, w, b, *, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group=1):
    """Direct convolution, one output position at a time (NCHW, ONNX pads order)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    y = np.zeros((n, k, oh, ow))
    for ko in range(k):
        g = ko // (k // group)
        for i in range(oh):
            for j in range(ow):
                top, left = i * stride[0], j * stride[1]
                patch = xp[:, g * cg:(g + 1) * cg,
                           top:top + dilation[0] * (r - 1) + 1:dilation[0],
                           left:left + dilation[1] * (s - 1) + 1:dilation[1]]
                y[:, ko, i, j] = (patch * w[ko]).sum(axis=(1, 2, 3))
    return y + (0 if b is None else np.asarray(b, np.float64).reshape(1, -1, 1, 1))


def _samples(shape, count=4):
    """Inputs whose channels have distinct non-zero means (what makes the shift show)."""
    means = RNG.uniform(-2, 3, (1, shape[1]) + (1,) * (len(shape) - 2))
    return [{"x": (means + RNG.standard_normal(shape)).astype(np.float32)} for _ in range(count)]


def _bias(graph, name):
    n = graph.node(name)
    return constant(graph, n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None


CONVS = {
    # a 5x5 kernel on a 6x7 map, stride 2: most taps read padding somewhere
    "strided_padded": dict(w=(4, 3, 5, 5), attrs=dict(strides=[2, 2], pads=[2, 1, 2, 3])),
    "grouped_dilated": dict(w=(6, 1, 3, 3), attrs=dict(group=3, dilations=[2, 1],
                                                       pads=[1, 1, 2, 0])),
    "depthwise": dict(w=(3, 1, 3, 3), attrs=dict(group=3, pads=[1, 1, 1, 1])),
}


@pytest.mark.parametrize("case", list(CONVS))
@pytest.mark.parametrize("with_bias", [True, False])
def test_corrected_conv_mean_matches_fp32_per_channel(case, with_bias):
    spec = CONVS[case]
    w = RNG.standard_normal(spec["w"]).astype(np.float32)
    b = RNG.standard_normal(spec["w"][0]).astype(np.float32) if with_bias else None
    inputs = ["x", "w", "b"] if with_bias else ["x", "w"]
    inits = [const("w", w)] + ([const("b", b)] if with_bias else [])
    m = model([node("conv", "Conv", inputs, ["y"], **spec["attrs"])], inits, [1, 3, 6, 7])
    samples = _samples((1, 3, 6, 7))
    out, report = correct_bias(load_model(m), samples, coarse)
    (layer,) = report.layers
    assert layer.node == "conv" and layer.created_bias == (not with_bias)
    new_b = _bias(out, "conv")

    geo = dict(stride=spec["attrs"].get("strides", (1, 1)), pads=spec["attrs"]["pads"],
               dilation=spec["attrs"].get("dilations", (1, 1)),
               group=spec["attrs"].get("group", 1))
    x = np.concatenate([s["x"] for s in samples])
    want = plain_conv(x, w, b, **geo).mean(axis=(0, 2, 3))
    w_int = dequantized(coarse, w)
    before = plain_conv(x, w_int, b, **geo).mean(axis=(0, 2, 3))
    after = plain_conv(x, w_int, new_b, **geo).mean(axis=(0, 2, 3))
    scale = np.abs(want).max()
    # the error being corrected: at least a hundred times what is left after it
    assert np.abs(before - want).max() > 1e-3 * scale
    np.testing.assert_allclose(after, want, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(layer.shift, before - want, rtol=0, atol=1e-5 * scale)


def test_corrected_gemm_mean_matches_fp32_per_output():
    w = RNG.standard_normal((6, 4)).astype(np.float32)       # transB=0: [C, K]
    c = RNG.standard_normal(4).astype(np.float32)
    m = model([node("fc", "Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0)],
              [const("w", w), const("c", c)], [5, 6])
    samples = _samples((5, 6))
    out, _ = correct_bias(load_model(m), samples, coarse)
    x = np.concatenate([s["x"] for s in samples]).astype(np.float64)
    fc = out.node("fc")
    assert (fc.attrs["alpha"], fc.attrs["beta"]) == (0.5, 1.0)   # beta folded into the bias
    want = (0.5 * x @ w + 2.0 * c).mean(axis=0)
    w_int = dequantized(coarse, 0.5 * w.T.astype(np.float64)).T   # the DLA's [K, C] weight
    before = (x @ w_int + 2.0 * c).mean(axis=0)
    after = (x @ w_int + _bias(out, "fc")).mean(axis=0)
    assert np.abs(before - want).max() > 0.05 * np.abs(want).max()
    np.testing.assert_allclose(after, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_chain_of_linear_layers_keeps_the_fp32_mean_end_to_end():
    # without activations or padding, each layer's corrected mean is fp32's, so the
    # mean of the whole weight-quantized chain is too (E[y2q] = W2q E[y1q] + b2' = E[y2])
    w1 = RNG.standard_normal((5, 3, 1, 1)).astype(np.float32)
    w2 = RNG.standard_normal((4, 5, 1, 1)).astype(np.float32)
    b2 = RNG.standard_normal(4).astype(np.float32)
    m = model([node("c1", "Conv", ["x", "w1"], ["t"]), node("c2", "Conv", ["t", "w2", "b2"],
                                                            ["y"])],
              [const("w1", w1), const("w2", w2), const("b2", b2)], [1, 3, 4, 4])
    samples = _samples((1, 3, 4, 4), count=3)
    out, report = correct_bias(load_model(m), samples, coarse)
    assert [c.node for c in report.layers] == ["c1", "c2"]
    x = np.concatenate([s["x"] for s in samples])
    want = plain_conv(plain_conv(x, w1, None), w2, b2).mean(axis=(0, 2, 3))
    q1, q2 = dequantized(coarse, w1), dequantized(coarse, w2)
    got = plain_conv(plain_conv(x, q1, _bias(out, "c1")), q2, _bias(out, "c2"))
    np.testing.assert_allclose(got.mean(axis=(0, 2, 3)), want, rtol=0,
                               atol=1e-5 * np.abs(want).max())


def test_weights_that_quantize_exactly_keep_their_bias():
    # integer multiples of 2**-6 with 127 * 2**-6 in every row: the compiler's int8
    # weights (scale max|w| / 127 = 2**-6) are the weights themselves
    exact = RNG.integers(-127, 128, (4, 3, 3, 3)).astype(np.float32)
    exact.reshape(4, -1)[:, 0] = 127
    exact /= 64
    inexact = RNG.standard_normal((2, 4, 1, 1)).astype(np.float32)
    m = model([node("exact", "Conv", ["x", "we", "be"], ["t"], pads=[1, 1, 1, 1]),
               node("inexact", "Conv", ["t", "wi"], ["y"])],
              [const("we", exact), const("be", RNG.standard_normal(4)), const("wi", inexact)],
              [1, 3, 5, 5])
    g = load_model(m)
    out, report = correct_bias(g, _samples((1, 3, 5, 5), count=2), quantize_weights)
    assert report.exact == ["exact"] and [c.node for c in report.layers] == ["inexact"]
    assert out.node("exact").inputs == g.node("exact").inputs
    assert constant(out, "be") is constant(g, "be")
    assert len(out.node("inexact").inputs) == 3 and len(g.node("inexact").inputs) == 2


def test_layers_the_dla_does_not_run_keep_their_bias():
    m = model([node("c1", "Conv", ["x", "w1", "b1"], ["t"]), node("c2", "Conv", ["t", "w2"],
                                                                  ["y"])],
              [const("w1", RNG.standard_normal((3, 2, 1, 1))), const("b1", np.ones(3)),
               const("w2", RNG.standard_normal((2, 3, 1, 1)))], [1, 2, 3, 3])
    g = load_model(m)
    out, report = correct_bias(g, _samples((1, 2, 3, 3)), coarse,
                               int8_nodes=lambda n: n.name != "c1")
    assert [c.node for c in report.layers] == ["c2"]
    assert out.node("c1").inputs == g.node("c1").inputs


def test_no_samples_is_an_error():
    m = model([node("c", "Conv", ["x", "w"], ["y"])], [const("w", np.ones((1, 1, 1, 1)))],
              [1, 1, 2, 2])
    with pytest.raises(ValueError, match="at least one input sample"):
        correct_bias(load_model(m), [], coarse)


def test_tap_selector_marks_the_positions_each_tap_reads():
    np.testing.assert_array_equal(tap_selector(4, 3, 1, 1, 1, 4),
                                  [[1, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1]])
    # stride 2, dilation 2, no padding, size 7, out 2: tap j reads 2j and 2j + 2
    np.testing.assert_array_equal(tap_selector(7, 3, 2, 0, 2, 2),
                                  [[1, 0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 1, 0, 0],
                                   [0, 0, 0, 0, 1, 0, 1]])


def test_tap_sums_equal_the_padded_windows_summed():
    x = RNG.standard_normal((2, 3, 5, 6))
    m = model([node("conv", "Conv", ["x", "w"], ["y"], strides=[2, 1], pads=[1, 2, 2, 0],
                    dilations=[1, 2])], [const("w", np.ones((4, 3, 3, 2)))], [2, 3, 5, 6])
    conv = load_model(m).node("conv")
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 0)))
    want = np.zeros((3, 3, 2))
    oh, ow = (5 + 3 - 3) // 2 + 1, (6 + 2 - 3) // 1 + 1
    for r in range(3):
        for s in range(2):
            for i in range(oh):
                for j in range(ow):
                    want[:, r, s] += xp[:, :, 2 * i + r, j + 2 * s].sum(axis=0)
    np.testing.assert_allclose(tap_sums(x, conv, (oh, ow)), want, rtol=1e-12)
