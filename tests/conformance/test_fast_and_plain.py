"""The speed layer against the plain model: the same bytes, every trace and zoo model.

``Dla(fast=False)`` is the register-level model without its speed layer
(:mod:`accel.cmod.fast`: no replays, no batches, no fused datapaths, no integer
GEMM engine, no caches).  Each NVDLA trace in ``../shared/nvdla/traces`` is played
on both and must leave the same status and the same memory, byte for byte.  Each zoo
model runs on the ``nvdla`` device both ways: the plain model once per input, the
fast one over several rounds of the same inputs, so that its every form runs (the
firmware's recorded first run, the replay that learns, the learned replay with its
batches, the batches' learned effects) and each must give the plain model's outputs.
Batch-1 inputs; every zoo model is small enough to run plain here.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import accel.backends.cmod
from accel.cmod import Dla
from accel.trace import runner as trace_player
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.zoo import MODELS, build
from tengine_host.zoo.report import random_samples
from tests.conftest import SHARED, shared_path

pytestmark = pytest.mark.conformance

TRACES = SHARED / "nvdla" / "traces"
PRESETS = ("nv_small", "nv_large", "nv_medium_512")
#: the presets each zoo model runs on: nv_small, and for the SiLU detector also nv_large,
#: whose SDP looks its Swish and Sigmoid up on the Y stage (nv_small: in the CDP)
ZOO_RUNS = [(name, preset) for name in MODELS
            for preset in (("nv_small", "nv_large") if name == "yolox_nano_silu"
                           else ("nv_small",))]
#: fast-model inferences per input: the first records the firmware's run, the second
#: replays it and learns, the third plays the learned steps and learns each batch's
#: effect, the fourth applies those effects
FAST_ROUNDS = 4


def _traces() -> list[str]:
    if not TRACES.is_dir():  # collected without ../shared: one placeholder that skips
        return ["<no shared data>"]
    return [f"{preset}/{d.name}" for preset in PRESETS if (TRACES / preset).is_dir()
            for d in sorted((TRACES / preset).iterdir()) if d.is_dir()]


def _model_of(fast: bool, made: list[Dla]) -> type[Dla]:
    """A :class:`Dla` class whose instances are fast or plain, each kept in ``made``."""

    class Model(Dla):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, fast=fast, **kwargs)
            made.append(self)

    return Model


def _memory(dla: Dla) -> list[tuple[int, str, bytes]]:
    """Every byte of the model's memory, region by region."""
    return [(base, name, dla.dram.read(base, size).tobytes())
            for base, size, name in dla.dram.regions]


def _play(trace: str, fast: bool, monkeypatch) -> tuple:
    made: list[Dla] = []
    monkeypatch.setattr(trace_player, "Dla", _model_of(fast, made))
    res = trace_player.run_trace(shared_path("nvdla", "traces", *trace.split("/")))
    memory = _memory(made[0]) if made else None
    return (res.status, res.reason, res.note, [(r.unit, r.cycles) for r in res.stats],
            memory)


@pytest.mark.parametrize("trace", _traces())
def test_trace_leaves_the_same_memory_fast_and_plain(trace, monkeypatch):
    fast = _play(trace, True, monkeypatch)
    plain = _play(trace, False, monkeypatch)
    assert fast[:4] == plain[:4]
    assert fast[4] == plain[4], "the fast model's memory differs from the plain one's"


def _outputs(graph, table, preset: str, fast: bool, feeds: list, rounds: int, monkeypatch
             ) -> list[dict[str, np.ndarray]]:
    """The outputs of ``rounds`` inferences of each of ``feeds`` on the nvdla device (the
    CPU takes what the DLA cannot), in turns."""
    made: list[Dla] = []
    monkeypatch.setattr(accel.backends.cmod, "Dla", _model_of(fast, made))
    with Executor(graph, [get_device("nvdla", preset=preset), get_device("cpu")],
                  table) as ex:
        out = [ex.run(feed) for _ in range(rounds) for feed in feeds]
    assert made and all((d.fast is not None) == fast for d in made)
    return out


@pytest.mark.parametrize(("name", "preset"), ZOO_RUNS)
def test_zoo_model_gives_the_same_outputs_fast_and_plain(name, preset, monkeypatch, tmp_path):
    path = tmp_path / f"{name}.onnx"
    onnx.save(build(name), path)
    graph = load_model(path)
    calibration, *feeds = random_samples(graph, 3, seed=5)
    # min-max on one input: the fastest table to make; any table serves the comparison
    table = calibrate(graph, [calibration], algorithm="minmax", progress=False)
    plain = _outputs(graph, table, preset, False, feeds, 1, monkeypatch)
    fast = _outputs(graph, table, preset, True, feeds, FAST_ROUNDS, monkeypatch)
    for i, got in enumerate(fast):
        want = plain[i % len(plain)]
        assert got.keys() == want.keys()
        for t in want:
            assert got[t].tobytes() == want[t].tobytes(), (
                f"{name}: output {t} of inference {i} (input {i % len(plain)}) differs "
                f"from the plain model's")


def _op_case(name: str, tmp_path):
    """The graph of op case ``name`` (``tests/accel/compiler/op_cases.py``)."""
    from tests.accel.compiler.op_cases import CASES

    case = next(c for c in CASES if c.name == name)
    path = tmp_path / f"{name}.onnx"
    onnx.save(case.build(), path)
    return load_model(path)


