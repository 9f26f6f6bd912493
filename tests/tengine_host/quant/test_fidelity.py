"""The held-out fidelity check: its statistics on hand-computed values, how samples are
split, and warnings that name the outputs and layers a poor table spoils."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper, numpy_helper

from tengine_host.frontend import load_onnx
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.quant.calibrate import input_warnings
from tengine_host.quant.fidelity import (
    ErrorStats,
    FidelityReport,
    OutputFidelity,
    calibrate_checked,
    choose,
    is_class_scores,
    measure,
    output_parts,
    part_name,
    score,
    score_spread,
    sensitivity,
    split,
)


def test_error_stats_by_hand():
    s = ErrorStats()
    s.add(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert s.sqnr_db == pytest.approx(10 * math.log10(5 / 1))
    assert s.cosine == pytest.approx(7 / math.sqrt(5 * 10))
    assert s.max_error == 1.0
    exact = ErrorStats()
    exact.add(np.ones(3), np.ones(3))
    assert exact.sqnr_db == math.inf and exact.cosine == pytest.approx(1.0)


def _outputs(*rows: tuple[float, int]) -> FidelityReport:
    """A report of outputs ``(SQNR dB, values measured)``."""
    return FidelityReport("held-out", 6, 2, [OutputFidelity(f"o{i}", db, 1.0, 0.0, None,
                                                            values=n)
                                             for i, (db, n) in enumerate(rows)])


def test_score_weighs_each_output_by_the_values_that_measure_it():
    # one output: its own ratio, however few values measured it
    assert score(_outputs((30.0, 2))) == pytest.approx(30.0)
    # a ratio over n values spreads by 10/ln(10) * sqrt(2/n) dB: 6.14 dB at n = 1, so an
    # output counts n / (n + 37.7); 2,808 values (0.9868) against 2 values (0.0504)
    w1, w2 = 2808 / (2808 + 37.7), 2 / (2 + 37.7)
    assert score(_outputs((40.0, 2808), (20.0, 2))) == pytest.approx(
        (40.0 * w1 + 20.0 * w2) / (w1 + w2), abs=1e-3)
    # outputs measured on many values count alike: the plain mean
    assert score(_outputs((40.0, 10**6), (20.0, 10**6))) == pytest.approx(30.0, abs=1e-3)
    # a report without counts (older callers): the plain mean
    assert score(_outputs((40.0, 0), (20.0, 0))) == pytest.approx(30.0)


def test_score_spread_by_hand():
    # one output of 100 values: 10 / ln(10) * sqrt(2 / 100) = 0.614 dB
    assert score_spread(_outputs((30.0, 100))) == pytest.approx(0.6142, abs=1e-4)
    # two of 100: each weighs 100 / 137.7 = 0.7262, sqrt(2) * 0.7262 * 0.6142 / 1.4524
    assert score_spread(_outputs((30.0, 100), (10.0, 100))) == pytest.approx(
        0.6142 / math.sqrt(2), abs=1e-4)


def test_choose_keeps_the_simplest_candidate_the_samples_do_not_tell_apart():
    # 100 values: a spread of 0.61 dB; 0.5 dB better is not shown, 1 dB better is
    reports = {"plain": _outputs((30.0, 100)), "rewritten": _outputs((30.5, 100)),
               "more": _outputs((29.0, 100))}
    assert choose(reports) == "plain"
    reports["rewritten"] = _outputs((31.0, 100))
    assert choose(reports) == "rewritten"
    # a million values: 0.006 dB; 0.1 dB decides
    assert choose({"plain": _outputs((30.0, 10**6)),
                   "rewritten": _outputs((30.1, 10**6))}) == "rewritten"
    # the presence flag of two held-out faces does not outvote 2,808 coordinates
    assert choose({"zero points": _outputs((43.6, 2808), (26.4, 2)),
                   "bias correction": _outputs((42.1, 2808), (29.9, 2))}) == "zero points"


def test_split():
    assert split(1) == ("unchecked", [])
    check, folds = split(3)
    assert check == "cross-validated"
    assert folds == [([1, 2], [0]), ([0, 2], [1]), ([0, 1], [2])]
    check, folds = split(6)
    assert check == "cross-validated" and len(folds) == 4
    assert sorted(i for _, test in folds for i in test) == list(range(6))   # each once
    assert split(8) == ("held-out", [([0, 1, 2, 4, 5, 6], [3, 7])])
    with pytest.raises(ValueError):
        split(0)


def _classifier(k: int = 4):
    """x [1, 8] -> Gemm -> Relu -> Gemm -> Softmax: a small classifier with fixed weights."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(scale=0.3, size=(16, 8)).astype(np.float32)
    w2 = rng.normal(scale=0.3, size=(k, 16)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
    g = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", 1, [1, 8])],
                          [helper.make_tensor_value_info("probs", 1, [1, k])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def _samples(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(1, 8)).astype(np.float32)} for _ in range(n)]


