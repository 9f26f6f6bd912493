"""Int8 accuracy of real models on real images: OpenDLA's calibrations and onnxruntime's own
post-training quantization, each against fp32 and judged by the model's own metric.

Usage::

    python benchmarks/accuracy.py [--models a,b] [--methods m,...] [--calib N] [--test N]
                                  [--json out.json] [--no-progress]

Every model of ``../shared/models`` (:mod:`benchmarks.accuracy_models`) is
imported by the host engine, calibrated on up to 16 real images and run on a
disjoint set of real test images (:mod:`benchmarks.accuracy_images`).  The
host engine's fp32 answer is the reference.  Methods:

* ``default``: OpenDLA's int8 path as a user gets it without options: the
  table ``opendla quantize`` writes (``calibrate_checked``: the default
  algorithm on three quarters of the calibration images, the rest held out
  to decide on cross-layer equalization, bias correction and zero points),
  run by the int8 CPU reference of
  what nv_small's DLA computes (``get_device("cpu", precision="int8",
  preset="nv_small")``, bit-exact with the DLA by contract);
* one method per algorithm of ``tengine_host.quant.calibrate.ALGORITHMS``
  (read at run time), the same path with ``calibrate(..., algorithm=A)``;
  a table equal to one already run is not run again (its row says so);
* ``ort-minmax`` (onnxruntime's default calibrator) and ``ort-percentile``:
  ``quantize_static`` after onnxruntime's ``quant_pre_process`` (which its
  documentation asks for: it folds batch norms and turns Constant nodes into
  weights), QDQ, per-channel int8 weights, int8 activations, same calibration
  images, run by onnxruntime; ``ort-entropy`` on request only
  (:func:`default_methods` says why);
* ``ort-fp32``: onnxruntime's own fp32, the floor: how far two fp32 engines
  already differ.

Each model's metric compares final answers (after its own thresholds and
NMS): classifier top-1 agreement; detector precision and recall of the int8
boxes against fp32's (IoU >= 0.5, same class); the text detector's text-map
IoU (probability > 0.3) and line boxes; landmark distances in input pixels.
For every output (each part of one a Concat makes: YOLOv8's boxes apart from
its scores) the cosine and the SQNR (dB) against fp32 are pooled over the test
set; the table shows the worst output, then every output.
Costs are CPU seconds.  Inference runs on one thread (numpy's BLAS and
onnxruntime's pools); onnxruntime's histogram calibrators keep every
activation of every calibration image and need ~7 GB on picodet_layout_cdla.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import logging
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

if __package__ in (None, ""):       # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.accuracy_metrics import sqnr_db  # noqa: E402
from benchmarks.accuracy_models import MODELS, BenchModel  # noqa: E402
from tengine_host.devices import get_device  # noqa: E402
from tengine_host.executor import Executor  # noqa: E402
from tengine_host.model import load_model  # noqa: E402
from tengine_host.quant import calibrate  # noqa: E402
from tengine_host.quant.fidelity import (  # noqa: E402
    calibrate_checked,
    measured_parts,
    weight_rewrites,
)
from tengine_host.quant.zero_point import assign_zero_points  # noqa: E402
from tengine_host.zoo.report import cosine  # noqa: E402

#: onnxruntime's methods: name -> its CalibrationMethod (None: fp32, not quantized)
ORT_METHODS = {"ort-minmax": "MinMax", "ort-entropy": "Entropy",
               "ort-percentile": "Percentile", "ort-fp32": None}
#: per-channel QDQ needs QuantizeLinear's ``axis``: opset 13 (older models are converted)
QDQ_OPSET = 13
#: the most calibration images a run may use (a post-training calibration set is small)
MAX_CALIBRATION = 16
#: the DLA configuration whose arithmetic the int8 reference computes
PRESET = "nv_small"


def opendla_methods() -> list[str]:
    """``default`` and the calibration algorithms the installed ``calibrate`` offers now."""
    algorithms = importlib.import_module("tengine_host.quant.calibrate").ALGORITHMS
    return ["default", *algorithms]


def all_methods() -> list[str]:
    """Every method this run can measure, OpenDLA's first."""
    return [*opendla_methods(), *ORT_METHODS]


