"""``opendla quantize MODEL -i INPUTS -o calib.json``: int8 calibration table.

Options follow Tengine's quant tool: ``-g`` C,H,W, ``-w`` mean, ``-s`` scale,
``-b`` swap R/B, ``-c`` center crop, ``-y`` letterbox, ``-a`` algorithm
(auto, minmax, kl, percentile).  The table maps each tensor to scale, min and max.

The calibration checks itself: a quarter of the inputs (8 or more) is held out,
or with 2-7 inputs the table is cross-validated, and the int8 CPU reference of
exactly the partition the DLA of ``--preset`` runs is compared with fp32 on them:
per model output the SQNR, cosine and (class scores) top-1 agreement, per DLA
layer the SQNR, worst first.  Outputs below ``--min-sqnr`` dB or ``--min-top1``
are warned about by name with the worst layers; ``--report FILE`` writes it all
as JSON.  Zero points, cross-layer equalization and bias correction are tried on
the same held-out samples (``--zero-points``, ``--equalize``, ``--bias-correction``:
auto, on or off) and the best is written, then the best again with the layers writing
the model's outputs in fp32 on the CPU (``--float-outputs``); the table records the
weight rewrites and the nodes kept in fp32, which the other commands apply.  Inputs with NaN/Inf are
refused; inputs that are all zero, constant or far outside a normalized range, or that
the chosen scales saturate, are warned about.  Dynamic input shapes are
taken from the arrays (or from ``-g`` for images) when ``--input-shape`` does
not fix them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from dataclasses import asdict
from pathlib import Path

from accel.config import PRESETS
from opendla.commands._inputs import (
    add_image_options,
    image_dims,
    image_options,
)
from opendla.errors import UsageError
from tengine_host.quant.fidelity import (
    CHOICES,
    FLOAT_OUTPUTS_GAIN_DB,
    FLOAT_OUTPUTS_MAC_SHARE,
    MAX_KEPT_FLOAT,
    MIN_OUTPUT_SQNR_DB,
    MIN_TOP1_AGREEMENT,
    WORST_LAYERS,
)

#: Tengine's -a takes numbers; the names are accepted too.
ALGORITHM_ALIASES = {"0": "minmax", "1": "kl", "2": "percentile", "3": "auto"}
#: -a percentile's percentile when --percentile is not given
DEFAULT_PERCENTILE = 99.99


def _algorithm(text: str) -> str:
    from tengine_host.quant.calibrate import ALGORITHMS

    algo = ALGORITHM_ALIASES.get(text, text)
    if algo not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"algorithm {text!r} not in {', '.join(ALGORITHMS)} "
                                         f"(or 0, 1, 2, 3)")
    return algo


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="calibrate activation scales to a JSON table",
                              description=__doc__)
    p.add_argument("model", help="ONNX model")
    p.add_argument("-i", "--inputs", required=True,
                   help=".npz (arrays named after the model inputs), .npy (single input), "
                        "or a folder of images")
    p.add_argument("-o", "--output", required=True, help="calibration table to write (JSON)")
    add_image_options(p)
    p.add_argument("-a", "--algorithm", type=_algorithm, default="auto",
                   help="auto (3: each tensor's range chosen by the quantization error it "
                        "causes; the default), minmax (0), kl (1, entropy) or percentile (2)")
    p.add_argument("--percentile", type=float, default=None,
                   help=f"for -a percentile, in (0, 100] (default {DEFAULT_PERCENTILE:g})")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix a dynamic input shape")
    p.add_argument("--preset", default="nv_small", choices=list(PRESETS),
                   help="the DLA whose partition the fidelity check runs (default nv_small)")
    p.add_argument("--report", metavar="FILE",
                   help="write the held-out fidelity report (outputs, layers) as JSON")
    p.add_argument("--min-sqnr", type=float, default=MIN_OUTPUT_SQNR_DB, metavar="DB",
                   help=f"warn about outputs whose held-out SQNR is below DB "
                        f"(default {MIN_OUTPUT_SQNR_DB:g})")
    p.add_argument("--min-top1", type=float, default=MIN_TOP1_AGREEMENT, metavar="SHARE",
                   help=f"warn about class-score outputs whose held-out top-1 agreement with "
                        f"fp32 is below SHARE, in [0, 1] (default {MIN_TOP1_AGREEMENT:g})")
    p.add_argument("--zero-points", choices=list(CHOICES), default="auto",
                   help="zero point -128 for one-signed activations (twice the resolution): "
                        "auto (when the held-out check measures a gain; the default), on, off")
    p.add_argument("--equalize", choices=list(CHOICES), default="auto",
                   help="cross-layer equalization: scales moved between consecutive layers, "
                        "and into the layers around each residual block and HardSwish, so "
                        "that each tensor's channels share one range better (pairs of layers "
                        "by their weights, or by their data too: both are tried): auto (when "
                        "the held-out check measures a gain; the default), on, off")
    p.add_argument("--bias-correction", choices=list(CHOICES), default="auto",
                   help="subtract from each DLA layer's bias the mean output shift its int8 "
                        "weights cause, measured on the calibration inputs: auto (the "
                        "default), on, off")
    p.add_argument("--float-outputs", choices=["auto", "off"], default="auto",
                   help="auto (the default): also measure the best table with the DLA layers "
                        "writing the model's outputs (not class scores; at most "
                        f"{FLOAT_OUTPUTS_MAC_SHARE * 100:g} %% of the MACs) in fp32 on the "
                        "CPU, and "
                        "keep that when an output's held-out SQNR gains "
                        f"{FLOAT_OUTPUTS_GAIN_DB:g} dB or more (int8 outputs are rounded and "
                        "clip past the calibrated range); off: never")
    p.add_argument("--keep-float", default="", metavar="NAME,...|auto",
                   help="nodes (or the tensors they produce) to keep in fp32 on the CPU, "
                        "measured so; 'auto': when an output misses the fidelity target, "
                        f"the most sensitive layers (up to {MAX_KEPT_FLOAT}) until it is met; "
                        "the table records the nodes, and run, compile, compare and eval keep "
                        "them in fp32 unless given --keep-float")
    p.add_argument("--sensitivity", action="store_true",
                   help="also rank every DLA layer by the output error its quantization alone "
                        "causes (one partial run per layer and checked sample; slow on large "
                        "models); printed and written to --report")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _shapes_from_data(src: Path, names: list[str], dims) -> dict[str, tuple[int, ...]]:
    """Batch-1 input shapes the calibration data fixes: -g for images, else the arrays'."""
    from opendla.commands._inputs import read_arrays

    if src.is_dir():
        return {names[0]: (1, *dims)} if dims is not None and len(names) == 1 else {}
    arrays = read_arrays(src)
    if "" in arrays and len(names) == 1:
        arrays = {names[0]: arrays[""]}
    return {n: (1, *a.shape[1:]) if a.ndim >= 2 else a.shape
            for n, a in arrays.items() if n in names}


