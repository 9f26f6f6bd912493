"""``opendla run MODEL``: inference on the host engine's devices, or of a compiled loadable.

MODEL is an ONNX model or an NVDLA loadable (``opendla compile``'s ``.nvdla``,
or NVIDIA's).  Inputs come from ``--input [NAME=]FILE`` (``.npy``, or
``.npz`` with arrays named after the inputs) or ``--image FILE`` with the
preprocessing options of ``opendla quantize`` (``-g -w -s -b -c -y``).

ONNX models: ``--device nvdla`` runs what the DLA supports on the simulated
NVDLA (int8, needs ``--calib`` from ``opendla quantize``) and the rest on the
CPU; ``--verify`` checks every tensor the DLA computes against the int8 CPU
reference of the same partition (:mod:`tengine_host.verify`).
``--input-shape NAME=1,3,224,224`` fixes dynamic dimensions (arrays that fix
them need no option); a batch-1 model runs a larger batch sample by sample;
``--precision int8`` runs the DLA's ops through the int8 reference.

Loadables take int8 NCHW arrays, or float arrays when they carry an opendla
manifest (``opendla compile`` writes one: preset, scales, blob checksums):
those are quantized with the recorded input scale and zero point, and
``--dequantize`` turns the int8 outputs back into floats.  A loadable whose
blobs no longer match their checksums, or a ``--preset`` other than the
recorded one, is refused.  A batch runs one sample at a time.

``--repeat N --warmup W`` times N runs after W untimed ones and prints the
min/median/mean per inference (as Tengine's benchmark tool does);
``--labels FILE`` names the top-k classes; ``--save-outputs DIR`` writes
``DIR/<output>.npy``; ``--trace-regs`` prints every register write on stderr.
``--debug-graph/-time/-data/-ref`` are Tengine's ``TG_DEBUG_*`` switches (the
environment variables work too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accel.config import DEFAULT_PRESET, PRESETS
from opendla.commands._backend import add_backend_options, simulator_of
from opendla.commands._inputs import (
    add_input_options,
    add_keep_float_option,
    image_dims,
    image_options,
    keep_float_nodes,
    load_image_batch,
    load_labels,
    parse_inputs,
    warn_int8_inputs,
)
from opendla.errors import CheckFailed, UsageError
from tengine_host.errors import reason

DEVICE_CHOICES = ("cpu", "nvdla")
LOADABLE_SUFFIXES = (".nvdla", ".fbuf")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run an ONNX model (cpu, or nvdla with CPU fallback) "
                                          "or a compiled loadable",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="ONNX model, or NVDLA loadable (.nvdla from 'opendla compile')")
    p.add_argument("--device", default="cpu", choices=DEVICE_CHOICES,
                   help="device for an ONNX model; ops it cannot run fall back to the CPU "
                        "(default cpu)")
    add_keep_float_option(p)
    p.add_argument("--preset", choices=list(PRESETS),
                   help=f"hardware configuration of the NVDLA (default {DEFAULT_PRESET}; a "
                        f"loadable from 'opendla compile' runs on the preset it records and "
                        f"refuses another)")
    add_input_options(p)
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                   help="CPU precision (int8 runs the DLA's ops through the int8 reference)")
    p.add_argument("--verify", action="store_true",
                   help="with --device nvdla: also run the int8 CPU reference of the same "
                        "partition and check every DLA tensor byte for byte (exit 1 on a "
                        "mismatch)")
    p.add_argument("--calib", help="calibration table from 'opendla quantize' (for int8)")
    p.add_argument("--dequantize", action="store_true",
                   help="loadables: print and save the outputs as floats, (q - zero point) x "
                        "scale with the scales its manifest records")
    p.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<name>.npy")
    p.add_argument("--top-k", type=int, default=5, metavar="K",
                   help="classes to list for 2-D outputs (default 5)")
    p.add_argument("--labels", metavar="FILE", help="class names, one per line, for the top-k")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run the inputs N times and print min/median/mean (default 1)")
    p.add_argument("--warmup", type=int, default=0, metavar="W",
                   help="untimed runs before the timed ones (default 0; with --device nvdla "
                        "the first runs record and learn the register programs: up to 8 "
                        "runs before the steady speed)")
    p.add_argument("--trace-regs", action="store_true",
                   help="print every NVDLA register write on stderr")
    add_backend_options(p, "with --device nvdla: ")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--debug-graph", action="store_true",
                   help="print the graph after shape inference (TG_DEBUG_GRAPH)")
    p.add_argument("--debug-time", action="store_true",
                   help="print the per-node time table (TG_DEBUG_TIME)")
    p.add_argument("--debug-data", nargs="?", const="output", metavar="DIR",
                   help="dump every node's inputs/outputs as .npy to DIR (default ./output; "
                        "TG_DEBUG_DATA)")
    p.add_argument("--debug-ref", action="store_true",
                   help="naive reference kernels instead of optimized ones (TG_DEBUG_REF)")


# ------------------------------------------------------------------ helpers
def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` strings -> ``{NAME: (1, 3, 224, 224)}``."""
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise UsageError(f"--input-shape {spec!r} must be NAME=D0,D1,... with positive "
                             f"integers")
        shapes[name] = shape
    return shapes


