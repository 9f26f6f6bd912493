"""``opendla demo``: LeNet-5 on scikit-learn's digits, int8 on a simulated NVDLA.

The committed ``tengine_host/models/lenet5_digits.onnx`` (trained by
``scripts/train_lenet_digits.py``) is calibrated on training digits,
partitioned (the whole network on the DLA, the softmax on the CPU),
compiled for a hardware preset and run on the held-out digits on the
register-level cmodel.  Every tensor the DLA computes is checked byte for
byte against the int8 CPU reference of the same partition
(:mod:`tengine_host.verify`: the op table's plain-numpy references with the
compiler's parameters, fed by the reference path's own values).  The exit
status is 0 only when every tensor of every image matched (1 otherwise, 2
for bad options).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accel.config import PRESETS
from opendla.commands._backend import add_backend_options, simulator_of
from opendla.errors import CheckFailed, UsageError

MODEL = Path(__file__).resolve().parents[2] / "tengine_host" / "models" / "lenet5_digits.onnx"
# The split of scripts/train_lenet_digits.py (not imported: it needs torch):
# pixels / 16, the LAST 360 digits are held out.
TEST_COUNT = 360
CLOCK_HZ = 100e6  # only to express the cycle estimate as a latency


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", help="LeNet-5 digits: fp32 vs onnxruntime vs int8 NVDLA",
                              description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="nv_small", choices=list(PRESETS),
                   help="hardware preset (default nv_small)")
    p.add_argument("--limit", type=int, default=TEST_COUNT, metavar="N",
                   help=f"evaluate the first N held-out digits (default all {TEST_COUNT})")
    p.add_argument("--calib-samples", type=int, default=200, metavar="N",
                   help="training digits used for calibration (default 200)")
    add_backend_options(p)
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of tables")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test), x float32 [N, 1, 8, 8] in [0, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    return x[:-TEST_COUNT], y[:-TEST_COUNT], x[-TEST_COUNT:], y[-TEST_COUNT:]


@dataclass
class LayerCheck:
    """Bit-exactness tally of one DLA tensor over all images."""

    name: str
    node: str
    op_type: str
    shape: tuple[int, ...]
    images: int = 0
    bad_images: int = 0
    bad_bytes: int = 0
    total_bytes: int = 0
    max_abs_diff: int = 0


@dataclass
class PathResult:
    label: str
    pred: np.ndarray
    seconds: list[float] = field(default_factory=list)
    dla_seconds: list[float] = field(default_factory=list)  # DLA subgraphs only
    partition: Any = None

    def row(self, y: np.ndarray) -> dict:
        correct = int(np.sum(self.pred == y))
        row = {"path": self.label, "correct": correct, "total": int(y.size),
               "accuracy": correct / y.size, "ms_per_image": 1e3 * float(np.mean(self.seconds))}
        if self.dla_seconds:
            row["dla_ms_per_image"] = 1e3 * float(np.mean(self.dla_seconds))
        return row


def tally(report, checks: dict[str, LayerCheck], sample: int) -> None:
    """Add one image's verification (``tengine_host.verify.VerifyReport``) to ``checks``."""
    bad = {m.tensor: m for m in report.mismatches if m.sample == sample}
    for name, c in report.checked.items():
        t = checks.setdefault(name, LayerCheck(name, c.node, c.op_type, c.shape))
        size = int(np.prod(c.shape))
        t.images += 1
        t.total_bytes += size
        m = bad.get(name)
        if m is not None:
            t.bad_images += 1
            t.bad_bytes += m.differing
            t.max_abs_diff = max(t.max_abs_diff, m.max_abs_diff)


def _run_executor(graph, devices, table, xs, label: str, progress: bool, after=None
                  ) -> PathResult:
    """Run ``xs`` one image at a time; ``after(i, executor)`` runs outside the timed region."""
    from tengine_host.executor import Executor
    from tengine_host.quant.progress import progress_bar

    res = PathResult(label, np.zeros(len(xs), np.int64))
    dla = any(d.name == "nvdla" for d in devices)
    with Executor(graph, devices, table) as ex, \
            progress_bar(len(xs), label, enabled=progress) as bar:
        name, out = graph.inputs[0], graph.outputs[0]
        for i, x in enumerate(xs):
            start = time.perf_counter()
            probs = ex.run({name: x[None]})[out]
            res.seconds.append(time.perf_counter() - start)
            if dla:  # Executor labels subgraph times "[i] <device name>"
                res.dla_seconds.append(sum(sec for lab, sec in ex.subgraph_times
                                           if lab.endswith(" nvdla")))
            res.pred[i] = int(np.argmax(probs))
            if after is not None:
                after(i, ex)
            bar.update()
    res.partition = ex.partition
    return res