def _validate(args: argparse.Namespace) -> Path:
    src = Path(args.inputs)
    if not src.exists():
        raise UsageError(f"-i {args.inputs!r} does not exist (an .npz, an .npy or an image "
                         f"folder)")
    if args.percentile is None:
        args.percentile = DEFAULT_PERCENTILE
    elif args.algorithm != "percentile":
        # another algorithm never reads it: say so rather than calibrate without it
        raise UsageError(f"--percentile applies to -a percentile only (-a is "
                         f"{args.algorithm})")
    if args.algorithm == "percentile" and not 0 < args.percentile <= 100:
        raise UsageError(f"--percentile {args.percentile:g} must be in (0, 100]")
    if not 0 <= args.min_top1 <= 1:
        raise UsageError(f"--min-top1 {args.min_top1:g} must be in [0, 1]")
    if not math.isfinite(args.min_sqnr):
        raise UsageError(f"--min-sqnr {args.min_sqnr:g} must be a finite number of dB")
    for option, name in (("-o", args.output), ("--report", args.report)):
        if name is None:
            continue
        out = Path(name)
        if out.is_dir():
            raise UsageError(f"{option} {name!r} is a directory; give a .json file name")
        if not out.parent.exists():
            raise UsageError(f"{option} {name!r}: folder {str(out.parent)!r} does not exist")
    if args.report is not None and Path(args.report).resolve() == Path(args.output).resolve():
        raise UsageError(f"--report {args.report!r} is the table's own file (-o); give another")
    return src