def test_class_scores():
    graph = _classifier()
    assert is_class_scores(graph, "probs")
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 1404, 1, 1])],
                          [helper.make_tensor_value_info("y", 1, [1, 1404, 1, 1])])
    landmarks = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    assert not is_class_scores(landmarks, "y")


def test_a_good_table_passes_and_reports_every_dla_layer():
    graph = _classifier()
    table, report = calibrate_checked(graph, _samples(12), progress=False)
    assert (report.check, report.calibration_samples, report.checked_samples) == \
        ("held-out", 9, 3)
    (probs,) = report.outputs
    assert probs.name == "probs" and probs.top1_agreement is not None
    assert probs.sqnr_db > 25 and report.warnings() == []
    # the Gemms (with the ReLU fused into the first) run on the DLA, the Softmax on the CPU
    assert sorted(la.name for la in report.layers) == ["logits", "r"]
    assert report.layers[0].sqnr_db <= report.layers[1].sqnr_db        # worst first


def test_a_poor_table_is_named_with_its_worst_layer():
    graph = _classifier()

    def coarse(graph, samples, **options):
        table = calibrate(graph, samples, **options)
        table["r"]["scale"] *= 60          # 2 of 127 levels left for the hidden layer
        return table

    _, report = calibrate_checked(graph, _samples(12), calibrate_fn=coarse, progress=False)
    (message,) = report.warnings()
    assert "output 'probs'" in message and "3 held-out" in message
    # the hidden layer's output and the layer that reads it both carry its coarse steps
    named = message.split("add the most error (SQNR alone): ")[1]
    assert "r (" in named and "logits (" in named
    assert report.layers[0].sqnr_db < 10


