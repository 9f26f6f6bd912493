"""Equalization of channel groups (a residual stream): the group found through sums,
pooling and channel padding, scales computed by hand, the fp32 function kept (against
onnxruntime on the original model), the groups it must refuse, and the held-out check
choosing it where it must help, bit-exact on the DLA."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant.equalize_groups import (
    FLOOR,
    ChannelGroup,
    channel_groups,
    group_scales,
    rescale,
)
from tengine_host.quant.fidelity import calibrate_checked, weight_rewrites
from tengine_host.quant.layers import copy_graph
from tengine_host.quant.rewrites import GraphRewrites, apply
from tests.tengine_host.passes.graphs import const, model, node, rel_err

WIDTH = 8
#: channel k of the stream carries 2**(k - 4) times what channel 4 does
SPREAD = 2.0 ** (np.arange(WIDTH) - 4)


def _stream_model(*, out_from_stream: bool = False, sigmoid_reader: bool = False,
                  leaky: bool = False):
    """conv -> ReLU, then a residual block (depthwise, pointwise, sum, ReLU), max pooling,
    a channel pad 8 -> 16 and a second block, then a 1x1 head.  The stream's channels
    are lopsided by :data:`SPREAD` and the head undoes it, so every channel matters.
    With ``leaky`` the sums are followed by a leaky ReLU (which the DLA fuses into a sum
    in the stage that would otherwise scale an input per channel)."""
    rng = np.random.default_rng(3)
    s2 = np.concatenate([SPREAD, SPREAD])
    inits = [
        const("w0", rng.uniform(-1, 1, (WIDTH, 3, 3, 3)) * SPREAD[:, None, None, None]),
        const("b0", rng.uniform(0, 1, WIDTH) * SPREAD),
        const("dw1", rng.uniform(-1, 1, (WIDTH, 1, 3, 3))),
        const("pw1", rng.uniform(-0.5, 0.5, (WIDTH, WIDTH, 1, 1))
              * SPREAD[:, None, None, None] / SPREAD[None, :, None, None]),
        const("pads", np.array([0, 0, 0, 0, 0, WIDTH, 0, 0], np.int64)),
        const("dw2", rng.uniform(-1, 1, (2 * WIDTH, 1, 3, 3))),
        const("pw2", rng.uniform(-0.5, 0.5, (2 * WIDTH, 2 * WIDTH, 1, 1))
              * s2[:, None, None, None] / s2[None, :, None, None]),
        const("wh", rng.uniform(-1, 1, (4, 2 * WIDTH, 1, 1)) / s2[None, :, None, None]),
    ]
    nodes = [
        node("c0", "Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        node("r0", "Relu", ["c0"], ["t0"]),
        node("dw1", "Conv", ["t0", "dw1"], ["d1"], pads=[1, 1, 1, 1], group=WIDTH),
        node("pw1", "Conv", ["d1", "pw1"], ["p1"]),
        node("add1", "Add", ["t0", "p1"], ["a1"]),
        node("r1", "LeakyRelu" if leaky else "Relu", ["a1"], ["t1"],
             **({"alpha": 0.1} if leaky else {})),
        node("pool", "MaxPool", ["t1"], ["m1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("pad", "Pad", ["m1", "pads"], ["q1"]),
        node("dw2", "Conv", ["q1", "dw2"], ["d2"], pads=[1, 1, 1, 1], group=2 * WIDTH),
        node("pw2", "Conv", ["d2", "pw2"], ["p2"]),
        node("add2", "Add", ["q1", "p2"], ["a2"]),
        node("r2", "LeakyRelu" if leaky else "Relu", ["a2"], ["t2"],
             **({"alpha": 0.1} if leaky else {})),
        node("head", "Conv", ["t2", "wh"], ["y"]),
    ]
    outputs = ["y"]
    if out_from_stream:
        outputs.append("t1")
    if sigmoid_reader:
        nodes.append(node("sig", "Sigmoid", ["t1"], ["s"]))
        outputs.append("s")
    return model(nodes, inits, [1, 3, 16, 16], outputs=outputs)


def _samples(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(n)]


def test_a_stream_is_one_group_through_sums_pooling_and_channel_padding():
    g = load_model(_stream_model(leaky=True))
    (group,) = channel_groups(g)
    members = set(group.offsets)
    # the sums (leaky ReLU fused), the pooled and padded tensors, and what the convs write
    assert {g.producer(t).op_type for t in members} == {"Conv", "Add", "MaxPool", "Pad"}
    assert len(members) == 7 and group.channels == 2 * WIDTH
    assert set(group.offsets.values()) == {0}          # padding at the end shifts nothing
    assert sorted(group.writers) == ["c0", "pw1", "pw2"]
    assert sorted(name for name, _ in group.readers) == ["dw1", "dw2", "head"]
    assert group.key == g.node("c0").outputs[0]        # the first tensor of the group


def test_a_residual_stream_is_cut_at_each_sum():
    """A sum with ReLU scales its stream input per channel onto its branch's grid: the
    stream before it is one group, the sum with its branch (and what pooling and padding
    carry on) the next."""
    g = load_model(_stream_model())
    head, block1, block2 = channel_groups(g)
    assert (set(head.offsets), head.writers, head.readers) == (
        {"t0"}, ("c0",), (("dw1", "t0"), ("add1", "t0")))
    assert set(block1.offsets) == {"p1", "t1", "m1", "q1"} and block1.channels == 2 * WIDTH
    assert block1.writers == ("pw1", "add1")
    assert block1.readers == (("dw2", "q1"), ("add2", "q1"))
    assert (set(block2.offsets), block2.writers, block2.readers) == (
        {"p2", "t2"}, ("pw2", "add2"), (("head", "t2"),))


def test_scales_computed_by_hand():
    group = ChannelGroup("a", {"a": 0, "b": 0}, 4, (), ())
    # peaks of a: (8, 2, 0.08, 0) -> relative (1, 1/4, 1/100, 0); of b: (3, 1.5) ->
    # (1, 1/2).  r = (1, 1/2, 1/100, 0): s = (1, 1/2, FLOOR, 1 for the dead channel)
    a = np.array([8.0, -2.0, 0.08, 0.0]).reshape(1, 4, 1, 1)
    b = np.array([-3.0, 1.5]).reshape(1, 2, 1, 1)
    s = group_scales(group, [{"a": a, "b": b}, {"a": a / 2, "b": b / 3}])
    np.testing.assert_array_equal(s, [1.0, 0.5, FLOOR, 1.0])


@pytest.mark.parametrize("leaky", [False, True], ids=["cut at sums", "one group"])
def test_rescaling_keeps_the_function_and_evens_the_stream_out(leaky):
    m = _stream_model(leaky=leaky)
    g = load_model(m)
    groups = channel_groups(g)
    values = [interpret(g, f, keep_all=True) for f in _samples(4)]
    scales = {group.key: group_scales(group, values) for group in groups}
    assert all(s.min() < 0.1 for s in scales.values())     # the lopsided channels found
    out = copy_graph(g)
    rescale(out, scales)
    x = _samples(1, seed=9)[0]
    want = ort.InferenceSession(m.SerializeToString()).run(None, x)[0]
    assert rel_err(interpret(out, x)["y"], want) < 1e-5

    def spread(graph, tensor):
        peaks = np.abs(interpret(graph, x, keep_all=True)[tensor]).max(axis=(0, 2, 3))
        return peaks.max() / peaks.min()

    # 128 by construction; FLOOR leaves the three smallest channels 8, 4 and 2 times
    # smaller than the rest
    for group in groups:
        assert spread(g, group.key) > 64 and spread(out, group.key) < 16, group.key


def test_channels_moved_by_concat_resize_and_split_keep_their_place():
    """conv -> ReLU and conv -> HardSwish, concatenated (4 + 4 channels), upsampled,
    split 3 + 5 and read by two convolutions: one group, each tensor at its offset."""
    rng = np.random.default_rng(5)
    inits = [const(f"w{i}", rng.uniform(-1, 1, shape)) for i, shape in enumerate(
        [(4, 3, 1, 1), (4, 3, 1, 1), (2, 3, 1, 1), (2, 5, 1, 1)])]
    inits += [const("scales", np.array([1, 1, 2, 2], np.float32)),
              const("split", np.array([3, 5], np.int64))]
    m = model([node("c1", "Conv", ["x", "w0"], ["c1"]), node("r", "Relu", ["c1"], ["a"]),
               node("c2", "Conv", ["x", "w1"], ["c2"]), node("hs", "HardSwish", ["c2"], ["b"]),
               node("cat", "Concat", ["a", "b"], ["cat"], axis=1),
               node("up", "Resize", ["cat", "", "scales"], ["up"], mode="nearest"),
               node("split", "Split", ["up", "split"], ["s1", "s2"], axis=1),
               node("h1", "Conv", ["s1", "w2"], ["y1"]), node("h2", "Conv", ["s2", "w3"], ["y2"])],
              inits, [1, 3, 4, 4], outputs=["y1", "y2"], opset=14)
    g = load_model(m)
    # the concatenated stream, and c2 -> HardSwish
    group, inward = sorted(channel_groups(g), key=lambda gr: len(gr.offsets), reverse=True)
    assert inward.writers == ("c2",) and inward.readers == (("hs", "c2"),)
    offsets = {g.producer(t).name: o for t, o in group.offsets.items()}
    assert group.channels == 8 and sorted(group.writers) == ["c1", "hs"]
    assert offsets["hs"] == 4 and offsets["cat"] == offsets["up"] == 0
    assert sorted(o for t, o in group.offsets.items() if g.producer(t).name == "split") == [0, 3]
    assert sorted(group.readers) == [("h1", "s1"), ("h2", "s2")]
    out = copy_graph(g)
    rescale(out, {group.key: 2.0 ** -np.arange(8), inward.key: 2.0 ** -np.arange(4)})
    x = _samples(1, seed=2)[0]
    x = {"x": x["x"][:, :, :4, :4]}
    for got, want in zip((interpret(out, x)[y] for y in ("y1", "y2")),
                         ort.InferenceSession(m.SerializeToString()).run(None, x),
                         strict=True):
        assert rel_err(got, want) < 1e-5


@pytest.mark.parametrize("kind", ["output", "sigmoid"])
def test_a_stream_with_another_use_is_not_a_group(kind):
    g = load_model(_stream_model(out_from_stream=kind == "output",
                                 sigmoid_reader=kind == "sigmoid"))
    groups = channel_groups(g)
    assert all("t1" not in group.offsets for group in groups)    # the other use's
    assert [group.key for group in groups] == ["t0", "p2"]       # the others stay


def test_a_lone_pair_is_left_to_the_weight_based_equalization_unless_asked():
    m = model([node("c1", "Conv", ["x", "w1"], ["t"]), node("r", "Relu", ["t"], ["u"]),
               node("c2", "Conv", ["u", "w2"], ["y"])],
              [const("w1", np.ones((2, 2, 1, 1))), const("w2", np.ones((2, 2, 1, 1)))],
              [1, 2, 3, 3])
    assert channel_groups(load_model(m)) == []
    (pair,) = channel_groups(load_model(m), pairs=True)
    assert (pair.writers, pair.readers) == (("c1",), (("c2", "u"),))   # ReLU fused


def test_scales_of_another_model_are_refused():
    g = load_model(_stream_model())
    group = channel_groups(g)[1]
    with pytest.raises(ValueError, match="no channel group of .* starts at tensor 'nope'"):
        apply(g, GraphRewrites(channel_scale={"nope": (1.0,) * 16}))
    with pytest.raises(ValueError, match="has 16 channels, the scales 3"):
        apply(g, GraphRewrites(channel_scale={group.key: (1.0, 2.0, 3.0)}))


def test_the_check_chooses_it_where_it_must_help_and_the_dla_stays_exact():
    g = load_model(_stream_model())
    table, report = calibrate_checked(g, _samples(12), progress=False,
                                      rewrites=weight_rewrites(bias_correction="off", graph=g))
    assert report.applied.startswith("cross-layer equalization")
    assert set(table.rewrites.channel_scale) >= {group.key for group in channel_groups(g)}
    # the small channels are lost without it (by construction): a wide margin
    assert report.variants["cross-layer equalization"] > report.variants["symmetric"] + 10
    x = _samples(1, seed=5)[0]
    with Executor(g, [get_device("nvdla"), get_device("cpu")], table) as dla, \
            Executor(g, [get_device("cpu", precision="int8")], table) as ref:
        assert [d.name for d, _ in dla.partition.parts] == ["nvdla"]
        np.testing.assert_array_equal(dla.run(x)["y"], ref.run(x)["y"])


#: the HardSwish's input channels are alike, their biases are not: channel 0 sits in the
#: negative tail (outputs in [-0.375, 0]), channel 7 mostly in the linear part
BIAS = np.linspace(-5.0, 2.0, WIDTH)


def _hard_swish_model(head: np.ndarray | None = None):
    """conv -> HardSwish -> depthwise -> 1x1 head.  The conv's outputs have alike ranges
    but biases :data:`BIAS`, so the HardSwish outputs' ranges differ by ~20 times;
    ``head`` divides the head's input channels (by their peaks: every channel matters)."""
    rng = np.random.default_rng(4)
    inits = [
        const("w0", rng.uniform(-1, 1, (WIDTH, 3, 3, 3)) / 2),
        const("b0", BIAS),
        const("dw", rng.uniform(-1, 1, (WIDTH, 1, 3, 3))),
        const("wh", rng.uniform(-1, 1, (4, WIDTH, 1, 1))
              / (1.0 if head is None else head[None, :, None, None])),
    ]
    nodes = [
        node("c0", "Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        node("hs", "HardSwish", ["c0"], ["h"]),
        node("dw", "Conv", ["h", "dw"], ["d"], pads=[1, 1, 1, 1], group=WIDTH),
        node("head", "Conv", ["d", "wh"], ["y"]),
    ]
    m = model(nodes, inits, [1, 3, 16, 16], outputs=["y"], opset=14)
    if head is None:
        env = interpret(load_model(m), _samples(1, seed=1)[0], keep_all=True)
        return _hard_swish_model(np.abs(env["d"]).max(axis=(0, 2, 3)))
    return m


def test_a_hard_swish_scales_its_input_and_output_channels_and_keeps_the_function():
    m = _hard_swish_model()
    g = load_model(m)
    # one tensor, one reader, and not between two convolutions: not pairs
    inward, outward = channel_groups(g)
    assert inward.writers == ("c0",) and inward.readers == (("hs", "c0"),)
    assert outward.writers == ("hs",) and outward.readers == (("dw", "h"),)
    values = [interpret(g, f, keep_all=True) for f in _samples(4)]
    s_in, s_out = group_scales(inward, values), group_scales(outward, values)
    assert s_out.min() < 0.2
    out = copy_graph(g)
    rescale(out, {inward.key: s_in, outward.key: s_out})
    np.testing.assert_allclose(out.node("hs").attrs["input_scale"], s_in)
    np.testing.assert_allclose(out.node("hs").attrs["channel_scale"], 1 / s_out)
    assert "channel_scale" not in g.node("hs").attrs      # the copy, not the model
    x = _samples(1, seed=9)[0]
    want = ort.InferenceSession(m.SerializeToString()).run(None, x)[0]
    assert rel_err(interpret(out, x)["y"], want) < 1e-5


def test_a_scaled_hard_swish_on_the_dla_is_exact_and_close_to_fp32():
    g = load_model(_hard_swish_model())
    table, report = calibrate_checked(g, _samples(12), progress=False,
                                      rewrites=weight_rewrites(bias_correction="off", graph=g))
    assert report.applied.startswith("cross-layer equalization")
    # 20.5 -> 27.6 dB here (29.2 with the depthwise -> head pair scaled by its data too)
    assert report.variants["cross-layer equalization"] > report.variants["symmetric"] + 5
    assert set(table.rewrites.channel_scale) >= {"c0", "h"}
    assert table[g.node("hs").inputs[0]].get("zero_point", 0) == 0   # X2 scales: no room
    x = _samples(1, seed=5)[0]
    with Executor(g, [get_device("nvdla"), get_device("cpu")], table) as dla, \
            Executor(g, [get_device("cpu", precision="int8")], table) as ref:
        assert [d.name for d, _ in dla.partition.parts] == ["nvdla"]
        got = dla.run(x)["y"]
        np.testing.assert_array_equal(got, ref.run(x)["y"])
    # factors applied wrongly (or not at all) would leave channels off by up to 20 times
    want = interpret(g, x)["y"]
    assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 20