def default_methods() -> list[str]:
    """Every method but ``ort-entropy``: with ``quantize_static``'s defaults (128 histogram
    bins searched for a 128-bin quantization) its KL search has a single candidate, the
    whole range, so it answers exactly as ``ort-minmax`` does, at many times the cost."""
    return [m for m in all_methods() if m != "ort-entropy"]


@dataclass
class MethodResult:
    method: str
    metrics: dict[str, float]
    outputs: dict[str, dict[str, float]]        # output -> {"cosine": c, "sqnr_db": s}
    calibration_s: float                         # CPU seconds to quantize
    inference_ms: float                          # CPU milliseconds per test image
    same_as: str | None = None                   # an earlier method with the same table
    notes: list[str] = field(default_factory=list)


@dataclass
class ModelResult:
    model: str
    calibration_images: int
    test_images: int
    methods: list[MethodResult]


def compare(model: BenchModel, refs: list[dict], gots: list[dict],
            parts: dict[str, tuple[str, tuple]] | None = None) -> tuple[dict, dict]:
    """The model's metrics and each output's pooled cosine and SQNR, int8 ``gots`` against
    fp32 ``refs`` (lists of output dicts, one per test image); with ``parts`` (name ->
    ``(output, region)``, :func:`~tengine_host.quant.fidelity.measured_parts`) for the
    regions named instead."""
    metrics = model.score([model.answer(r) for r in refs], [model.answer(g) for g in gots])
    parts = parts or {name: (name, ()) for name in refs[0]}
    outputs = {}
    for name, (output, region) in parts.items():
        ref = np.concatenate([np.ravel(np.asarray(r[output])[region]) for r in refs])
        got = np.concatenate([np.ravel(np.asarray(g[output])[region]) for g in gots])
        outputs[name] = {"cosine": cosine(ref, got), "sqnr_db": sqnr_db(ref, got)}
    return metrics, outputs


def ort_runner(path: Path) -> Callable[[dict], dict]:
    """A function running one inference of ``path`` in onnxruntime, on one thread, giving
    the outputs by name."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3                  # its notes on unused initializers are not ours
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return lambda feeds: dict(zip(names, sess.run(None, feeds), strict=True))


def _opset_at_least(path: Path, opset: int, tmp: Path) -> Path:
    """``path``, or a copy converted to ``opset`` by ONNX's version converter if older."""
    import onnx
    from onnx import version_converter

    model = onnx.load(str(path))
    if next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= opset:
        return path
    out = tmp / f"{path.stem}_opset{opset}.onnx"
    onnx.save(version_converter.convert_version(model, opset), str(out))
    return out


def ort_quantize(model: BenchModel, calibration: list[dict], method: str, tmp: Path) -> Path:
    """``model`` quantized by onnxruntime's ``quantize_static`` with calibrator ``method``."""
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter(calibration)

        def get_next(self):
            return next(self._feeds, None)

    pre = tmp / f"{model.name}_pre.onnx"
    out = tmp / f"{model.name}_{method}.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)                # its per-tensor advice is not ours to print,
    ort.set_default_logger_severity(3)
    try:
        with contextlib.redirect_stdout(io.StringIO()):          # nor its progress lines
            if not pre.exists():
                quant_pre_process(str(_opset_at_least(model.path, QDQ_OPSET, tmp)), str(pre),
                                  skip_symbolic_shape=True)
            quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, method))
    finally:
        root.setLevel(level)
    return out


class _Runs:
    """Runs the test feeds through one engine after another, counting on the progress bar and
    timing each engine in CPU seconds (robust to a machine shared with other work)."""

    def __init__(self, tests: list[dict], bar: tqdm) -> None:
        self.tests, self.bar = tests, bar

    def __call__(self, infer: Callable[[dict], dict]) -> tuple[list[dict], float]:
        """Every test's outputs, and the CPU milliseconds per test."""
        outs, start = [], time.process_time()
        for feeds in self.tests:
            outs.append(infer(feeds))
            self.bar.update()
        return outs, (time.process_time() - start) / len(self.tests) * 1e3