def run(args: argparse.Namespace) -> int:
    from opendla.commands._inputs import keep_float_nodes
    from opendla.commands.run import onnx_input_names, parse_shapes
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table
    from tengine_host.quant.calibrate import input_warnings
    from tengine_host.quant.dataset import load_arrays, load_images
    from tengine_host.quant.fidelity import (
        calibrate_checked,
        choose_keep_float,
        json_row,
        sensitivity,
        weight_rewrites,
    )
    from tengine_host.quant.input_check import check_int8_samples
    from tengine_host.quant.zero_point import assign_zero_points

    src = _validate(args)
    shapes = parse_shapes(args.input_shape)
    try:
        graph = load_model(args.model, input_shapes=shapes or None)
    except OnnxImportError:
        if shapes:
            raise
        # dynamic dimensions: the calibration data fixes them, if it can
        shapes = _shapes_from_data(src, onnx_input_names(args.model), args.dims)
        if not shapes:
            raise
        graph = load_model(args.model, input_shapes=shapes)
    if src.is_dir():
        dims = image_dims(args, graph.tensors[graph.inputs[0]].shape)
        opts = image_options(args, dims)
        samples = load_images(src, graph, dims, opts["mean"], opts["scale"],
                              swap_rb=opts["swap_rb"], center_crop=opts["center_crop"],
                              letterbox=opts["letterbox"])
    else:
        samples = load_arrays(src, graph)
    check_int8_samples(samples, None, "quantize")     # NaN/Inf, as every int8 path refuses
    auto_keep = args.keep_float == "auto"
    keep = frozenset() if auto_keep else keep_float_nodes(args, graph)
    for message in input_warnings(graph, samples):
        print(f"warning: {message}", file=sys.stderr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrate_fn = calibrate
        variants = {}
        if args.zero_points == "auto":
            variants["zero points"] = assign_zero_points
        elif args.zero_points == "on":
            def calibrate_fn(graph, samples, **options):
                return assign_zero_points(graph, calibrate(graph, samples, **options))
        table, report = calibrate_checked(
            graph, samples, preset=args.preset, calibrate_fn=calibrate_fn,
            variants=variants, rewrites=weight_rewrites(args.preset, keep, args.equalize,
                                                       args.bias_correction, graph),
            progress=not args.no_progress, algorithm=args.algorithm,
            percentile=args.percentile, keep_float=keep,
            float_outputs=args.float_outputs == "auto")
    checked = _checked_samples(samples, report)
    choice = None
    if auto_keep and report.check != "unchecked":
        choice = choose_keep_float(graph, table, checked, report, preset=args.preset,
                                   min_sqnr_db=args.min_sqnr, min_top1=args.min_top1,
                                   progress=not args.no_progress)
        table, report = choice.table, choice.report
        keep = frozenset(table.keep_float)
    else:
        table.keep_float = tuple(sorted(keep | set(table.keep_float)))   # as checked
    for message in check_int8_samples(samples, table, "quantize"):   # what the scales clip
        print(f"warning: {message}", file=sys.stderr)
    ranked = None
    if args.sensitivity:
        ranked = sensitivity(graph, table, checked, preset=args.preset,
                             progress=not args.no_progress, keep_float=keep)
    for message in dict.fromkeys(str(w.message) for w in caught):    # once each
        print(f"warning: {message}", file=sys.stderr)
    try:
        save_table(table, args.output)
        if args.report is not None:
            Path(args.report).write_text(json.dumps(
                {"model": args.model, "algorithm": args.algorithm, "preset": args.preset,
                 "samples": len(samples), "min_sqnr_db": args.min_sqnr,
                 "min_top1": args.min_top1, **report.as_dict(),
                 "keep_float": list(table.keep_float),
                 **({"keep_float_auto": {"met": choice.met,
                                         "dla_subgraphs": choice.dla_subgraphs,
                                         "dla_mac_share": choice.dla_mac_share}}
                    if choice else {}),
                 **({"sensitivity": [json_row(asdict(r)) for r in ranked]} if ranked else {})},
                indent=1) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or args.output!r}: {exc.strerror}") from None
    print(f"calibrated {len(table)} tensors over {report.calibration_samples} of "
          f"{len(samples)} samples ({args.algorithm}) -> {args.output}")
    print(format_report(report), flush=True)
    chosen = [n for n in table.keep_float if n not in keep]
    if chosen and choice is None:       # model outputs int8 cannot hold, or fp32 outputs
        print(f"kept in fp32 on the CPU as measured ({len(chosen)} "
              f"node{'s' * (len(chosen) != 1)}): "
              f"{', '.join(chosen)}; the table records them for run, compile, compare and "
              f"eval", flush=True)
    if choice is not None and choice.nodes:
        (s0, s1), (m0, m1) = choice.dla_subgraphs, choice.dla_mac_share
        print(f"kept in fp32 on the CPU ({'target met' if choice.met else 'target not met'}): "
              f"{','.join(choice.nodes)}; DLA subgraphs {s0} -> {s1}, DLA share of the MACs "
              f"{m0:.1%} -> {m1:.1%}; the table records them for run, compile, compare "
              f"and eval", flush=True)
    if ranked:
        print("layers by the output SQNR their quantization alone leaves (worst first): "
              + ", ".join(f"{_short(r.name, 24)} ({r.op_type}) {r.output_sqnr_db:.1f} dB"
                          for r in ranked[:WORST_LAYERS]), flush=True)
    for message in report.warnings(args.min_sqnr, args.min_top1):
        print(f"warning: {message}", file=sys.stderr)
    return 0


def _checked_samples(samples: list, report) -> list:
    """The samples the sensitivity runs on: the held-out ones, else (cross-validated or
    a single sample) all of them."""
    if report.check == "held-out":
        from tengine_host.quant.fidelity import split

        (_, test), = split(len(samples))[1]
        return [samples[i] for i in test]
    return samples


def format_report(report) -> str:
    """The fidelity report as a few lines of text: outputs, then the worst layers."""
    if report.check == "unchecked":
        return "int8 fidelity: unchecked (one sample: nothing to hold out)"
    how = (f"{report.checked_samples} held-out samples" if report.check == "held-out" else
           f"{report.checked_samples} samples, {report.folds}-fold cross-validation")
    applied = ""
    if len(report.variants) > 1:
        applied = "; tried " + ", ".join(f"{name} {v:.1f} dB" for name, v in
                                         report.variants.items()) + f": {report.applied} kept"
    lines = [f"int8 fidelity against fp32 ({how}{applied}):",
             f"  {'output':<32} {'SQNR dB':>8} {'cosine':>8} {'max err':>10} {'top-1':>6} "
             f"{'clipped':>8}"]
    for o in report.outputs:
        top1 = "" if o.top1_agreement is None else f"{o.top1_agreement:.0%}"
        clipped = f"{o.clipped:.3%}" if o.clipped else "0"
        lines.append(f"  {_short(o.name):<32} {o.sqnr_db:>8.1f} {o.cosine:>8.4f} "
                     f"{o.max_error:>10.4g} {top1:>6} {clipped:>8}")
    if report.layers:
        lines.append("  DLA layers adding the most error (SQNR alone / in context, dB): "
                     + ", ".join(
            f"{_short(la.name, 24)} ({la.op_type}) {la.sqnr_db:.1f} / {la.sqnr_in_context_db:.1f}"
            for la in report.layers[:WORST_LAYERS]))
    return "\n".join(lines)


def _short(name: str, width: int = 32) -> str:
    """``name``, its middle elided to fit ``width`` (both ends tell tensors apart)."""
    if len(name) <= width:
        return name
    keep = width - 3
    return name[:keep // 2] + "..." + name[-(keep - keep // 2):]
