"""Run onnx's backend node test cases on the host engine (a harness, not a test module).

``python -m tests.tengine_host.node_conformance`` prints every failure with its reason.

The host engine has static shapes, so an input that decides an output shape
(Reshape's ``shape``, Resize's ``scales``, ...: the op's ``const_inputs``) is
bound as a constant from the case's data before loading; every other input is
fed at run time.  A case is *applicable* when all its nodes are ops of the
issue's list.

Outputs the ONNX spec leaves undefined are not scored.  Cast from a floating-point
type to an integer type is "undefined if OOR" (out of range), and onnx >= 1.23
builds the node cases' expected outputs at load time with whatever numpy and
ml_dtypes are installed: ml_dtypes 0.5 wraps -9.0 to int4 7 (two's complement),
0.7 gives 0.  Such elements (the input outside the target type's range, or not
finite) are left out of the comparison; every other element is still compared
exactly.
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
ReduceMean ReduceSum Identity Dropout Constant Abs Neg Reciprocal Floor Ceil Sign Softplus
Softsign Elu Selu Celu Mish Gelu Sum Mean ReduceMax ReduceMin ArgMax ArgMin DepthToSpace
SpaceToDepth InstanceNormalization LayerNormalization Tile Where Equal Less Greater LessOrEqual
GreaterOrEqual Not""".split())


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
            undefined = _spec_undefined(m, runtime)
            for name, want in zip(names_out, expected, strict=True):
                _compare(name, got[name], _array(want), case.rtol, case.atol,
                         undefined.get(name))
    except Exception as exc:  # noqa: BLE001  every failure is recorded with its reason
        return Outcome(case.name, False, f"{type(exc).__name__}: {str(exc)[:300]}")
    return Outcome(case.name, True)


def _array(v) -> np.ndarray:
    # Types numpy cannot hold natively (float8, int4, ...) arrive as TensorProto.
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def _integer_range(dtype: np.dtype) -> tuple[int, int] | None:
    """(min, max) of an integer element type, numpy's or ml_dtypes' (int4, uint2, ...)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    if dtype.kind == "V" and dtype.name in ("int4", "uint4", "int2", "uint2"):
        import ml_dtypes  # installed with onnx

        info = ml_dtypes.iinfo(dtype)
        return int(info.min), int(info.max)
    return None


def _spec_undefined(model: onnx.ModelProto, feeds: dict[str, np.ndarray]
                    ) -> dict[str, np.ndarray]:
    """Masks of the output elements the ONNX spec leaves undefined, by output name.

    Only a Cast from a graph input of a floating-point type to an integer type has
    any: the elements whose input is not finite or lies outside the target's range.
    """
    masks: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        if node.op_type != "Cast" or node.input[0] not in feeds:
            continue
        x = np.asarray(feeds[node.input[0]])
        to = next(a.i for a in node.attribute if a.name == "to")
        span = _integer_range(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)))
        if span is None or not (x.dtype.kind == "f" or "float" in x.dtype.name):
            continue
        xf = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            masks[node.output[0]] = ~np.isfinite(xf) | (xf < span[0]) | (xf > span[1])
    return masks


def _compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
             undefined: np.ndarray | None = None) -> None:
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"output {name!r} shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        raise AssertionError(f"output {name!r} dtype {got.dtype}, expected {want.dtype}")
    if undefined is not None and undefined.shape == got.shape:
        if undefined.all():
            raise AssertionError(f"output {name!r}: every element is undefined by the spec")
        got, want = got[~undefined], want[~undefined]
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