def is_loadable(path: str | Path) -> bool:
    """An NVDLA loadable rather than an ONNX model: by suffix, else by content (an ONNX
    ModelProto starts with a protobuf field tag, a loadable with its root table offset)."""
    path = Path(path)
    if path.suffix == ".onnx":
        return False
    if path.suffix in LOADABLE_SUFFIXES or path.name.endswith("_fbuf"):
        return True
    try:
        head = path.open("rb").read(8)
    except OSError:
        return False
    return len(head) == 8 and head[0] not in (0x08, 0x0A, 0x12, 0x1A, 0x22, 0x3A, 0x42)


def onnx_input_names(path: str | Path) -> list[str]:
    """Graph inputs of an ONNX file (initializers excluded), without importing the model;
    a file that holds no ONNX graph (missing, corrupt, empty) is a usage error naming it."""
    from tengine_host.frontend.onnx_import import OnnxImportError, read_proto

    try:
        model = read_proto(path)
    except OnnxImportError as exc:
        raise UsageError(str(exc)) from None
    init = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in init]


def check_dtypes(graph, feeds: dict) -> dict:
    """Cast feeds to the model's input dtypes when that loses nothing but float precision
    (a float64 array for a float32 input); else a clear error: another kind (integers for
    a float input), integers outside the input's integer type, or finite floats that
    would overflow to infinity."""
    out = {}
    for name, v in feeds.items():
        want = np.dtype(graph.tensors[name].dtype)
        got = v.dtype
        floats = np.issubdtype(got, np.floating) and np.issubdtype(want, np.floating)
        ints = np.issubdtype(got, np.integer) and np.issubdtype(want, np.integer)
        if not (floats or ints):
            raise UsageError(f"input {name!r} has dtype {got}, the model expects {want}")
        with np.errstate(over="ignore"):      # an overflow to inf is refused below
            cast = v.astype(want, copy=False)
        if ints and v.size and (v.min() < np.iinfo(want).min or v.max() > np.iinfo(want).max):
            raise UsageError(f"input {name!r} ({got}) holds values from {v.min()} to {v.max()}; "
                             f"the model's {want} input takes {np.iinfo(want).min} to "
                             f"{np.iinfo(want).max}")
        if floats and got.itemsize > want.itemsize:
            overflow = np.isfinite(v) & ~np.isfinite(cast)
            if overflow.any():
                raise UsageError(f"input {name!r} ({got}) holds {int(overflow.sum())} finite "
                                 f"value(s) beyond {want}'s range (largest "
                                 f"{np.abs(v[overflow]).max():.3g}, {want} ends at "
                                 f"{np.finfo(want).max:.3g})")
        out[name] = cast
    return out


