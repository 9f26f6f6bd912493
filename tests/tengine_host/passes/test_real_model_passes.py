"""The default pipeline on the real models of ../shared/models: results agree with
onnxruntime (<= 1e-4 relative) and the graphs take the shape NVDLA runs.

Op counts after the default passes (measured; the first column of each comment is
the import, before any pass):

* face_landmark_192: the 3 PReLUs that follow a convolution fuse into it; the 20
  others follow a residual Add and stay (only Conv/Gemm take a fused PReLU: the
  DLA's element-wise entry runs a fused ReLU alone).
* ch_PP-OCRv4_det_320: 24 HardSwish (paddle2onnx's Add/Clip/Mul/Div spelling), the
  learnable affine ``Mul/Add`` after every convolution folded, the 10 squeeze-excite
  HardSigmoids folded into their 1x1 convolutions: no Clip, Div or HardSigmoid left.
  What stays: the ``Mul/Add`` scalar affine *after* each HardSwish (24 + 24: it
  cannot fold backwards across the activation), the SE gate products, residual
  and FPN sums, and the head's ConvTranspose -> Add -> BatchNormalization -> Relu.
* ppocr_mobile_v2_cls: 18 HardSwish, 9 HardSigmoids folded into their convs.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnxruntime as ort
import pytest

from accel.ir import Graph
from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import run_passes
from tests.conftest import shared_path

pytestmark = pytest.mark.conformance
TOLERANCE = 1e-4


def _run(name: str, sample: str | None, input_shapes=None) -> tuple[Graph, Counter]:
    """Import, run the default passes, check agreement with onnxruntime; the graph after and
    the op counts before."""
    path = shared_path("models", name)
    graph = load_onnx(path, input_shapes=input_shapes)
    before = Counter(n.op_type for n in graph.nodes)
    run_passes(graph)
    if sample is None:
        feeds = {t: np.random.default_rng(0).uniform(-1, 1, graph.tensors[t].shape)
                 .astype(np.float32) for t in graph.inputs}
    else:
        feeds = dict(np.load(shared_path("models", sample)))
    want = ort.InferenceSession(str(path)).run(None, feeds)
    got = interpret(graph, feeds)
    for out, w in zip(graph.outputs, want, strict=True):
        err = np.abs(got[out] - w).max() / np.abs(w).max()
        print(f"{name}: {out} relative max error {err:.2e}")
        assert err <= TOLERANCE, f"{name}: output {out} relative max error {err:.2e}"
    print(f"{name}: {sum(before.values())} -> {len(graph.nodes)} nodes")
    return graph, before


def _ops(graph: Graph) -> Counter:
    return Counter(n.op_type for n in graph.nodes)


def _fused(graph: Graph) -> Counter:
    return Counter(n.attrs["activation"] for n in graph.nodes if n.attrs.get("activation"))


def _reads(graph: Graph, op_type: str) -> Counter:
    """What the non-constant inputs of every ``op_type`` node come from."""
    out = Counter()
    for n in graph.nodes:
        if n.op_type == op_type:
            for t in n.inputs:
                if t and not graph.is_constant(t):
                    p = graph.producer(t)
                    out[p.op_type if p else "input"] += 1
    return out


def _affine_after_conv(graph: Graph) -> int:
    """Constant Mul/Add/Sub/Div reading a Conv/Gemm output: what fold_affine removes."""
    count = 0
    for n in graph.nodes:
        if n.op_type in ("Mul", "Add", "Sub", "Div") and any(graph.is_constant(t)
                                                             for t in n.inputs):
            count += sum(1 for t in n.inputs if (p := graph.producer(t)) is not None
                         and p.op_type in ("Conv", "Gemm"))
    return count


def test_face_landmark():
    graph, before = _run("face_landmark_192.onnx", "face_landmark_192_sample.npz")
    assert before == Counter(Conv=45, PRelu=23, Add=20, MaxPool=6, Pad=3)
    assert _ops(graph) == Counter(Conv=45, Add=20, MaxPool=6, Pad=3)
    # every PReLU fused: 3 into convolutions, 20 into the residual sums
    assert _fused(graph) == Counter(PRelu=23)


def test_ppocr_v4_det():
    graph, before = _run("ch_PP-OCRv4_det_320.onnx", "ch_PP-OCRv4_det_320_sample.npz")
    assert (before["Clip"], before["Div"], before["HardSigmoid"]) == (24, 24, 10)
    ops = _ops(graph)
    assert ops["Clip"] == ops["Div"] == ops["HardSigmoid"] == 0
    assert ops == Counter(Conv=62, HardSwish=24, Mul=34, Add=37, GlobalAveragePool=10, Resize=6,
                          ConvTranspose=2, Concat=1, BatchNormalization=1, Relu=1, Sigmoid=1)
    assert _fused(graph) == Counter(Relu=11, Clip=10)      # Clip: the folded HardSigmoids
    assert _reads(graph, "HardSwish") == Counter(Conv=24)  # the affine blocks folded away
    assert _affine_after_conv(graph) == 0
    assert len(graph.nodes) == 179 and sum(before.values()) == 330


def test_ppocr_cls():
    graph, before = _run("ppocr_mobile_v2_cls_48x192.onnx", None,
                         input_shapes={"x": (1, 3, 48, 192)})
    assert (before["Clip"], before["Div"], before["HardSigmoid"]) == (18, 18, 9)
    ops = _ops(graph)
    assert ops == Counter(Conv=53, HardSwish=18, GlobalAveragePool=10, Mul=9, Add=7, MaxPool=1,
                          Reshape=1, Gemm=1, Softmax=1)
    assert _fused(graph) == Counter(Relu=15, Clip=9)
    assert _reads(graph, "HardSwish") == Counter(Conv=18)
    assert _affine_after_conv(graph) == 0
