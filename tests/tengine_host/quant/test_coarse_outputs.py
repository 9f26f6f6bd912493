"""Model outputs int8 cannot hold: what reaches the outputs unchanged, the median of the
non-zero values by hand, and a spike-dominated output whose layer stays in fp32 (the
output then equals onnxruntime's), said in a warning; a CPU layer is not named."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant.coarse_outputs import nonzero_median, reaches_outputs_unchanged
from tengine_host.quant.fidelity import (
    FLOAT_OUTPUTS,
    FidelityReport,
    OutputFidelity,
    _gains,
    calibrate_checked,
    clipped_values,
    output_writers,
)
from tengine_host.quant.thresholds import AbsHistogram
from tests.tengine_host.passes.graphs import const, model, node, rel_err


def _head(bias0: float, *, sigmoid: bool = False, second_reader: bool = False):
    """A 1x1 conv whose channel 0 sits at ``bias0`` (a background logit), the other
    seven around 0, transposed to NHWC and flattened: a detector's score head."""
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (8, 4, 1, 1))
    b = np.zeros(8)
    b[0] = bias0
    nodes = [node("c", "Conv", ["x", "w", "b"], ["s"]),
             node("t", "Transpose", ["s"], ["st"], perm=[0, 2, 3, 1]),
             node("r", "Reshape", ["st", "shape"], ["y"])]
    outputs = ["y"]
    if sigmoid:
        nodes[-1] = node("sg", "Sigmoid", ["st"], ["y"])
    if second_reader:
        nodes.append(node("c2", "Conv", ["s", "w2"], ["z"]))
        outputs.append("z")
    return model(nodes, [const("w", w), const("b", b), const("shape", np.array([1, -1])),
                         const("w2", np.ones((2, 8, 1, 1)))], [1, 4, 6, 6], outputs=outputs)


def test_what_reaches_the_outputs_unchanged():
    g = load_model(_head(0.0))
    assert reaches_outputs_unchanged(g, "s") and reaches_outputs_unchanged(g, "y")
    assert not reaches_outputs_unchanged(load_model(_head(0.0, sigmoid=True)), "s")
    assert not reaches_outputs_unchanged(load_model(_head(0.0, second_reader=True)), "s")


def test_the_median_of_the_non_zero_values_by_hand():
    hist = AbsHistogram(4.0, bins=4)
    hist.add(np.array([0.0, 0.0, 0.0, 0.5, -1.5, 1.5, 3.5]))
    # non-zero |x|: 0.5, 1.5, 1.5, 3.5; the median 1.5 lies in bin [1, 2): its upper edge
    assert nonzero_median(hist) == 2.0
    assert nonzero_median(AbsHistogram(1.0, bins=4)) == 0.0


def _samples(n, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)} for _ in range(n)]


def test_a_spike_dominated_output_keeps_its_layer_in_fp32():
    m = _head(-5000.0)
    g = load_model(m)
    with pytest.warns(UserWarning, match=r"kept in fp32 on the CPU: 1 layer\(s\) writing a "
                                         r"model output .*: c \(step"):
        table, _ = calibrate_checked(g, _samples(8), progress=False)
    assert table.keep_float == ("c", "r", "t")    # and the data movers after it
    x = _samples(1, seed=3)[0]
    want = ort.InferenceSession(m.SerializeToString()).run(None, x)[0]
    device = get_device("cpu", precision="int8", keep_float=table.keep_float)
    with Executor(g, [device], table) as ex:
        assert rel_err(ex.run(x)["y"], want) < 1e-6
    # int8 would have given one step of about 5000 / 127 to values around 1
    assert table.scale("s") > 20 * np.median(np.abs(want[want > -1000]))


def test_an_output_int8_holds_is_left_on_the_dla():
    table, _ = calibrate_checked(load_model(_head(-3.0)), _samples(8), progress=False)
    assert table.keep_float == ()