def fit_batch(model: str, graph, feeds: dict, shapes: dict):
    """The graph to run ``feeds`` with, and whether to run them sample by sample.

    Shapes that differ only in the batch dimension re-import the model with the
    feed's batch; a model whose shapes fix batch 1 runs the batch one sample at
    a time.  Any other difference is an error naming both shapes.
    """
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model

    wrong = {}
    for name, v in feeds.items():
        want = graph.tensors[name].shape
        if v.shape == want:
            continue
        if v.ndim != len(want) or v.shape[1:] != want[1:]:
            hint = ""
            if v.ndim == 4 == len(want) and (v.shape[3], *v.shape[1:3]) == tuple(want[1:]):
                hint = ("; it looks channels-last (NHWC): the model takes NCHW, "
                        "np.transpose(x, (0, 3, 1, 2)) turns it")
            raise UsageError(f"input {name!r} has shape {v.shape}, the model expects {want} "
                             f"(the batch dimension may differ){hint}")
        wrong[name] = v.shape
    if not wrong:
        return graph, False
    batches = {v.shape[0] for v in feeds.values()}
    if len(batches) != 1:
        raise UsageError(f"inputs disagree on the batch size: "
                         f"{ {n: v.shape[0] for n, v in feeds.items()} }")
    try:
        return load_model(model, input_shapes={**shapes, **{n: v.shape
                                                            for n, v in feeds.items()}}), False
    except OnnxImportError as exc:
        if all(graph.tensors[n].shape[0] == 1 for n in feeds):
            return graph, True
        raise UsageError(f"the model does not accept batch {batches.pop()}: {exc}") from None


def summarize(name: str, value, top_k: int, labels: list[str] | None = None) -> dict:
    """Shape, range and, for [N, classes] outputs, the top-k classes of each row."""
    v = np.asarray(value)
    out = {"name": name, "shape": list(v.shape), "dtype": str(v.dtype),
           "min": float(v.min()), "max": float(v.max()), "mean": float(v.mean())}
    if v.ndim == 2 and np.issubdtype(v.dtype, np.floating):
        k = min(top_k, v.shape[1])
        idx = np.argsort(-v, axis=1, kind="stable")[:, :k]
        out["top_k"] = [[[int(i), float(row[i])] for i in r] for row, r in zip(v, idx, strict=True)]
        if labels:
            out["top_k_labels"] = [[labels[int(i)] if int(i) < len(labels) else str(int(i))
                                    for i in r] for r in idx]
    return out


@dataclass
class Timing:
    """Wall time of each timed run of the whole input batch."""

    batch: int
    runs: list[float] = field(default_factory=list)

    def as_dict(self) -> dict:
        ms = [s * 1e3 for s in self.runs]
        return {"batch": self.batch, "repeat": len(ms), "total_ms": ms[-1],
                "per_sample_ms": ms[-1] / self.batch, "min_ms": min(ms),
                "median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms)}

    def lines(self) -> list[str]:
        d = self.as_dict()
        per = "" if self.batch == 1 else f" for {self.batch} samples"
        out = [f"time: {d['total_ms']:.3f} ms{per}"
               + (f" ({d['per_sample_ms']:.3f} ms per sample)" if self.batch > 1 else "")]
        if len(self.runs) > 1:
            out.append(f"repeat {len(self.runs)}: min {d['min_ms']:.3f} ms, median "
                       f"{d['median_ms']:.3f} ms, mean {d['mean_ms']:.3f} ms per inference{per}")
        return out


def timed(fn: Callable[[], Any], batch: int, repeat: int, warmup: int) -> tuple[Any, Timing]:
    """``fn()`` run ``warmup`` times untimed, then ``repeat`` times timed; the last result."""
    result = None
    for _ in range(warmup):
        fn()
    timing = Timing(batch)
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        timing.runs.append(time.perf_counter() - start)
    return result, timing


def check_output_dir(flag: str, directory: str) -> None:
    """Refuse ``directory`` (the value of ``flag``) before any work when it is a file."""
    if Path(directory).exists() and not Path(directory).is_dir():
        raise UsageError(f"{flag} {directory!r} is a file; give a directory")


def save_outputs(directory: str, outputs: dict[str, np.ndarray]) -> None:
    out_dir = Path(directory)
    check_output_dir("--save-outputs", directory)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            np.save(out_dir / f"{name.replace('/', '_')}.npy", value)
    except OSError as exc:
        raise UsageError(f"--save-outputs {directory!r}: cannot write: "
                         f"{reason(exc, directory)}") from None


def print_outputs(summaries: list[dict]) -> None:
    for s in summaries:
        print(f"output {s['name']}: shape {tuple(s['shape'])} {s['dtype']} "
              f"min {s['min']:.6g} max {s['max']:.6g} mean {s['mean']:.6g}")
        names = s.get("top_k_labels")
        for row, top in enumerate(s.get("top_k", [])):
            items = [f"{i}:{p:.4f}" + (f" {names[row][j]}" if names else "")
                     for j, (i, p) in enumerate(top)]
            print(f"  [{row}] top-{len(top)}: " + ", ".join(items))


def _validate(args: argparse.Namespace) -> None:
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat} must be at least 1")
    if args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup} must be 0 or more")
    if args.top_k < 1:
        raise UsageError(f"--top-k {args.top_k} must be at least 1")
    if args.input and args.image:
        raise UsageError("give --input arrays or --image files, not both")
    if not args.input and not args.image and not is_loadable(args.model):
        raise UsageError("no input: give --input [NAME=]FILE.npy|.npz or --image FILE")
    if not Path(args.model).is_file():
        raise UsageError(f"model {args.model!r} "
                         + ("is a directory" if Path(args.model).is_dir() else "does not exist")
                         + " (give an .onnx model or an .nvdla loadable)")
    if args.backend == "rtl" and (args.device != "nvdla" or is_loadable(args.model)):
        raise UsageError("--backend rtl runs the DLA part of an ONNX model with --device nvdla "
                         "(loadables and the CPU run on the cmodel)")
    for flag, directory in (("--save-outputs", args.save_outputs),
                            ("--debug-data", args.debug_data)):
        if directory:
            check_output_dir(flag, directory)


