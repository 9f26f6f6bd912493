"""The default pass pipeline on every zoo model keeps onnxruntime agreement (<= 1e-4)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import run_passes
from tengine_host.zoo import MODELS, build


@pytest.mark.conformance
@pytest.mark.parametrize("name", list(MODELS))
def test_default_passes_keep_zoo_agreement(name):
    model = build(name)
    graph = load_onnx(model)
    n_before = len(graph.nodes)
    run_passes(graph)
    rng = np.random.default_rng(0)
    feeds = {t: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
             for t in graph.inputs}
    sess = ort.InferenceSession(model.SerializeToString())
    want = sess.run(None, feeds)
    got = interpret(graph, feeds)
    for out, w in zip(graph.outputs, want, strict=True):
        err = np.abs(got[out] - w).max() / max(np.abs(w).max(), 1e-12)
        assert err <= 1e-4, f"{name}: output {out} relative max error {err:.2e}"
    assert len(graph.nodes) <= n_before
    ops = {n.op_type for n in graph.nodes}
    assert not ops & {"BatchNormalization", "Identity", "Dropout", "Shape"}, ops


@pytest.mark.conformance
def test_default_passes_keep_agreement_on_the_real_model():
    from tengine_host.model import load_model
    from tests.conftest import shared_path

    path = shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx")
    graph = load_model(path, input_shapes={"x": (1, 3, 48, 192)})
    rng = np.random.default_rng(1)
    feeds = {t: rng.standard_normal(graph.tensors[t].shape).astype(np.float32)
             for t in graph.inputs}
    want = ort.InferenceSession(str(path)).run(None, feeds)
    got = interpret(graph, feeds)
    for out, w in zip(graph.outputs, want, strict=True):
        assert np.abs(got[out] - w).max() / max(np.abs(w).max(), 1e-12) <= 1e-4
    assert not {n.op_type for n in graph.nodes} & {"BatchNormalization", "Shape", "Identity"}