def _run_onnxruntime(xs, progress: bool) -> PathResult:
    import onnxruntime as ort

    from tengine_host.quant.progress import progress_bar

    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    res = PathResult("onnxruntime", np.zeros(len(xs), np.int64))
    with progress_bar(len(xs), "onnxruntime", enabled=progress) as bar:
        for i, x in enumerate(xs):
            start = time.perf_counter()
            (probs,) = sess.run(None, {name: x[None]})
            res.seconds.append(time.perf_counter() - start)
            res.pred[i] = int(np.argmax(probs))
            bar.update()
    return res


def _validate(args: argparse.Namespace, n_train: int) -> None:
    from accel.config import get_preset

    get_preset(args.preset)  # the error lists the valid names
    if not 1 <= args.limit <= TEST_COUNT:
        raise UsageError(f"--limit {args.limit} must be in 1..{TEST_COUNT}")
    if not 1 <= args.calib_samples <= n_train:
        raise UsageError(f"--calib-samples {args.calib_samples} must be in 1..{n_train}")


def evaluate(args: argparse.Namespace) -> dict:
    """Run every path and return the summary that :func:`run` prints."""
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate
    from tengine_host.quant.progress import progress_bar
    from tengine_host.verify import VerifyReport, verify_run

    x_train, _, x_test, y_test = load_split()
    _validate(args, len(x_train))
    progress = not args.no_progress
    xs, ys = x_test[:args.limit], y_test[:args.limit]
    graph = load_model(MODEL)
    name = graph.inputs[0]
    table = calibrate(graph, [{name: x[None]} for x in x_train[:args.calib_samples]],
                      progress=progress)

    fp32 = _run_executor(graph, [get_device("cpu")], None, xs, "fp32 CPU", progress)
    ort_res = _run_onnxruntime(xs, progress)

    nvdla = get_device("nvdla", preset=args.preset, capture=True, backend=args.backend,
                       simulator=simulator_of(args) if args.backend == "rtl" else "icarus")
    checks: dict[str, LayerCheck] = {}
    cycles = np.zeros(len(xs), np.int64)
    ref = PathResult("int8 CPU reference", np.zeros(len(xs), np.int64))
    report = VerifyReport()
    where = "cmodel" if args.backend == "cmod" else f"RTL ({args.simulator})"
    dla = PathResult(f"int8 DLA {args.preset} {where}", np.zeros(len(xs), np.int64))
    with Executor(graph, [nvdla, get_device("cpu")], table) as ex, \
            progress_bar(len(xs), dla.label, enabled=progress) as bar:
        out = graph.outputs[0]
        for i, x in enumerate(xs):
            start = time.perf_counter()
            probs, ref_probs, _ = verify_run(ex, {name: x[None]}, report)
            total = time.perf_counter() - start
            device = sum(sec for _, sec in ex.subgraph_times)
            dla.seconds.append(device)
            dla.dla_seconds.append(sum(sec for lab, sec in ex.subgraph_times
                                       if lab.endswith(" nvdla")))
            ref.seconds.append(total - device)
            dla.pred[i], ref.pred[i] = int(np.argmax(probs[out])), int(np.argmax(ref_probs[out]))
            cycles[i] = sum(int(h.cycles) for d, _, h in ex.prepared if d is nvdla)
            tally(report, checks, i)
            bar.update()
    dla.partition = ex.partition
    part = dla.partition
    layers = [vars(c) for c in checks.values()]
    return {
        "model": str(MODEL), "preset": args.preset, "images": int(len(xs)),
        "calib_samples": args.calib_samples,
        "paths": [r.row(ys) for r in (fp32, ort_res, ref, dla)],
        "fp32_onnxruntime_agree": int(np.sum(fp32.pred == ort_res.pred)),
        "dla_fp32_agree": int(np.sum(dla.pred == fp32.pred)),
        "dla_int8_ref_agree": int(np.sum(dla.pred == ref.pred)),
        "subgraphs": len(part.parts),
        "dla_subgraphs": sum(dev is nvdla for dev, _ in part.parts),
        "partition": part.report().splitlines(),
        "layers": layers,
        "bit_exact": bool(layers) and report.bit_exact
        and all(c.images == len(xs) for c in checks.values()),
        "est_cycles_per_image": float(np.mean(cycles)),
        "clock_hz": CLOCK_HZ,
        "backend": args.backend,
        **({"rtl": nvdla.rtl_summary} if args.backend == "rtl" else {}),
    }