# ------------------------------------------------------------------ loadables
def _as_bound(t, x: np.ndarray, quant) -> np.ndarray:
    """``x`` as ``[N, C, H, W]`` for the bound tensor ``t``: ``[C, H, W]`` gains a batch
    axis, and with a manifest the model's own input shape (``quant.shape``, e.g.
    ``[N, C]``) is reshaped to the cube the loadable binds."""
    if quant is not None and x.ndim == len(quant.shape) and x.shape[1:] == quant.shape[1:]:
        return x.reshape(x.shape[0], *t.shape[1:])
    x = x[None] if x.ndim == 3 else x
    if x.ndim != 4 or x.shape[1:] != t.shape[1:]:
        host = "" if quant is None or tuple(quant.shape[1:]) == tuple(t.shape[1:]) else \
            f" or [N, {', '.join(map(str, quant.shape[1:]))}]"
        raise UsageError(f"input {t.name!r} has shape {x.shape}; the loadable takes "
                         f"[N, {', '.join(map(str, t.shape[1:]))}]{host}")
    return x


def _to_int8(name: str, x: np.ndarray, quant, model: str) -> np.ndarray:
    """The int8 codes the loadable reads: int8 as given, floats quantized with the
    manifest's scale and zero point (the int8 reference's rule, round half away)."""
    from tengine_host.quant.weights import quantize_activation

    if x.dtype == np.int8:
        return x
    if not np.issubdtype(x.dtype, np.floating):
        raise UsageError(f"input {name!r} has dtype {x.dtype}; give int8 codes or float "
                         f"values")
    if quant is None:
        raise UsageError(f"input {name!r} is {x.dtype} but {model!r} records no input scale "
                         f"(no opendla manifest, e.g. NVIDIA's loadables): give int8 arrays")
    warn_int8_inputs({name: x}, {name: {"scale": quant.scale, "zero_point": quant.zero_point}},
                     f"loadable {model!r}")
    return quantize_activation(x, quant.scale, quant.zero_point)


def loadable_feeds(model: str, specs: list[str], inputs, manifest=None
                   ) -> tuple[list[dict[str, np.ndarray]], int]:
    """Per-sample int8 feeds of the loadable ``model``'s ``inputs`` from the ``--input``
    values ``specs``, and the batch size.  Float arrays are quantized with the
    ``manifest``'s input scale and zero point."""
    names = [t.name for t in inputs]
    if not names:
        if specs:
            raise UsageError(f"{model!r} binds no input tensor (its input comes from its "
                             f"own data); drop --input")
        return [{}], 1
    feeds = parse_inputs(specs, names)
    samples: dict[str, np.ndarray] = {}
    for t in inputs:
        quant = manifest.tensor(t.name) if manifest is not None else None
        x = _as_bound(t, feeds[t.name], quant)
        samples[t.name] = _to_int8(t.name, x, quant, model)
    batches = {v.shape[0] for v in samples.values()}
    if len(batches) != 1:
        raise UsageError(f"inputs disagree on the batch size: "
                         f"{ {n: v.shape[0] for n, v in samples.items()} }")
    batch = batches.pop()
    return [{n: v[i:i + 1] for n, v in samples.items()} for i in range(batch)], batch


