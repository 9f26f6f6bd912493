"""Small hand-built ONNX graphs for the pass tests, and the before/after check.

Every pass test builds a model with :func:`model`, imports it, and checks with
:func:`check` that our interpreter agrees with onnxruntime before the pass and
after it (to a fixpoint), or with :func:`unchanged` that the pass leaves the
graph alone and the results still agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from accel.ir import Graph
from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret

#: Largest relative error (max |ours - onnxruntime| / max |onnxruntime|) a pass may add.
RTOL = 1e-5


def const(name: str, value) -> object:
    """An initializer (float64 values are stored as float32)."""
    v = np.asarray(value)
    return numpy_helper.from_array(v.astype(np.float32) if v.dtype == np.float64 else v, name)


def model(nodes, inits, x_shape, outputs=("y",), opset=13):
    """A model with one float input ``x`` and float outputs ``outputs``."""
    g = helper.make_graph(nodes, "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def _feeds(m, seed: int, scale: float) -> dict[str, np.ndarray]:
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return {"x": (scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)}


def agree(m, g: Graph, feeds: dict[str, np.ndarray]) -> None:
    """Our interpreter on ``g`` matches onnxruntime on ``m`` output by output."""
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)
    got = interpret(g, feeds)
    names = [o.name for o in m.graph.output]
    assert g.outputs == names, "graph outputs were renamed"
    for name, w in zip(names, want, strict=True):
        err = rel_err(got[name], w)
        assert err <= RTOL, f"output {name}: relative error {err:.2e} > {RTOL:g}"


def _load(m, prepare: Callable[[Graph], bool] | None) -> Graph:
    g = load_onnx(m)
    while prepare is not None and prepare(g):
        pass
    return g


def check(m, apply: Callable[[Graph], bool], *, seed: int = 0, scale: float = 1.0,
          prepare: Callable[[Graph], bool] | None = None) -> Graph:
    """Agreement before, apply the pass to a fixpoint (it must change something),
    agreement after; returns the graph after.  ``prepare`` runs to a fixpoint first
    (another pass, e.g. to fuse an activation)."""
    feeds = _feeds(m, seed, scale)
    g = _load(m, prepare)
    agree(m, g, feeds)
    assert apply(g), "the pass found nothing to do"
    for _ in range(10):
        if not apply(g):
            break
    else:
        raise AssertionError("the pass did not settle")
    agree(m, g, feeds)
    return g


def _snapshot(g: Graph) -> str:
    return repr([(n.name, n.op_type, n.inputs, n.outputs, sorted(n.attrs.items()))
                 for n in g.nodes]) + repr(sorted(g.tensors))


def unchanged(m, apply: Callable[[Graph], bool], *, seed: int = 0,
              prepare: Callable[[Graph], bool] | None = None) -> Graph:
    """The pass reports no change, leaves nodes, attributes and tensors alone, and the
    results agree with onnxruntime."""
    feeds = _feeds(m, seed, 1.0)
    g = _load(m, prepare)
    before = _snapshot(g)
    assert not apply(g), "the pass changed a graph it must leave alone"
    assert _snapshot(g) == before
    agree(m, g, feeds)
    return g


def ops(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def node(name, op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=name, **attrs)