def _same_fast_and_plain(graph, preset: str, rng, monkeypatch) -> list[Dla]:
    """Calibrate ``graph`` on one random input, run two others on the plain model once
    and on the fast one for :data:`FAST_ROUNDS` rounds, assert the same bytes; the fast
    models made."""
    shape = graph.tensors[graph.inputs[0]].shape
    calibration, *feeds = ({graph.inputs[0]: rng.normal(0, 2, shape).astype(np.float32)}
                           for _ in range(3))
    table = calibrate(graph, [calibration], progress=False)
    plain = _outputs(graph, table, preset, False, feeds, 1, monkeypatch)
    made: list[Dla] = []
    monkeypatch.setattr(accel.backends.cmod, "Dla", _model_of(True, made))
    with Executor(graph, [get_device("nvdla", preset=preset), get_device("cpu")],
                  table) as ex:
        fast = [ex.run(feed) for _ in range(FAST_ROUNDS) for feed in feeds]
    for i, got in enumerate(fast):
        want = plain[i % len(plain)]
        for t in want:
            assert got[t].tobytes() == want[t].tobytes(), f"output {t}, inference {i}"
    return made


#: small graphs of the op table whose SDP ops read memory: products, HardSwish (gate and
#: product on nv_large; on nv_small the CDP's table), per-layer scales and offsets,
#: per-channel ones, activations after a sum (lookups: on nv_large in the SDP's Y stage,
#: on nv_small in the CDP)
OP_RUNS = ["hard_swish", "hard_sigmoid", "mul", "squeeze_excite", "add_scalar",
           "div_scalar", "mul_channel", "batchnorm", "prelu", "leaky_relu", "clip",
           "add_relu", "sigmoid", "tanh", "silu"]

#: the ones whose SDP pass from memory is a table of each channel's codes: a batch norm's
#: per-channel scale and bias; on nv_large, Sigmoid and Tanh by the Y stage's LUT
CHANNEL_TABLE_RUNS = {"nv_small": ("batchnorm",), "nv_large": ("batchnorm", "sigmoid", "tanh")}


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("name", OP_RUNS)
def test_element_wise_ops_give_the_same_outputs_fast_and_plain(name, preset, monkeypatch,
                                                               tmp_path):
    """Including the speed layer's tables of 256 codes / 65536 pairs for SDP ops reading
    memory whose result is a function of the int8 input (and one multiplier cube), and
    its tables of each channel's 256 codes (operands per channel, a Y stage's LUT; taken
    here at any size)."""
    from accel.cmod.fast import paths

    monkeypatch.setattr(paths, "CHANNEL_TABLE_MIN_POINTS", 1)

    graph = _op_case(name, tmp_path)
    made = _same_fast_and_plain(graph, preset, np.random.default_rng(11), monkeypatch)
    if name in ("mul", "squeeze_excite") or name == "hard_swish" and preset == "nv_large":
        assert sum(len(d.fast.sdp_tables) for d in made) > 0    # products and gates: by table
    if name in ("hard_swish", "sigmoid", "tanh", "silu") and preset == "nv_small":
        assert sum(len(d.fast.cdp_tables) for d in made) > 0    # the CDP's table
    if name in CHANNEL_TABLE_RUNS.get(preset, ()):
        assert any(isinstance(key, tuple) and key[0] == "channels"
                   for d in made for key in d.fast.sdp_tables.keys())


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_hard_swish_scaling_its_channels_gives_the_same_outputs_fast_and_plain(
        preset, monkeypatch, tmp_path):
    """``channel_scale[c] * HardSwish(input_scale[c] * x)`` (channel-group equalization):
    its product by the gate cube runs X2 with a multiplier per channel, which the speed
    layer takes as a staged table (X1 on each pair of codes, then X2 and the converter per
    channel); the plain model computes it element by element."""
    graph = _op_case("hard_swish", tmp_path)
    (node,) = [n for n in graph.nodes if n.op_type == "HardSwish"]
    rng = np.random.default_rng(5)
    channels = graph.tensors[node.inputs[0]].shape[1]
    node.attrs.update(input_scale=2.0 ** rng.uniform(-4, 4, channels),
                      channel_scale=2.0 ** rng.uniform(-4, 4, channels))
    made = _same_fast_and_plain(graph, preset, rng, monkeypatch)
    assert any(isinstance(key, tuple) and key[0] == "staged"
               for d in made for key in d.fast.sdp_tables.keys())


def test_lut_over_a_map_of_few_channels_gives_the_same_outputs_fast_and_plain(
        monkeypatch, tmp_path):
    """A Sigmoid reading a 1-channel sum from memory on nv_large (a detector's score map):
    31 of its 32 lanes are padding, each holding one value, which the speed layer fills
    rather than looks up (:func:`accel.cmod.fast.code_tables.channel_table_apply`): the
    plain model's outputs, which looks every lane up.  The outputs hold the channel alone;
    the filled lanes' bytes and LUT counters are checked element by element in
    ``tests/accel/cmod/fast/test_code_tables.py``."""
    from accel.cmod.fast import code_tables, paths
    from tests.accel.compiler.op_cases import G

    monkeypatch.setattr(paths, "CHANNEL_TABLE_MIN_POINTS", 1)
    filled = []
    fill = code_tables._filled_counted
    monkeypatch.setattr(code_tables, "_filled_counted",
                        lambda x, table, c, *rest: filled.append(c) or fill(x, table, c, *rest))
    g = G(1)
    x = g.input((1, 16, 12, 12))
    score = g.op("Sigmoid", [g.op("Add", [g.conv(x, 16, 1, 1), g.conv(x, 16, 1, 3)])])
    path = tmp_path / "score.onnx"
    onnx.save(g.model([score]), path)
    _same_fast_and_plain(load_model(path), "nv_large", np.random.default_rng(3), monkeypatch)
    assert filled and set(filled) == {1}