def dequantize_outputs(outputs: dict[str, np.ndarray], manifest) -> dict[str, np.ndarray]:
    """Each int8 output as float32 ``(q - zero_point) * scale``, in the model's own
    output shape (``[N, classes]`` for a classifier, so the top-k is listed)."""
    from tengine_host.quant.weights import dequantize

    out = {}
    for name, q in outputs.items():
        quant = manifest.tensor(name)
        if quant is None:
            raise UsageError(f"the manifest records no scale for output {name!r} "
                             f"(it lists {', '.join(t.name for t in manifest.outputs)})")
        value = dequantize(q, quant.scale, quant.zero_point)
        per_sample = int(np.prod(quant.shape[1:]))
        out[name] = value.reshape(q.shape[0], *quant.shape[1:]) \
            if per_sample == value[0].size else value
    return out


def open_loadable(path: str, preset: str | None):
    """The parsed loadable, its manifest (None without one) and the preset to run it on.

    A manifest's blob checksums are checked first (an altered blob is named), and
    ``--preset`` must agree with the preset it records; without ``--preset`` the
    recorded one is used (:data:`accel.config.DEFAULT_PRESET` without a manifest).
    """
    from accel.loadable.io import read_loadable
    from accel.loadable.manifest import read_manifest, verify_checksums

    loadable = read_loadable(Path(path).read_bytes())
    manifest = read_manifest(loadable)
    if manifest is None:
        return loadable, None, preset or DEFAULT_PRESET
    verify_checksums(loadable, manifest)
    if preset is not None and preset != manifest.preset:
        raise UsageError(f"--preset {preset} does not match {path!r}, compiled for "
                         f"{manifest.preset}; run it with --preset {manifest.preset} (or "
                         f"without --preset)")
    return loadable, manifest, manifest.preset


def run_loadable(args: argparse.Namespace, labels: list[str] | None) -> int:
    from accel.backends.session import LoadableSession
    from accel.config import get_preset
    from accel.loadable.io import LoadableError
    from accel.runtime.errors import RuntimeFault

    onnx_only = {"--calib": args.calib, "--verify": args.verify, "--image": args.image,
                 "--precision int8": args.precision == "int8", "--device nvdla":
                 args.device == "nvdla", "--input-shape": args.input_shape}
    given = [opt for opt, value in onnx_only.items() if value]
    if given:
        raise UsageError(f"{', '.join(given)} apply to ONNX models; {args.model!r} is an NVDLA "
                         f"loadable (int8 in, int8 out)")
    try:
        loadable, manifest, preset = open_loadable(args.model, args.preset)
        if args.dequantize and manifest is None:
            raise UsageError(f"--dequantize needs the output scales; {args.model!r} records "
                             f"none (no opendla manifest)")
        sess = LoadableSession(loadable, get_preset(preset), trace_regs=args.trace_regs)
        samples, batch = loadable_feeds(args.model, args.input, sess.inputs, manifest)

        def once() -> dict[str, np.ndarray]:
            runs = [sess.run(s) for s in samples]
            return {n: np.concatenate([r[n] for r in runs]) for n in runs[0]}

        outputs, timing = timed(once, batch, args.repeat, args.warmup)
    except (LoadableError, RuntimeFault) as exc:
        raise UsageError(f"cannot run loadable {args.model!r}: {exc}") from exc
    if args.dequantize:
        outputs = dequantize_outputs(outputs, manifest)
    if args.save_outputs:
        save_outputs(args.save_outputs, outputs)
    summaries = [summarize(n, v, args.top_k, labels) for n, v in outputs.items()]
    if args.json:
        print(json.dumps({"loadable": args.model, "preset": preset,
                          "manifest": manifest is not None,
                          "inputs": [{"name": t.name, "shape": list(t.shape)}
                                     for t in sess.inputs],
                          "outputs": summaries, "time": timing.as_dict(),
                          "cycles": sess.cycles}, indent=1))
        return 0
    bound = ", ".join(f"input {t.name} {'x'.join(map(str, t.shape))} int8"
                      for t in sess.inputs) or "no bound input (it reads its own data)"
    recorded = "preset, scales and checksums from its manifest" if manifest is not None \
        else "no manifest"
    print(f"loadable {args.model} on {preset} ({recorded}): {bound}")
    print_outputs(summaries)
    print("\n".join(timing.lines()))
    print(f"estimated DLA cycles per sample: {sess.cycles:,} (cmodel op statistics)")
    return 0