def _backbone_and_head(*, classifier: bool = False, sigmoid: bool = False):
    """Two 3x3 convolutions (16 channels, 16x16) and a 1x1 head of 2 channels (1 % of
    the MACs), (with ``sigmoid`` a Sigmoid), transposed and reshaped to points: a
    regression output; or a global pool and a Gemm to 10 class scores."""
    rng = np.random.default_rng(2)
    inits = [const("w1", rng.uniform(-1, 1, (16, 4, 3, 3))),
             const("w2", rng.uniform(-1, 1, (16, 16, 3, 3)) / 8),
             const("wh", rng.uniform(-1, 1, (2, 16, 1, 1))),
             const("wf", rng.uniform(-1, 1, (10, 16))), const("shape", np.array([1, -1, 2]))]
    nodes = [node("c1", "Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             node("r1", "Relu", ["a"], ["b"]),
             node("c2", "Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1]),
             node("r2", "Relu", ["c"], ["d"])]
    if classifier:
        nodes += [node("gap", "GlobalAveragePool", ["d"], ["p"]),
                  node("fl", "Flatten", ["p"], ["f"]),
                  node("fc", "Gemm", ["f", "wf"], ["y"], transB=1)]
    else:
        nodes += [node("head", "Conv", ["d", "wh"], ["h0" if sigmoid else "h"]),
                  node("t", "Transpose", ["h"], ["ht"], perm=[0, 2, 3, 1]),
                  node("r", "Reshape", ["ht", "shape"], ["y"])]
        if sigmoid:
            nodes.insert(-2, node("sg", "Sigmoid", ["h0"], ["h"]))
    return model(nodes, inits, [1, 4, 16, 16])


def test_the_output_layers_tried_in_fp32_are_the_last_cheap_dla_layers():
    g = load_model(_backbone_and_head())
    everything = {n.name for n in g.nodes}
    assert output_writers(g, everything) == ("head", "t", "r")   # with the DLA's movers
    assert output_writers(g, everything - {"t", "r"}) == ("head",)
    # the CPU runs the head anyway: the convolution before it is the DLA's last
    assert output_writers(g, everything - {"head"}) == ()        # ... and too costly
    s = load_model(_backbone_and_head(sigmoid=True))
    assert output_writers(s, {n.name for n in s.nodes} - {"sg"}) == ("head", "t", "r")
    assert output_writers(s, {n.name for n in s.nodes}) == ("sg", "t", "r")
    c = load_model(_backbone_and_head(classifier=True))         # class scores
    assert output_writers(c, {n.name for n in c.nodes}) == ()
    h = load_model(_head(0.0))                                   # the head is all the work
    assert output_writers(h, {n.name for n in h.nodes}) == ()


def _report(*sqnrs: float, clipped: float = 0.0) -> FidelityReport:
    return FidelityReport("held-out", 6, 2, [OutputFidelity(f"o{i}", v, 1.0, 0.0, None,
                                                            clipped)
                                             for i, v in enumerate(sqnrs)])


def test_fp32_outputs_are_kept_for_a_gain_on_one_output_and_no_loss():
    assert _gains(_report(40.0, 20.0), _report(41.0, 20.0))        # +1 dB on one
    assert not _gains(_report(40.0, 20.0), _report(40.9, 20.0))    # less
    assert not _gains(_report(40.0, 20.0), _report(42.0, 17.0))    # the other loses more


def test_fp32_outputs_are_kept_when_int8_clipped_an_output_and_none_loses():
    assert _gains(_report(40.0, 20.0, clipped=1e-4), _report(40.1, 20.0))
    assert _gains(_report(40.0, 20.0, clipped=1e-4), _report(40.0, 20.0))
    assert not _gains(_report(40.0, 20.0, clipped=1e-4), _report(40.5, 19.0))


def test_clipped_values_are_those_int8_held_at_an_end_of_its_range():
    # symmetric, step 1: the converters saturate to codes -128..127; past 127.5 (or
    # below -128.5) int8 cannot follow
    entry = {"scale": 1.0}
    ref = np.array([200.0, 127.4, -130.0, -128.3, 5.0, 300.0])
    got = np.array([127.0, 127.0, -128.0, -128.0, 5.0, 300.0])   # the last one in fp32
    assert clipped_values(entry, ref, got) == 2
    # zero point -128, step 0.5: codes -128..127 hold 0 .. 127.5
    entry = {"scale": 0.5, "zero_point": -128}
    assert clipped_values(entry, np.array([130.0, -2.0, 127.6]),
                          np.array([127.5, 0.0, 127.5])) == 2
    assert clipped_values(None, ref, got) == 0


def test_the_check_keeps_a_regression_head_in_fp32_when_it_gains():
    """The output's own rounding is a good part of its error here (2 dB of 37)."""
    g = load_model(_backbone_and_head())
    samples = [{"x": np.random.default_rng(i).standard_normal((1, 4, 16, 16))
                .astype(np.float32)} for i in range(8)]
    table, report = calibrate_checked(g, samples, progress=False)
    assert report.applied == f"symmetric + {FLOAT_OUTPUTS}"
    assert report.variants[report.applied] > report.variants["symmetric"] + 1
    assert table.keep_float == ("head",)         # the movers after it run on the CPU
    plain, report = calibrate_checked(g, samples, progress=False, float_outputs=False)
    assert plain.keep_float == () and report.applied == "symmetric"
