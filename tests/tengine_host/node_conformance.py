"""Run onnx's backend node test cases on the host engine (a harness, not a test module).

``python -m tests.tengine_host.node_conformance`` prints every failure with its reason.

The host engine has static shapes, so an input that decides an output shape
(Reshape's ``shape``, Resize's ``scales``, ...: the op's ``const_inputs``) is
bound as a constant from the case's data before loading; every other input is
fed at run time.  A case is *applicable* when all its nodes are ops of the
issue's list.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.ops import OPS

#: The ops the host engine must cover (issue 4), Constant included.
LISTED_OPS = frozenset("""Conv ConvTranspose Gemm MatMul Relu LeakyRelu PRelu Clip Sigmoid Tanh
HardSigmoid HardSwish Softmax Add Sub Mul Div Pow Sqrt Exp Log Max Min Erf MaxPool AveragePool
GlobalAveragePool GlobalMaxPool BatchNormalization LRN Concat Split Slice Reshape Flatten
Transpose Squeeze Unsqueeze Pad Resize Upsample Shape Gather Cast ConstantOfShape Range Expand
ReduceMean ReduceSum Identity Dropout Constant""".split())


@dataclass
class Outcome:
    name: str
    ok: bool
    reason: str = ""


def applicable_cases() -> list:
    """onnx's node test cases whose every node is a listed op."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return [c for c in cases if {n.op_type for n in c.model.graph.node} <= LISTED_OPS]


def _bind_shape_inputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
                       ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Move inputs that decide shapes into initializers; return the model and runtime feeds.

    An input decides a shape when it reaches a ``const_inputs`` slot directly or
    through other nodes (``Shape`` passes only its input's shape on, not its value).
    """
    needed: set[str] = set()
    for node in model.graph.node:
        op = OPS.get(node.op_type)
        needed.update(node.input[i] for i in (op.const_inputs if op else ())
                      if i < len(node.input) and node.input[i])
    for node in reversed(model.graph.node):
        op = OPS.get(node.op_type)
        if op is not None and not op.shape_only and needed & set(node.output):
            needed.update(t for t in node.input if t)
    const = needed & set(feeds)
    if not const:
        return model, feeds
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in const]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.graph.initializer.extend(numpy_helper.from_array(np.asarray(feeds[n]), n) for n in const)
    return m, {k: v for k, v in feeds.items() if k not in const}


def run_case(case) -> Outcome:
    """Load and run one case on every data set; compare with onnx's expected outputs."""
    model = case.model
    names_in = [vi.name for vi in model.graph.input
                if vi.name not in {i.name for i in model.graph.initializer}]
    names_out = [vi.name for vi in model.graph.output]
    try:
        for inputs, expected in case.data_sets:
            feeds = dict(zip(names_in, (_array(v) for v in inputs), strict=False))
            m, runtime = _bind_shape_inputs(model, feeds)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graph = load_onnx(m, input_shapes={k: v.shape for k, v in runtime.items()})
                got = interpret(graph, runtime)
            for name, want in zip(names_out, expected, strict=True):
                _compare(name, got[name], _array(want), case.rtol, case.atol)
    except Exception as exc:  # noqa: BLE001  every failure is recorded with its reason
        return Outcome(case.name, False, f"{type(exc).__name__}: {str(exc)[:300]}")
    return Outcome(case.name, True)


def _array(v) -> np.ndarray:
    # Types numpy cannot hold natively (float8, int4, ...) arrive as TensorProto.
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def _compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"output {name!r} shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        raise AssertionError(f"output {name!r} dtype {got.dtype}, expected {want.dtype}")
    if want.dtype.kind in "fc" or want.dtype.kind == "V":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"output {name!r}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"output {name!r}")


def run_all() -> list[Outcome]:
    return [run_case(c) for c in applicable_cases()]


if __name__ == "__main__":
    outcomes = run_all()
    bad = [o for o in outcomes if not o.ok]
    for o in bad:
        print(f"{o.name}: {o.reason}")
    print(f"passed {len(outcomes) - len(bad)}/{len(outcomes)}")