# ------------------------------------------------------------------ ONNX models
def _execute(ex, feeds: dict, per_sample: bool, verify: bool = False):
    """Outputs of ``feeds``, the verification report (with ``verify``) and each
    subgraph's seconds summed over the samples."""
    batch = next(iter(feeds.values())).shape[0]
    times: dict[str, float] = {}

    def add_times() -> None:
        for label, sec in ex.subgraph_times:
            times[label] = times.get(label, 0.0) + sec

    if verify:
        from tengine_host.verify import VerifyReport, verify_run

        report = VerifyReport()
        runs = []
        for i in range(batch):
            runs.append(verify_run(ex, {n: v[i:i + 1] for n, v in feeds.items()}, report)[0])
            add_times()
        return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}, report, times
    if not per_sample:
        outputs = ex.run(feeds)
        add_times()
        return outputs, None, times
    runs = []
    for i in range(batch):
        runs.append(ex.run({n: v[i:i + 1] for n, v in feeds.items()}))
        add_times()
    return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}, None, times


def _batch_one(model: str, graph, feeds: dict, shapes: dict):
    """The model for one sample of ``feeds`` (verification runs sample by sample)."""
    from tengine_host.model import load_model

    if all(graph.tensors[n].shape[0] == 1 for n in feeds):
        return graph
    return load_model(model, input_shapes={**shapes, **{n: (1, *v.shape[1:])
                                                        for n, v in feeds.items()}})


def load_onnx_feeds(args: argparse.Namespace):
    """The graph and its feeds from ``--input``/``--image``; dynamic input shapes are
    taken from the data when no ``--input-shape`` fixes them."""
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model

    shapes = parse_shapes(args.input_shape)
    names = onnx_input_names(args.model)
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise UsageError(f"--input-shape names {', '.join(unknown)}, not a model input "
                         f"({', '.join(names)})")
    try:
        graph = load_model(args.model, input_shapes=shapes)
        dynamic = None
    except OnnxImportError as exc:
        graph, dynamic = None, exc
    if args.image:
        if len(names) != 1:
            raise UsageError(f"--image feeds a one-input model; this one has inputs "
                             f"{', '.join(names)}: use --input NAME=FILE")
        shape = graph.tensors[names[0]].shape if graph is not None else None
        dims = image_dims(args, shape)
        feeds = {names[0]: load_image_batch(args.image, image_options(args, dims))}
    else:
        feeds = parse_inputs(args.input, names)
    if graph is None:   # dynamic dimensions: the data fixes them
        try:
            graph = load_model(args.model, input_shapes={**{n: v.shape for n, v in
                                                            feeds.items()}, **shapes})
        except OnnxImportError as exc:
            if str(exc) == str(dynamic):    # not a dimension the data could fix
                raise UsageError(str(exc)) from None
            raise UsageError(f"{dynamic}; the input data (shapes "
                             f"{ {n: v.shape for n, v in feeds.items()} }) does not fix them "
                             f"either: {exc}") from None
    return graph, check_dtypes(graph, feeds), shapes