def run_model(model: BenchModel, methods: list[str], calib: int, test: int | None,
              tmp: Path, progress: bool) -> ModelResult:
    """Calibrate and run ``model`` with every method; see the module docstring."""
    graph = load_model(model.path, input_shapes=model.input_shapes)
    model.prepare(graph)
    parts = measured_parts(graph)
    calibration = model.feeds("calibration", calib)
    tests = model.feeds("test", test)
    bar = tqdm(total=len(tests) * (len(methods) + 1), desc=model.name, file=sys.stderr,
               disable=None if progress else True, leave=False, unit="img")
    run = _Runs(tests, bar)
    with Executor(graph, [get_device("cpu")]) as fp32:
        bar.set_postfix_str("fp32")
        refs, _ = run(fp32.run)
    results: list[MethodResult] = []
    tables: dict[str, MethodResult] = {}      # a table's JSON -> the result of running it
    # the algorithms first, so that a default equal to one of them is not run again
    for method in sorted(methods, key=lambda m: m == "default"):
        bar.set_postfix_str(method)
        start = time.process_time()
        notes: list[str] = []
        if method in ORT_METHODS:
            calibrator = ORT_METHODS[method]
            path = model.path if calibrator is None else ort_quantize(model, calibration,
                                                                      calibrator, tmp)
            calibration_s = time.process_time() - start
            gots, ms = run(ort_runner(path))
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if method == "default":     # what `opendla quantize` does without options
                    table, report = calibrate_checked(
                        graph, calibration, preset=PRESET, progress=progress,
                        variants={"zero points": assign_zero_points},
                        rewrites=weight_rewrites(PRESET, graph=graph))
                    print(f"{model.name}: default applied {report.applied}", file=sys.stderr)
                else:
                    table = calibrate(graph, calibration, progress=progress, algorithm=method)
            notes = list(dict.fromkeys(str(w.message) for w in caught))
            calibration_s = time.process_time() - start
            key = json.dumps(table.to_json(), sort_keys=True, default=str)
            same = tables.get(key)
            if same is not None:
                results.append(MethodResult(method, same.metrics, same.outputs, calibration_s,
                                            same.inference_ms, same_as=same.method,
                                            notes=notes))
                bar.update(len(tests))
                continue
            device = get_device("cpu", precision="int8", preset=PRESET,
                                keep_float=table.keep_float)
            with Executor(graph, [device], table) as int8:
                gots, ms = run(int8.run)
        metrics, outputs = compare(model, refs, gots, parts)
        results.append(MethodResult(method, metrics, outputs, calibration_s, ms, notes=notes))
        if method not in ORT_METHODS:
            tables[key] = results[-1]
    bar.close()
    results.sort(key=lambda r: methods.index(r.method))
    return ModelResult(model.name, len(calibration), len(tests), results)


def _fmt(value: float, spec: str = ".3f") -> str:
    return "-" if value is None or math.isnan(value) else format(value, spec)