def _head(extra_axis2: int = 0):
    """A detection head's shape of output: big values (1x1 conv, x1000) and small ones
    (x0.001) concatenated on channels, ``[1, 2 + 3, 4, 4]``; with ``extra_axis2``, a
    constant ``[1, 5, extra, 4]`` (anchors) concatenated after it on axis -2."""
    eye = np.eye(2, dtype=np.float32).reshape(2, 2, 1, 1)
    nodes = [helper.make_node("Conv", ["x1", "big"], ["a"]),
             helper.make_node("Conv", ["x2", "small"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    inits = [numpy_helper.from_array(eye * 1000, "big"),
             numpy_helper.from_array(np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1) / 1000,
                                     "small")]
    out, shape = "y", [1, 5, 4, 4]
    if extra_axis2:
        const = np.ones((1, 5, extra_axis2, 4), np.float32)
        inits.append(numpy_helper.from_array(const, "anchors"))
        nodes.append(helper.make_node("Concat", ["y", "anchors"], ["z"], axis=-2))
        out, shape = "z", [1, 5, 4 + extra_axis2, 4]
    g = helper.make_graph(nodes, "head",
                          [helper.make_tensor_value_info("x1", 1, [1, 2, 4, 4]),
                           helper.make_tensor_value_info("x2", 1, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info(out, 1, shape)], inits)
    return load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def test_an_output_a_concat_makes_is_measured_part_by_part():
    graph = _head()
    a, b = output_parts(graph, "y")
    assert (a, b) == ((slice(0, 1), slice(0, 2), slice(0, 4), slice(0, 4)),
                      (slice(0, 1), slice(2, 5), slice(0, 4), slice(0, 4)))
    assert [part_name("y", r, [1, 5, 4, 4]) for r in (a, b)] == ["y[:, 0:2]", "y[:, 2:5]"]
    # nested Concats split again; a constant input (anchors) is exact and not a part
    nested = _head(extra_axis2=3)
    assert [part_name("z", r, [1, 5, 7, 4]) for r in output_parts(nested, "z")] == \
        ["z[:, 0:2, 0:4]", "z[:, 2:5, 0:4]"]
    # not made by a Concat: the whole tensor
    (whole,) = output_parts(_classifier(), "probs")
    assert part_name("probs", whole, [1, 4]) == "probs"


def test_a_part_a_whole_output_ratio_hides_is_reported_and_warned():
    rng = np.random.default_rng(3)
    samples = [{"x1": rng.uniform(-1, 1, (1, 2, 4, 4)).astype(np.float32),
                "x2": rng.uniform(-1, 1, (1, 3, 4, 4)).astype(np.float32)} for _ in range(3)]
    graph = _head()
    table = calibrate(graph, samples, progress=False, algorithm="minmax")
    report = measure(graph, table, samples)
    big, small = report.outputs
    assert (big.name, small.name) == ("y[:, 0:2]", "y[:, 2:5]")
    # one scale for y covers +-1000: a step of ~8, and the small part (|b| <= 0.001)
    # rounds to 0, so its noise equals its signal: 0 dB
    assert small.sqnr_db == pytest.approx(0.0, abs=1e-6) and big.sqnr_db > 40
    whole = ErrorStats()
    for feeds in samples:      # over the whole output the small part weighs nothing
        x = np.concatenate([feeds["x1"] * 1000, feeds["x2"] / 1000], axis=1)
        q = np.concatenate([np.round(feeds["x1"] * 1000 / table["y"]["scale"])
                            * table["y"]["scale"], np.zeros_like(feeds["x2"])], axis=1)
        whole.add(x, q)
    assert whole.sqnr_db > 40
    (message,) = report.warnings()
    assert "output 'y[:, 2:5]'" in message and "0.0 dB" in message
    # the sensitivity ranking judges each layer by the part it hurts most: the layers
    # writing the small part at y's step (its conv, the Concat) lose it all
    ranked = {s.name: s.output_sqnr_db for s in sensitivity(graph, table, samples,
                                                             progress=False)}
    assert ranked["Conv_1"] == pytest.approx(0.0, abs=1e-6)
    assert ranked["Concat_2"] == pytest.approx(0.0, abs=1e-6) and ranked["Conv_0"] > 40


def test_one_sample_is_calibrated_but_unchecked():
    table, report = calibrate_checked(_classifier(), _samples(1), progress=False)
    assert "probs" in table and report.check == "unchecked" and report.outputs == []
    (message,) = report.warnings()
    assert "unchecked" in message and "at least 2" in message


def test_input_warnings():
    graph = _classifier()
    zero = [{"x": np.zeros((1, 8), np.float32)}] * 2
    assert "all zero" in input_warnings(graph, zero)[0]
    const = [{"x": np.full((1, 8), 3.0, np.float32)}, {"x": np.full((1, 8), 3.0, np.float32)}]
    assert "constant 3" in input_warnings(graph, const)[0]
    raw = [{"x": np.arange(8, dtype=np.float32)[None] * 30}, {"x": np.ones((1, 8), np.float32)}]
    (message,) = input_warnings(graph, raw)
    assert "spans [0, 210]" in message and "raw pixels" in message
    assert input_warnings(graph, _samples(3)) == []


def test_variants_are_measured_and_the_best_is_kept():
    graph = _classifier()

    def spoil(graph, table):
        out = type(table)({k: dict(e) for k, e in table.items()})
        out["r"]["scale"] *= 60
        return out

    table, report = calibrate_checked(graph, _samples(12), progress=False,
                                      variants={"spoiled": spoil})
    assert report.applied == "symmetric" and set(report.variants) == {"symmetric", "spoiled"}
    assert report.variants["spoiled"] < report.variants["symmetric"] - 10
    assert table["r"]["scale"] == pytest.approx(calibrate(graph, [
        s for i, s in enumerate(_samples(12)) if i % 4 != 3], progress=False)["r"]["scale"])


def test_the_table_returned_is_the_variant_the_report_names():
    from tengine_host.quant.zero_point import assign_zero_points

    graph = _classifier()
    table, report = calibrate_checked(graph, _samples(6), progress=False,
                                      variants={"zero points": assign_zero_points})
    assert report.check == "cross-validated" and report.folds == 4
    assert set(report.variants) == {"symmetric", "zero points"}
    # the hidden ReLU output is one-signed: it has z = -128 exactly when zero points were kept
    assert (table["r"].get("zero_point", 0) == -128) == (report.applied == "zero points")


def test_sensitivity_ranks_the_layers_a_coarse_scale_spoils():
    from tengine_host.quant.fidelity import sensitivity

    graph = _classifier()
    samples = _samples(4)
    good = calibrate(graph, samples, progress=False)
    spoiled = type(good)({k: dict(e) for k, e in good.items()})
    spoiled["r"]["scale"] *= 60
    before = {r.name: r.output_sqnr_db for r in sensitivity(graph, good, samples,
                                                            progress=False)}
    after = sensitivity(graph, spoiled, samples, progress=False)
    # the two DLA layers (the Softmax is the CPU's): both touch r, the one writing it and
    # the one reading it, and both lose more than 10 dB at the output
    assert sorted(before) == sorted(r.name for r in after) and len(after) == 2
    assert all(r.output_sqnr_db < before[r.name] - 10 for r in after)
    assert after[0].output_sqnr_db <= after[1].output_sqnr_db


def test_keep_float_auto_keeps_the_spoiled_layers_until_the_target_is_met():
    from tengine_host.quant.fidelity import choose_keep_float, measure

    graph = _classifier()
    samples = _samples(4)
    table = calibrate(graph, samples, progress=False)
    table["r"]["scale"] *= 60
    report = measure(graph, table, samples)
    assert report.warnings()
    choice = choose_keep_float(graph, table, samples, report, progress=False)
    assert choice.met and 1 <= len(choice.nodes) <= 2 and not choice.report.warnings()
    # the DLA ran one subgraph (both Gemms); keeping a Gemm in fp32 moves MACs to the CPU
    assert choice.dla_subgraphs[0] == 1 and choice.dla_mac_share[1] < choice.dla_mac_share[0]


def test_keep_float_names_resolve_and_unknown_names_list_the_nearest():
    from tengine_host.devices import get_device
    from tengine_host.partition import resolve_keep_float

    graph = _classifier()
    first = graph.producer("r").name
    assert resolve_keep_float(graph, ["r"]) == {first} == resolve_keep_float(graph, [first])
    with pytest.raises(ValueError, match=r"'rr' is neither a node nor a tensor.*nearest: 'r'"):
        resolve_keep_float(graph, ["rr"])
    # a node named as the tensor it writes (TensorFlow exports): each near name once
    nodes = [helper.make_node("Relu", ["x"], ["conv2d_9"], name="conv2d_9"),
             helper.make_node("Relu", ["conv2d_9"], ["conv2d_19"], name="conv2d_19")]
    g = helper.make_graph(nodes, "tf", [helper.make_tensor_value_info("x", 1, [1, 8])],
                          [helper.make_tensor_value_info("conv2d_19", 1, [1, 8])])
    named = load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    with pytest.raises(ValueError, match=r"nearest: 'conv2d_9', 'conv2d_19'$"):
        resolve_keep_float(named, ["conv2d_99"])
    dev = get_device("nvdla", keep_float={first})
    assert dev.supports(graph.producer("r"), graph) == (False, "kept in fp32 (--keep-float)")
    assert dev.supports(graph.producer("logits"), graph)[0]


def test_each_fold_is_measured_on_its_own_rewritten_graph(monkeypatch):
    """Bias correction depends on the samples, so each cross-validation fold rewrites the
    graph its own way: a fold's table must be measured on that fold's graph (the one
    carrying exactly the rewrites the table was calibrated after), not another fold's."""
    from tengine_host.quant import fidelity
    from tengine_host.quant.rewrites import with_rewrites

    measured = []
    add = fidelity._Accumulator.add

    def checked_add(self, graph, table, *args, **kwargs):
        assert with_rewrites(graph, table) is graph     # raises on another fold's rewrites
        measured.append(table.rewrites)
        return add(self, graph, table, *args, **kwargs)

    monkeypatch.setattr(fidelity._Accumulator, "add", checked_add)
    graph = _classifier()
    rewrites = fidelity.weight_rewrites(equalize="off", bias_correction="on", graph=graph)
    _, report = calibrate_checked(graph, _samples(6), progress=False, rewrites=rewrites)
    assert report.check == "cross-validated" and report.folds == 4
    assert len({repr(r.as_json()) for r in measured}) > 1     # the folds' rewrites differ


def test_a_layer_only_an_activation_reads_is_measured_after_it():
    """x -> Conv -> c -> Relu -> y: with c stored one-signed (zero point -128, its
    negative half clipped to 0, as zero points store a tensor only a ReLU reads), c
    itself has lost half its signal, which the ReLU would have erased anyway: the
    report measures the layer after the ReLU."""
    rng = np.random.default_rng(4)
    w = rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", 1, [1, 8, 4, 4])],
                          [numpy_helper.from_array(w, "w")])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    samples = [{"x": rng.normal(0, 1, (1, 8, 4, 4)).astype(np.float32)} for _ in range(3)]
    table = calibrate(graph, samples, progress=False, algorithm="minmax")
    table["c"] = {**table["c"], "scale": table["c"]["max"] / 255, "zero_point": -128}
    report = measure(graph, table, samples)
    (c,) = [la for la in report.layers if la.name == "c"]
    raw = ErrorStats()          # c against fp32 as stored: its negative half is gone
    for feeds in samples:
        x = (w[:, :, 0, 0] @ feeds["x"].reshape(8, 16)).reshape(1, 8, 4, 4)
        raw.add(x, np.maximum(x, 0))
    assert raw.sqnr_db < 6 and c.op_type == "Conv"
    assert c.sqnr_db > 30 and c.sqnr_in_context_db > 30