def run_onnx(args: argparse.Namespace, labels: list[str] | None) -> int:
    from tengine_host.debug import DebugOptions
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.quant import load_table
    from tengine_host.quant.table import check_table

    debug = DebugOptions.from_env().merged(graph=args.debug_graph, time=args.debug_time,
                                           data=args.debug_data is not None, ref=args.debug_ref)
    if args.debug_data:
        debug = DebugOptions(debug.graph, debug.time, debug.data, debug.ref, args.debug_data)
    if args.precision == "int8" and not args.calib:
        raise UsageError("--precision int8 needs --calib calib.json (opendla quantize)")
    if args.verify and (args.device != "nvdla" or not args.calib):
        raise UsageError("--verify needs --device nvdla and --calib calib.json")
    if args.device == "nvdla" and not args.calib:
        raise UsageError("--device nvdla runs int8 and needs --calib calib.json "
                         "(opendla quantize)")
    graph, feeds, shapes = load_onnx_feeds(args)
    table = load_table(args.calib) if args.calib else None
    if args.precision == "int8" or args.device != "cpu":
        warn_int8_inputs(feeds, table, "--precision int8" if args.device == "cpu"
                         else f"--device {args.device} (int8)")
    graph, per_sample = fit_batch(args.model, graph, feeds, shapes)
    if table is not None and (args.precision == "int8" or args.device != "cpu"):
        check_table(table, graph, f"calibration table {args.calib!r}")
    if args.verify:
        graph = _batch_one(args.model, graph, feeds, shapes)
    keep = keep_float_nodes(args, graph, table)
    cpu = get_device("cpu", precision=args.precision, reference=debug.ref,
                     preset=args.preset, keep_float=keep)
    accel_opts = {"preset": args.preset, "capture": args.verify,
                  "trace_regs": args.trace_regs, "backend": args.backend,
                  "simulator": simulator_of(args) if args.backend == "rtl" else "icarus",
                  "keep_float": keep} \
        if args.device == "nvdla" else {}
    devices = [cpu] if args.device == "cpu" else [get_device(args.device, **accel_opts), cpu]
    batch = next(iter(feeds.values())).shape[0]
    with Executor(graph, devices, table, debug=debug) as ex:
        (outputs, report, times), timing = timed(
            lambda: _execute(ex, feeds, per_sample, args.verify), batch, args.repeat,
            args.warmup)

    rtl = devices[0].rtl_summary if args.backend == "rtl" and args.device == "nvdla" else None
    summaries = [summarize(n, v, args.top_k, labels) for n, v in outputs.items()]
    if args.save_outputs:
        save_outputs(args.save_outputs, outputs)
    part = ex.partition
    counts = part.subgraph_counts()
    if args.json:
        doc = {"partition": part.report().splitlines(),
               "subgraphs": {"nvdla": counts.get("nvdla", 0),
                             "cpu": sum(n for d, n in counts.items() if d != "nvdla")},
               "dla_mac_share": part.share("nvdla")[1],
               "dla_op_share": part.share("nvdla")[0],
               "outputs": summaries, "time": timing.as_dict(),
               "subgraph_ms": {k: s * 1e3 for k, s in times.items()}}
        if rtl is not None:
            doc["rtl"] = rtl
        if report is not None:
            doc.update(bit_exact=report.bit_exact, layers_checked=report.layers_checked,
                       samples=report.samples,
                       mismatches=[m.as_dict() for m in report.mismatches])
        print(json.dumps(doc, indent=1))
        if report is not None and not report.bit_exact:
            raise CheckFailed(report.summary())
        return 0
    print(part.report())
    print_outputs(summaries)
    print("\n".join(timing.lines()))
    print("subgraphs (last run): " + ", ".join(f"{k} {sec * 1e3:.3f} ms"
                                               for k, sec in times.items()))
    if rtl is not None:
        print(f"RTL engine ({args.simulator}): {rtl['convolutions']} convolutions, "
              f"{rtl['pdp']} PDP, {rtl['sdp']} SDP and {rtl['cdp']} CDP operations, "
              f"{rtl['cycles']:,} cycles, each output equal to the cmodel's"
              + (f"; {rtl['split']} convolutions in kernel pieces (weights larger than the "
                 "engine's memory)" if rtl.get("split") else "")
              + "".join(f"; on the cmodel: {n} x {why}" for why, n in rtl["on_cmodel"].items()))
    if report is not None:
        print(report.summary())
        for m in report.mismatches[:10]:
            print(f"  {m.tensor} ({m.op_type} {m.node}, subgraph {m.subgraph}, sample "
                  f"{m.sample}): {m.differing}/{m.total} differ, max |diff| {m.max_abs_diff}")
        if not report.bit_exact:
            raise CheckFailed("the DLA differs from the int8 CPU reference (see above)")
    return 0


def run(args: argparse.Namespace) -> int:
    _validate(args)
    labels = load_labels(args.labels) if args.labels else None
    if is_loadable(args.model):
        return run_loadable(args, labels)
    if args.dequantize:
        raise UsageError("--dequantize applies to loadables (an ONNX model's outputs are "
                         "floats already)")
    args.preset = args.preset or DEFAULT_PRESET
    return run_onnx(args, labels)