def format_report(s: dict) -> str:
    """The human-readable tables of an :func:`evaluate` summary."""
    n = s["images"]
    lines = [f"LeNet-5 on scikit-learn digits: {n} held-out images, preset {s['preset']}, "
             f"calibrated on {s['calib_samples']} training digits", ""]
    lines += ["partition:"] + [f"  {line}" for line in s["partition"]] + [""]
    lines.append(f"{'path':<28} {'accuracy':>9} {'correct':>9} {'ms/image':>9}")
    for p in s["paths"]:
        note = (f"  (DLA subgraphs {p['dla_ms_per_image']:.3f} ms, rest on the CPU)"
                if "dla_ms_per_image" in p else "")
        lines.append(f"{p['path']:<28} {p['accuracy']:>9.2%} "
                     f"{p['correct']:>4}/{p['total']:<4} {p['ms_per_image']:>9.3f}{note}")
    lines.append(f"top-1 agreement: int8 DLA vs fp32 {s['dla_fp32_agree']}/{n}, "
                 f"vs int8 CPU reference {s['dla_int8_ref_agree']}/{n}; "
                 f"fp32 vs onnxruntime {s['fp32_onnxruntime_agree']}/{n}")
    lines += ["", "DLA tensors vs the int8 CPU reference of the same partition:",
              f"  {'tensor':<28} {'op':<10} {'shape':>12} {'bad img':>9} {'bad bytes':>14}"]
    for c in s["layers"]:
        lines.append(f"  {c['name'][-28:]:<28} {c['op_type']:<10} "
                     f"{'x'.join(map(str, c['shape'][1:])):>12} "
                     f"{c['bad_images']:>5}/{c['images']:<3} "
                     f"{c['bad_bytes']:>7}/{c['total_bytes']}")
    verdict = ("yes, every byte of every DLA tensor and image" if s["bit_exact"] else
               "NO" if s["layers"] else "NO: no layer ran on the DLA")
    lines.append(f"bit-exact: {verdict}")
    cyc = s["est_cycles_per_image"]
    lines += ["", f"subgraphs: {s['subgraphs']} ({s['dla_subgraphs']} on the DLA)",
              f"estimated DLA cycles per image: {cyc:,.0f} (cmodel op statistics, not a "
              f"measurement) = {cyc / s['clock_hz'] * 1e6:.1f} us at "
              f"{s['clock_hz'] / 1e6:.0f} MHz"]
    if "rtl" in s:
        r = s["rtl"]
        lines.append(f"RTL engine: {r['convolutions']} convolutions, {r['pdp']} PDP, "
                     f"{r['sdp']} SDP and {r['cdp']} CDP operations, {r['cycles']:,} cycles "
                     f"({r['cycles'] / n:,.0f} per image), each output equal to the cmodel's")
        if r.get("split"):
            lines.append(f"  {r['split']} convolution(s) in kernel pieces: weights larger "
                         "than the engine's memory")
        for why, count in r["on_cmodel"].items():
            lines.append(f"  on the cmodel: {count} op(s): {why}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from accel.runtime.errors import RuntimeFault

    try:
        summary = evaluate(args)
    except RuntimeFault as exc:         # e.g. an RTL convolution differs from the cmodel
        raise CheckFailed(str(exc)) from exc
    print(json.dumps(summary, indent=1) if args.json else format_report(summary))
    if not summary["bit_exact"]:
        layers, n = summary["layers"], summary["images"]
        bad = [c["name"] for c in layers if c["bad_bytes"] or c["images"] != n]
        raise CheckFailed(f"the DLA differs from the int8 CPU reference in {', '.join(bad)}"
                          if bad else "no layer ran on the DLA")
    return 0