def format_result(model: BenchModel, result: ModelResult) -> str:
    """The model's table: its metrics, the worst output, the cost; then every output."""
    lines = [f"{result.model}: {result.calibration_images} calibration images, "
             f"{result.test_images} test images; reference: fp32 (host engine)"]
    lines.append(f"  {'method':<18}" + "".join(f"{h:>12}" for h in model.columns.values())
                 + f"{'min cos':>10}{'min SQNR':>10}{'calib s':>9}{'ms/img':>8}")
    for r in result.methods:
        cells = "".join(f"{_fmt(r.metrics[k], '.0f' if k == 'fp32_boxes' else '.3f'):>12}"
                        for k in model.columns)
        worst_cos = min(o["cosine"] for o in r.outputs.values())
        worst_sqnr = min(o["sqnr_db"] for o in r.outputs.values())
        label = r.method + (f" (={r.same_as})" if r.same_as else "")
        lines.append(f"  {label:<18}{cells}{worst_cos:>10.5f}{worst_sqnr:>10.1f}"
                     f"{r.calibration_s:>9.1f}{r.inference_ms:>8.0f}")
    names = list(result.methods[0].outputs)
    width = max(len(n) for n in names) + 2
    lines.append(f"  {'cos / SQNR dB':<{width}}"
                 + "".join(f"{r.method:>17}" for r in result.methods))
    for name in names:
        lines.append(f"  {name:<{width}}" + "".join(
            f"{r.outputs[name]['cosine']:>10.5f}/{r.outputs[name]['sqnr_db']:<6.1f}"
            for r in result.methods).rstrip())
    return "\n".join(lines)


def format_summary(results: list[ModelResult]) -> str:
    """One line per model: its headline metric under every method."""
    methods = [r.method for r in results[0].methods]
    lines = [f"{'model':<28}{'metric':<10}" + "".join(f"{m:>15}" for m in methods)]
    for result in results:
        model = MODELS[result.model]
        heads = "/".join(model.columns[k] for k in model.headline)
        cells = ["/".join(_fmt(r.metrics[k], ".2f" if len(model.headline) > 1 else ".3f")
                          for k in model.headline) for r in result.methods]
        lines.append(f"{result.model:<28}{heads:<10}" + "".join(f"{c:>15}" for c in cells))
    return "\n".join(lines)


def _json_safe(value):
    """NaN as null and infinities as strings: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _names(text: str, allowed: list[str], what: str, parser: argparse.ArgumentParser
           ) -> list[str]:
    """The comma-separated names of ``text``; an unknown one exits naming the allowed."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in allowed:
            parser.error(f"{what} {n!r} not in {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when done, 2 when the models are not where they should be."""
    from threadpoolctl import threadpool_limits

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated (default all: {','.join(MODELS)})")
    parser.add_argument("--methods", default=",".join(default_methods()),
                        help=f"comma-separated, from {','.join(all_methods())}, or 'all' "
                             f"(default all but ort-entropy)")
    parser.add_argument("--calib", type=int, default=8,
                        help=f"calibration images per model, 1..{MAX_CALIBRATION} (default 8)")
    parser.add_argument("--test", type=int, default=None,
                        help="use only the first N test images of each model (default all)")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    args = parser.parse_args(argv)
    models = _names(args.models, list(MODELS), "model", parser)
    methods = (all_methods() if args.methods == "all"
               else _names(args.methods, all_methods(), "method", parser))
    if not 1 <= args.calib <= MAX_CALIBRATION:
        parser.error(f"--calib {args.calib} must be between 1 and {MAX_CALIBRATION}")
    if args.test is not None and args.test < 1:
        parser.error(f"--test {args.test} must be at least 1")
    missing = [m for m in models if not MODELS[m].path.exists()]
    if missing:
        print(f"models not found: {', '.join(str(MODELS[m].path) for m in missing)} "
              f"(set OPENDLA_SHARED to the folder holding models/)", file=sys.stderr)
        return 2
    start, cpu_start = time.perf_counter(), time.process_time()
    results = []
    with threadpool_limits(limits=1), tempfile.TemporaryDirectory() as tmp:
        for name in models:
            result = run_model(MODELS[name], methods, args.calib, args.test, Path(tmp),
                               args.progress)
            results.append(result)
            print(format_result(MODELS[name], result) + "\n", flush=True)
    print(format_summary(results))
    for result in results:
        for r in result.methods:
            for note in r.notes:
                print(f"note: {result.model} {r.method}: {note}")
    print(f"total {time.perf_counter() - start:.0f} s ({time.process_time() - cpu_start:.0f} s "
          f"of CPU)")
    if args.json:
        doc = {"preset": PRESET, "calibration": args.calib, "methods": methods,
               "models": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(_json_safe(doc), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
